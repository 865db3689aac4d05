"""The API guide's error table names every problem type the service answers, and nothing
else: the list is derived from the code (every ``DomainError`` subclass's code, the HTTP
statuses ``app.api.problems`` maps, and the types answered outside the domain), so a new
type without a row fails here."""

from __future__ import annotations

import re

import app.main  # noqa: F401  (imports every module that defines an error)
from app.api.problems import _HTTP_CODES, OTHER_PROBLEM_TYPES
from app.domain.errors import DomainError
from tests.conftest import ROOT


def domain_codes() -> set[str]:
    found: set[str] = set()
    todo = [DomainError]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls is not DomainError:
            found.add(cls.code)
    return found


def documented() -> dict[str, set[int]]:
    text = (ROOT / "docs" / "api-guide.md").read_text()
    section = text.split("## Errors, retries and idempotency", 1)[1]
    rows: dict[str, set[int]] = {}
    for line in section.splitlines():
        match = re.match(r"\|\s*(\d{3})\s*\|([^|]*)\|", line)
        if match:
            for code in re.findall(r"`([a-z][a-z-]*)`", match.group(2)):
                rows.setdefault(code, set()).add(int(match.group(1)))
    return rows


def test_the_error_table_lists_every_problem_type_the_code_answers() -> None:
    answered = (
        domain_codes() | {code for code, _ in _HTTP_CODES.values()} | set(OTHER_PROBLEM_TYPES)
    )
    table = documented()
    assert {"not-found", "method-not-allowed", "session-not-found"} <= answered
    missing = sorted(answered - set(table))
    assert not missing, f"docs/api-guide.md's error table lacks {missing}"
    stale = sorted(set(table) - answered)
    assert not stale, f"docs/api-guide.md's error table names types nothing answers: {stale}"
    for code, status in OTHER_PROBLEM_TYPES.items():
        assert status in table[code], (code, status, table[code])
    for status, (code, _) in _HTTP_CODES.items():
        assert status in table[code], (code, status, table[code])
