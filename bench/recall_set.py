"""The recall set of bench/recall.py, generated in code (nothing downloaded).

A coding agent's session of filler turns (requests, tool calls, test logs, tracebacks, diffs)
with planted facts, each asked back later by a question that shares no content word with it
(``check_disjoint`` asserts that), and planted exact tokens (file names, error codes, hashes,
ticket ids), each beside near-misses (``E1042`` vs ``E1024``) that full text must tell apart.
Deterministic: the same seed gives the same set.

``build_dialogue``: a second dev set, a long chat between friends (each turn prefixed with
its speaker, as a messaging app would store it), with personal facts planted in it and
asked back later the way people ask about a conversation: naming the person and often the
place or thing, rarely in the fact's own words ("When did Anna move to Lisbon?" of "Anna: we
finally moved to Lisbon in March!"), among distractors about the same people and places.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

# (fact stated in the session, question asked much later): no content word in common.
FACTS: list[tuple[str, str]] = [
    (
        "The staging database password rotates every Tuesday at 03:00 UTC.",
        "When does the credential for the pre-production DB get changed?",
    ),
    (
        "Our CI runners are limited to four gigabytes of memory each.",
        "How much RAM do the build machines have?",
    ),
    (
        "Maria owns the payments service and approves its releases.",
        "Who is responsible for billing code and signs off deploys?",
    ),
    (
        "We decided to drop support for Python 3.9 next quarter.",
        "Which interpreter release are we abandoning in the coming months?",
    ),
    (
        "The nightly backup job writes archives to the cold storage bucket in Frankfurt.",
        "Where do the scheduled snapshots of our data end up?",
    ),
    (
        "Never force-push to the release branch; reviewers must rebase instead.",
        "Are we allowed to overwrite history on the shipping line of code?",
    ),
    (
        "The mobile app talks to the API through a gateway that caps clients at 100 requests per minute.",
        "What throttling applies to phone traffic?",
    ),
    (
        "Customer emails are sent via Postmark, not our own SMTP relay.",
        "Which provider delivers messages to users' inboxes?",
    ),
    (
        "The feature flag for dark mode is on only for internal staff.",
        "Who can currently see the night theme toggle?",
    ),
    (
        "Docker images are rebuilt from scratch every Sunday to pick up security patches.",
        "How often do we refresh containers for vulnerability fixes?",
    ),
    (
        "The search cluster runs Elasticsearch 8 on three nodes.",
        "How many machines serve full-text queries, and what engine?",
    ),
    (
        "Logs are kept for thirty days and then deleted.",
        "How long do we retain application output before purging it?",
    ),
    (
        "The legacy monolith still handles invoicing until the migration finishes.",
        "Which old system keeps generating bills for now?",
    ),
    (
        "Frontend tests use Playwright with Chromium only.",
        "What browser automation tool checks the UI?",
    ),
    (
        "The team standup happens at 9:30 Berlin time on weekdays.",
        "When is the daily sync meeting?",
    ),
    (
        "Our error budget allows 43 minutes of downtime per month.",
        "How much outage can the service tolerate in thirty days?",
    ),
    (
        "The analytics warehouse is BigQuery, loaded hourly by Airflow.",
        "Where do reporting tables live, and how frequently are they refreshed?",
    ),
    (
        "Secrets are stored in Vault, never in environment files committed to git.",
        "Where should API keys and tokens be kept?",
    ),
    (
        "The on-call engineer this week is Tom, reachable on the pager rotation.",
        "Who handles incidents right now?",
    ),
    (
        "Image uploads larger than 10 MB are rejected by the CDN.",
        "What is the maximum size for pictures users can send?",
    ),
    (
        "We chose PostgreSQL over MySQL because of its JSONB support.",
        "Why was that particular relational engine picked?",
    ),
    (
        "The customer churn dashboard lives in Grafana under the growth folder.",
        "Where can I find charts about users leaving?",
    ),
    (
        "Unit tests must finish in under two minutes or the pipeline fails.",
        "What is the time limit on the fast checks?",
    ),
    (
        "The office Wi-Fi blocks outbound SSH, so use the VPN.",
        "How do I reach servers remotely from the workplace network?",
    ),
    (
        "Translations are managed in Crowdin and synced on every merge.",
        "How is localisation of strings handled?",
    ),
    (
        "The recommendation model retrains every night on the previous day's clicks.",
        "How fresh is the personalisation engine?",
    ),
    (
        "Refunds above 500 euros need a manager's approval.",
        "What happens when someone wants a large amount of money returned?",
    ),
    (
        "Our Kubernetes cluster autoscales between 3 and 12 workers.",
        "What is the minimum and maximum node count of the container platform?",
    ),
    (
        "The public API is versioned in the URL path, like /v2/orders.",
        "How do clients pick which revision of the interface they call?",
    ),
    (
        "The design system's primary colour is teal, hex 0F766E.",
        "What main brand hue do buttons use?",
    ),
    (
        "Load tests showed the checkout endpoint saturates at 800 requests per second.",
        "What throughput can purchasing handle before it tops out?",
    ),
    (
        "The data retention policy requires deleting inactive accounts after two years.",
        "When must dormant user profiles be removed?",
    ),
    (
        "We pin all dependencies with a lock file and update them monthly via Renovate.",
        "How are third-party package versions kept current?",
    ),
    (
        "The support team works from Lisbon and covers European hours.",
        "Where are the helpdesk staff based?",
    ),
    ("Cron jobs run in UTC, never in local time.", "Which timezone do scheduled tasks follow?"),
    (
        "The video transcoder uses FFmpeg on spot instances to save cost.",
        "How do we keep media conversion cheap?",
    ),
    ("Passwords are hashed with Argon2id.", "Which algorithm protects stored login secrets?"),
    (
        "The QA environment is reset with fresh fixtures every morning.",
        "When does the testing sandbox get its data wiped?",
    ),
    (
        "Our SLA promises support replies within four business hours.",
        "How quickly must the helpdesk answer tickets?",
    ),
    (
        "The map tiles come from a self-hosted OpenStreetMap server.",
        "Where does geographic imagery originate?",
    ),
    (
        "Marketing pages are built with Astro and deployed to Netlify.",
        "What stack powers the promotional website?",
    ),
    (
        "The GraphQL schema is the source of truth for the client types.",
        "Where are frontend typings generated from?",
    ),
    (
        "Feature branches are deleted automatically after merging.",
        "What happens to topic lines of work once integrated?",
    ),
    (
        "Accessibility audits happen before every major release.",
        "When do we check usability for disabled people?",
    ),
    (
        "The queue is RabbitMQ, with dead letters kept for a week.",
        "Which message broker do we use, and how long are failed messages held?",
    ),
    (
        "The billing cycle closes on the last calendar day of each month.",
        "When does the invoicing period end?",
    ),
    (
        "Only two people have production database write access: Ana and Lee.",
        "Who can modify live data directly?",
    ),
    (
        "The Android build requires JDK 17.",
        "Which Java toolkit is needed to compile for phones running Google's OS?",
    ),
    (
        "We rolled back last Friday's deploy because checkout latency doubled.",
        "Why was the recent release reverted?",
    ),
    (
        "The company holiday freeze starts on December 20 and lasts until January 3.",
        "When are code pushes paused over the winter break?",
    ),
    (
        "Webhooks are signed with HMAC-SHA256 using a per-tenant secret.",
        "How can receivers verify that callbacks are authentic?",
    ),
    (
        "Crash reports go to Sentry, grouped by release.",
        "Which tool collects application exceptions?",
    ),
]

# (item text holding the token, the query, near-miss texts full text must not rank first)
EXACT: list[tuple[str, str, list[str]]] = [
    (
        "Traceback: ValueError raised in src/billing/invoice_render.py line 88",
        "invoice_render.py",
        ["Opened src/billing/invoice_parse.py to read the parser", "The invoice renderer is slow"],
    ),
    (
        "pytest failed with error code E1042 in the date parser",
        "E1042",
        ["Error E1024 was fixed yesterday", "E1043 is unrelated"],
    ),
    (
        "Reverted commit 9c1e4f7a2b because it broke the migration",
        "9c1e4f7a2b",
        ["Cherry-picked 9c1e4f7a3b onto main", "commit 1c1e4f7a2b landed"],
    ),
    (
        "Ticket PAY-3318: refunds double-charged for some customers",
        "PAY-3318",
        ["Ticket PAY-3381 is about currency display", "PAY-3319 closed"],
    ),
    (
        "The worker crashed with OOMKilled in pod ingest-7f9d",
        "ingest-7f9d",
        ["pod ingest-7f9e restarted cleanly", "ingest workers scale out"],
    ),
    (
        "Config key cache.ttl_seconds was set to 900 in settings.toml",
        "cache.ttl_seconds",
        ["cache.max_entries stays at 10000", "ttl for sessions"],
    ),
    (
        "Function parseRangeInclusive returns an off-by-one result",
        "parseRangeInclusive",
        ["parseRange works for open ranges", "range parsing docs"],
    ),
    (
        "Migration 20261103_add_tenant_column failed on Postgres",
        "20261103_add_tenant_column",
        ["20261102_add_index ran fine", "tenant columns planned"],
    ),
    (
        "HTTP 503 from upstream svc-geo-lookup during the load test",
        "svc-geo-lookup",
        ["svc-geo-render is healthy", "geo lookups are cached"],
    ),
    (
        "The env var FEATURE_X_ROLLOUT_PCT controls the canary percentage",
        "FEATURE_X_ROLLOUT_PCT",
        ["FEATURE_Y_ROLLOUT_PCT is unused", "canary rollout notes"],
    ),
    (
        "Build artifact app-release-4.12.7.apk uploaded to the store",
        "app-release-4.12.7.apk",
        ["app-release-4.12.6.apk was withdrawn", "release artifacts"],
    ),
    (
        "CVE-2026-31337 affects our version of the XML library",
        "CVE-2026-31337",
        ["CVE-2026-31373 does not apply", "XML library upgrade planned"],
    ),
]

_FILES = [
    "src/api/routes.py",
    "src/store/items.py",
    "tests/test_dates.py",
    "utils/dates.py",
    "src/auth/tokens.py",
    "web/app.tsx",
    "docs/setup.md",
    "Makefile",
    "src/cli.py",
    "src/jobs/sweep.py",
    "src/models/user.py",
    "pyproject.toml",
]
_ACTIONS = [
    "read",
    "edit",
    "run the tests for",
    "refactor",
    "add type hints to",
    "review",
    "format",
    "split",
    "document",
    "profile",
]
_ASSIST = [
    "I'll start by opening {f} to see how it is structured.",
    "The change to {f} is done; running the tests next.",
    "{f} has a helper that duplicates logic elsewhere; consolidating it.",
    "Looking at {f}, the function signatures look consistent.",
    "I updated {f} and kept the public interface unchanged.",
    "There is an unused import in {f}; removing it.",
    "Adding a regression test next to {f}.",
]
_OUTPUTS = [
    "============ {n} passed, {m} failed in {t}s ============",
    "ruff check: {m} issues found in {f}",
    "diff --git a/{f} b/{f}\n@@ -{n},7 +{n},9 @@ def handler(request):",
    "AssertionError: expected {n} but got {m} ({f}:{t})",
    "mypy: Success: no issues found in {n} source files",
    "Coverage for {f}: {n}% of statements",
]


@dataclass(frozen=True)
class RecallSet:
    items: list[str]  # the session's search texts, seq = index + 1
    facts: list[tuple[str, int]]  # (question, seq of the fact)
    exact: list[tuple[str, int]]  # (query, seq of the item holding the token)


_STOP = set(
    "a an the of to in on at for by with is are was were be been do does did we our us i you "
    "it its this that these those and or not no never only so use used what which who whom "
    "when where why how can could should must will would may much many each every per from "
    "into than then them they their there here about as up down out off over under after "
    "before until get gets got right now currently soon".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased words minus stop words, crudely stemmed (a trailing s, ed, ing)."""
    words = set()
    for w in re.findall(r"[a-z0-9]+", text.lower()):
        if w in _STOP:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if w.endswith(suffix) and len(w) - len(suffix) >= 3:
                w = w[: -len(suffix)]
                break
        words.add(w)
    return words


