"""The documentation stays inside the repository and its links resolve.

Every link in README.md, docs/**/*.md and clients/*/README.md (inline, reference-style, and
HTML ``href``/``src``; code is not prose and is skipped) must be one of:

- a relative path to a file or directory of the repository (never outside it), with, for a
  Markdown target, an anchor that is one of its headings (GitHub's slugs);
- an anchor in the same file;
- an http(s) link to a public third-party site: never to a local address, and never to a design
  document kept outside the repository.

The operations manual documents every setting the service reads.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from pydantic import BaseModel

from app.settings import Settings
from tests.support.services import ROOT

INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_LINK = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
OUTSIDE_WORDS = ("/shared", "shared/DESIGN", "DESIGN.md", "CONVENTIONS.md")
LOCAL_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::1"}


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    files += sorted(p for p in (ROOT / "clients").glob("*/README.md"))
    return [p for p in files if "node_modules" not in p.parts]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code, with code spans blanked out."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for n, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if match:
            if fence is None:
                fence = match.group(1)
            elif match.group(1) == fence:
                fence = None
            continue
        if fence is None:
            out.append((n, CODE_SPAN.sub("", line)))
    return out


def links(path: Path, text: str | None = None) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    if text is None:
        text = path.read_text(encoding="utf-8")
    for n, line in prose_lines(text):
        for pattern in (INLINE_LINK, HTML_LINK):
            found.extend((n, m.group(1)) for m in pattern.finditer(line))
        ref = REFERENCE_DEF.match(line)
        if ref:
            found.append((n, ref.group(1)))
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: inline markup dropped, lower case, punctuation removed,
    spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.replace("`", "")
    text = re.sub(r"<[^>]+>", "", text)
    text = text.strip().lower()
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if ch in " -_" or category[0] in ("L", "N") or category == "Mn":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8").replace("`", "\x00")):
        match = HEADING.match(line.replace("\x00", "`"))
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    # explicit anchors: <a id="..."> / <a name="...">
    out.update(re.findall(r"""<a\s+(?:id|name)=["']([^"']+)["']""", path.read_text(encoding="utf-8")))
    return out


def problems_of(path: Path, text: str | None = None) -> list[str]:
    """What is wrong with the links of ``path`` (its ``text`` may be given: a page checked as
    if it were there)."""
    problems: list[str] = []
    rel = path.relative_to(ROOT)
    if text is None:
        text = path.read_text(encoding="utf-8")
    for n, target in links(path, text):
        where = f"{rel}:{n}: {target}"
        parts = urlsplit(target)
        if parts.scheme in ("http", "https"):
            if (parts.hostname or "") in LOCAL_HOSTS:
                problems.append(f"{where}: a link to a local address")
            elif any(word.lower() in target.lower() for word in OUTSIDE_WORDS):
                problems.append(f"{where}: points at a document outside the repository")
            continue
        if parts.scheme == "mailto":
            continue
        if parts.scheme or parts.netloc:
            problems.append(f"{where}: not a relative link or a public web page")
            continue
        if target.startswith("/"):
            problems.append(f"{where}: an absolute path (use a path relative to {rel})")
            continue
        link_path, fragment = unquote(parts.path), unquote(parts.fragment)
        resolved = (path.parent / link_path).resolve() if link_path else path
        try:
            resolved.relative_to(ROOT)
        except ValueError:
            problems.append(f"{where}: leaves the repository")
            continue
        if not resolved.exists() and resolved != path:
            problems.append(f"{where}: no such file in the repository")
            continue
        if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            problems.append(f"{where}: no heading #{fragment} in {resolved.relative_to(ROOT)}")
    for word in ("../shared", "/work/shared", "shared/DESIGN.md"):
        if word in text:
            problems.append(f"{rel}: mentions {word}, which is not part of the repository")
    return problems


def test_the_documentation_set_exists() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in doc_files()}
    for required in (
        "README.md",
        "docs/index.md",
        "docs/design.md",
        "docs/api-guide.md",
        "docs/operations.md",
        "docs/clients.md",
        "clients/python/README.md",
    ):
        assert required in names


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_resolves_inside_the_repository(path: Path) -> None:
    assert not problems_of(path), "\n".join(problems_of(path))


def test_the_readme_links_into_the_docs() -> None:
    targets = {t for _, t in links(ROOT / "README.md")}
    for page in ("docs/index.md", "docs/design.md", "docs/api-guide.md", "docs/operations.md",
                 "docs/clients.md"):
        assert page in targets, page


def test_the_checker_catches_what_it_should() -> None:
    page = ROOT / "docs" / "design.md"
    assert "items-and-faithful-storage" in anchors(page)
    assert "projection-the-next-turn-prompt" in anchors(page)
    assert slug("Snapshot, restore, fork") == "snapshot-restore-fork"
    assert slug("The `window` policy") == "the-window-policy"
    assert slug("Café 会话") == "café-会话"
    sample = (
        "[ok](design.md#compaction) [gone](nope.md) [anchor](design.md#no-such-heading)\n"
        "[up](../../etc/passwd) [abs](/etc/passwd) [local](http://localhost:8080/docs)\n"
        "[design](https://example.com/shared/DESIGN.md) [web](https://www.rfc-editor.org/rfc/rfc9457)\n"
        "`[in code](missing.md)`\n"
        "```\n[in a fence](missing.md)\n```\n"
    )
    found = problems_of(ROOT / "docs" / "sample.md", sample)
    joined = "\n".join(found)
    assert len(found) == 7, joined
    for target in ("nope.md", "#no-such-heading", "../../etc/passwd", "/etc/passwd",
                   "localhost", "DESIGN.md"):
        assert target in joined
    assert "missing.md" not in joined and "rfc9457" not in joined


def env_names(model: type[BaseModel], prefix: str = "") -> list[str]:
    names: list[str] = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names.extend(env_names(annotation, f"{prefix}{name.upper()}__"))
        else:
            names.append(f"{prefix}{name.upper()}")
    return names


def test_every_setting_is_documented_in_the_operations_manual() -> None:
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    names = env_names(Settings)
    assert "LIMITS__MAX_ITEM_BYTES" in names and "DATABASE_URL" in names
    missing = [name for name in names if f"`{name}`" not in text]
    assert not missing, f"settings missing from docs/operations.md: {missing}"


def test_every_command_is_in_the_operations_manual() -> None:
    import argparse

    from app.cli import build_parser

    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    parser = build_parser()
    commands: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
                if nested:
                    commands.extend(f"{name} {inner}" for inner in nested[0].choices)
                else:
                    commands.append(name)
    assert "serve" in commands and "keys create" in commands
    missing = [c for c in commands if f"session-memory {c}" not in text]
    assert not missing, f"commands missing from docs/operations.md: {missing}"
