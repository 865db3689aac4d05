"""What "as sent" means for JSON text, as docs/design.md states it: the value is kept, the
spelling is the service's. The design's table of spellings (sent -> comes back) is read from
the page and checked, row by row, on both backends: in an item (an opaque one, kept whole), in
item metadata, in session metadata and in a context read. A property test checks the rule the
table illustrates on any number: an integer keeps its digits, any other number comes back as
the shortest spelling of the same 64-bit double."""

from __future__ import annotations

import json
import math
import re

import httpx
from hypothesis import given
from hypothesis import strategies as st

from app import jsonutil
from tests.support.services import ROOT

ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|\s*$")


def spelling_table() -> list[tuple[str, str]]:
    """The rows of the table under "| sent | comes back |" in docs/design.md."""
    lines = (ROOT / "docs" / "design.md").read_text(encoding="utf-8").splitlines()
    start = next(
        n for n, line in enumerate(lines) if re.match(r"^\|\s*sent\s*\|\s*comes back\s*\|", line)
    )
    rows: list[tuple[str, str]] = []
    for line in lines[start + 2 :]:
        match = ROW.match(line)
        if not match:
            break
        rows.append((match.group(1), match.group(2)))
    return rows


def test_the_table_is_there_and_covers_the_cases_it_should() -> None:
    sent = [s for s, _ in spelling_table()]
    for case in ("1e2", "1.50", "-0.0", "12345678901234567890", "1.5e308"):
        assert case in sent, sent


async def test_each_spelling_comes_back_as_the_design_says(
    client: httpx.AsyncClient, sid: str
) -> None:
    rows = spelling_table()
    obj = "{" + ", ".join(f'"v{n}": {sent}' for n, (sent, _) in enumerate(rows)) + "}"
    item = f'{{"type": "x_reading", "payload": {obj}, "metadata": {obj}}}'
    r = await client.post(
        f"/v1/sessions/{sid}/items?create=true",
        content=f'{{"items": [{item}]}}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 201, r.text
    r = await client.post(
        "/v1/sessions",
        content=f'{{"id": "{sid}-m", "metadata": {obj}}}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 201, r.text
    reads = {
        "items": await client.get(f"/v1/sessions/{sid}/items"),
        "session": await client.get(f"/v1/sessions/{sid}-m"),
        "context": await client.get(
            f"/v1/sessions/{sid}/context", params={"format": "openai-responses"}
        ),
    }
    expected = "{" + ",".join(f'"v{n}":{back}' for n, (_, back) in enumerate(rows)) + "}"
    for name, response in reads.items():
        assert response.status_code == 200, (name, response.text)
        # the whole object, in the spelling the table gives, on every read
        assert expected in response.text, (name, expected, response.text)
    items = reads["items"].text
    assert items.count(expected) == 2  # the payload and the item's metadata


def _significant(text: str) -> str:
    mantissa = re.split(r"[eE]", text.lstrip("-"))[0].replace(".", "")
    return mantissa.strip("0") or "0"


# Spellings that each read back as the same double (17 significant digits or more).
SPELLINGS = st.sampled_from(["{!r}", "{:.16e}", "{:.17g}", "{:.16E}", "{:.25e}"])


@given(st.floats(allow_nan=False, allow_infinity=False), SPELLINGS)
def test_a_number_with_a_fraction_or_exponent_comes_back_as_the_shortest_double(
    x: float, spelling: str
) -> None:
    sent = spelling.format(x)
    if re.fullmatch(r"-?\d+", sent):
        return  # an integer spelling: the next property
    back = jsonutil.dumps(jsonutil.loads(sent))
    assert back == jsonutil.dumps(x)  # one spelling, whichever was sent
    again = json.loads(back)
    assert isinstance(again, float) and again == x  # still a non-integer, the same double
    assert math.copysign(1, again) == math.copysign(1, x)
    assert _significant(back) == _significant(repr(x))  # the fewest digits that read back


@given(st.integers(min_value=-(10**40), max_value=10**40))
def test_an_integer_keeps_its_digits(n: int) -> None:
    assert jsonutil.dumps(jsonutil.loads(str(n))) == str(n)