def check_disjoint() -> None:
    for fact, question in FACTS:
        shared = content_words(fact) & content_words(question)
        assert not shared, (fact, question, shared)


def build(*, items: int = 1200, seed: int = 7) -> RecallSet:
    check_disjoint()
    rng = random.Random(seed)
    texts: list[str] = []
    for n in range(items):
        f = rng.choice(_FILES)
        kind = n % 4
        if kind == 0:
            texts.append(f"Please {rng.choice(_ACTIONS)} {f} and tell me what you find.")
        elif kind == 1:
            texts.append(rng.choice(_ASSIST).format(f=f))
        elif kind == 2:
            texts.append(
                f'{{"name": "{rng.choice(["read_file", "run", "grep"])}", '
                f'"arguments": {{"path": "{f}"}}}}'
            )
        else:
            texts.append(
                rng.choice(_OUTPUTS).format(
                    f=f, n=rng.randint(1, 400), m=rng.randint(0, 9), t=rng.randint(1, 99)
                )
            )
    planted: list[tuple[str, str | None]] = [(fact, q) for fact, q in FACTS]
    for text, query, misses in EXACT:
        planted.append((text, query))
        planted.extend((miss, None) for miss in misses)
    positions = rng.sample(range(len(texts)), len(planted))
    facts: list[tuple[str, int]] = []
    exact: list[tuple[str, int]] = []
    exact_queries = {q for _, q, _ in EXACT}
    for (text, query), pos in zip(planted, positions, strict=True):
        texts[pos] = text
        if query is None:
            continue
        (exact if query in exact_queries else facts).append((query, pos + 1))
    return RecallSet(items=texts, facts=facts, exact=exact)


