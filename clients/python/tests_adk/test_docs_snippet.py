"""The Python snippet of docs/clients.md's Google ADK section runs as printed, against the
test server (only its address and key are swapped in)."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "clients.md"
ADDRESS = 'AsyncSessionMemoryClient("http://127.0.0.1:8080")'


def snippet() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Google ADK\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the section has one python snippet"
    assert ADDRESS in blocks[0]
    here = f"AsyncSessionMemoryClient({os.environ['SM_URL']!r}, api_key={os.environ.get('SM_API_KEY')!r})"
    return blocks[0].replace(ADDRESS, here)


def test_the_snippet_runs_and_prints_the_merged_state() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(snippet(), str(DOC), "exec"), {"__name__": "__main__"})
    assert out.getvalue() == "{'cart': {'A-1': 2}, 'app:promo': 'spring', 'user:lang': 'fr'}\n"