# Dialogue set: people, and (fact said by the person, question asked of it later, distractor
# said by the same person that shares the question's topic words but not its answer).
_PEOPLE = ["Anna", "Ben", "Carla", "Dev", "Elif", "Farid", "Greta", "Hiro", "Ines", "Jonas"]
_CITIES = ["Lisbon", "Porto", "Oslo", "Kyoto", "Austin", "Dublin", "Lyon", "Krakow"]
_DIALOGUE_FACTS: list[tuple[str, str, str]] = [
    (
        "we finally moved to {city} in {month}!",
        "When did {p} move to {city}?",
        "I visited {city} for a conference once.",
    ),
    (
        "we adopted a {pet} and called him {petname}.",
        "What is the name of {p}'s {pet}?",
        "my neighbour has a {pet} too, it barks a lot.",
    ),
    (
        "I started painting {subject} last {season}.",
        "What does {p} like to paint?",
        "the gallery had paintings I did not get.",
    ),
    (
        "I ran the {city} half marathon in {month}.",
        "Which race did {p} run?",
        "running in the rain is the worst.",
    ),
    (
        "I'm learning {lang} with an app every evening.",
        "Which language is {p} studying?",
        "languages were never my thing at school.",
    ),
    (
        "my sister works as a {job} in {city}.",
        "What does {p}'s sister do for a living?",
        "my sister called me yesterday, nothing new.",
    ),
    (
        "I bought a used {vehicle} to get to the office.",
        "How does {p} commute to work?",
        "the office is so far from everything.",
    ),
    (
        "I volunteer at the {place} on Saturdays.",
        "Where does {p} help out on weekends?",
        "weekends go by way too fast.",
    ),
    (
        "I broke my {bone} while {activity}.",
        "How did {p} get hurt?",
        "my {bone} still aches when it is cold.",
    ),
    (
        "our book club is reading {book} this month.",
        "Which book is {p}'s club discussing?",
        "I have not read a novel in ages.",
    ),
]
_SLOTS = {
    "month": ["March", "June", "October", "January"],
    "pet": ["dog", "cat", "parrot", "rabbit"],
    "petname": ["Biscuit", "Pixel", "Mango", "Olive", "Turbo"],
    "subject": ["seascapes", "portraits", "old doors", "mountains"],
    "season": ["spring", "summer", "winter", "autumn"],
    "lang": ["Japanese", "Portuguese", "Turkish", "Korean"],
    "job": ["nurse", "pilot", "architect", "baker"],
    "vehicle": ["scooter", "e-bike", "motorbike", "van"],
    "place": ["animal shelter", "food bank", "community garden", "library"],
    "bone": ["wrist", "ankle", "collarbone"],
    "activity": ["skiing", "climbing", "skateboarding"],
    "book": ["Dune", "Middlemarch", "The Overstory", "Beloved"],
}
_CHAT = [
    "How was your weekend?",
    "Pretty good, we went out for lunch with friends.",
    "That sounds fun! Work has been busy lately.",
    "Did you see the game last night?",
    "I'm so tired today, the week felt long.",
    "Haha, same here. Coffee helps.",
    "We should meet up soon, maybe next Friday?",
    "Sure, let me check my calendar.",
    "I tried a new recipe yesterday and it turned out great.",
    "What are you up to tonight?",
    "Just relaxing at home, watching a series.",
    "The weather was lovely this morning.",
    "I have a dentist appointment tomorrow, not looking forward to it.",
    "Did you finish that project at work?",
    "Almost, one more week I think.",
    "My phone screen cracked again.",
    "Congrats, that is great news!",
    "I'll send you the photos later.",
    "Thanks for the tip, it worked.",
    "Let's catch up properly soon.",
]


def build_dialogue(*, turns: int = 1500, seed: int = 11) -> RecallSet:
    """The dialogue dev set (module doc): ``turns`` turns, a fact per (person, template) for
    most people, each asked back once. ``exact`` is empty."""
    rng = random.Random(seed)
    texts = [f"{rng.choice(_PEOPLE)}: {rng.choice(_CHAT)}" for _ in range(turns)]
    planted: list[tuple[str, str | None]] = []
    for person in _PEOPLE:
        for fact, question, distractor in rng.sample(_DIALOGUE_FACTS, 7):
            values = {k: rng.choice(v) for k, v in _SLOTS.items()}
            values["city"] = rng.choice(_CITIES)
            values["p"] = person
            planted.append((f"{person}: " + fact.format(**values), question.format(**values)))
            planted.append((f"{person}: " + distractor.format(**values), None))
    positions = rng.sample(range(turns), len(planted))
    facts: list[tuple[str, int]] = []
    for (text, question), pos in zip(planted, positions, strict=True):
        texts[pos] = text
        if question is not None:
            facts.append((question, pos + 1))
    return RecallSet(items=texts, facts=facts, exact=[])
