"""Loader for REALTALK, the public long-conversation set bench/retrieval_eval.py scores.

REALTALK (Lee, Maharana, Pujara, Ren, Barbieri, 2025, arXiv 2502.13270): ten messaging-app
chats between two real people over 21 days (about 8,900 turns in 18-20 sessions each), with
memory-probing questions whose ``evidence`` names the turns (``dia_id``) that hold the answer.
The data numbers the question categories; read from the questions, 1 gathers facts from
several turns ("multi-hop"), 2 asks when, or what happened at a given time ("temporal"), and
3 asks for an inference from what was said ("commonsense").

The data is NOT in this repository: its repository carries no licence, so we may read it but
not redistribute it. Get it from the authors' GitHub repository ``danny911kr/REALTALK`` (the
``data/Chat_*.json`` files at its top level; that repository also holds a copy of another
benchmark under ``data/locomo/``, which this loader never reads) and point ``REALTALK_DIR``
(or ``--data``) at the folder holding the ``Chat_*.json`` files.

Only the fields a retriever needs are read: each turn's text, speaker, time and id, and each
question's text, category and evidence ids. A question whose evidence is empty or names a turn
that is not in the chat cannot be scored; it is counted and left out.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "commonsense"}
_FILE = re.compile(r"^Chat_(\d+)_.+\.json$")


@dataclass(frozen=True)
class Turn:
    id: str  # the dataset's dia_id, e.g. "D3:14"
    speaker: str
    text: str
    when: datetime
    session: int


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True)
class Chat:
    name: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    dropped: int  # questions left out: no evidence, or evidence not among the turns


def data_dir(explicit: str | None = None) -> Path:
    """The folder holding ``Chat_*.json``: ``explicit``, else ``$REALTALK_DIR``."""
    chosen = explicit or os.environ.get("REALTALK_DIR")
    if not chosen:
        raise SystemExit(
            "REALTALK data not found: set REALTALK_DIR (or pass --data) to the folder with "
            "Chat_*.json from github.com/danny911kr/REALTALK (data/); see bench/realtalk.py"
        )
    path = Path(chosen)
    if not any(_FILE.match(p.name) for p in path.glob("Chat_*.json")):
        raise SystemExit(f"no Chat_*.json in {path}")
    return path


def _when(raw: str) -> datetime:
    return datetime.strptime(raw, "%d.%m.%Y, %H:%M:%S")


def load_chat(path: Path) -> Chat:
    data = json.loads(path.read_text(encoding="utf-8"))
    turns: list[Turn] = []
    sessions = sorted(
        (int(key.removeprefix("session_")), value)
        for key, value in data.items()
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
    )
    for number, session in sessions:
        for turn in session:
            text = (turn.get("clean_text") or "").strip()
            if not text:
                continue
            turns.append(
                Turn(
                    id=turn["dia_id"],
                    speaker=turn["speaker"],
                    text=text,
                    when=_when(turn["date_time"]),
                    session=number,
                )
            )
    ids = {turn.id for turn in turns}
    questions: list[Question] = []
    dropped = 0
    for qa in data.get("qa", []):
        evidence = frozenset(qa.get("evidence") or [])
        if not evidence or not evidence <= ids:
            dropped += 1
            continue
        questions.append(Question(qa["question"], int(qa["category"]), evidence))
    return Chat(path.stem, tuple(turns), tuple(questions), dropped)


def load(explicit: str | None = None) -> list[Chat]:
    """Every chat in the data folder, in the dataset's numbering."""
    folder = data_dir(explicit)
    files = sorted(
        (int(m.group(1)), p) for p in folder.glob("Chat_*.json") if (m := _FILE.match(p.name))
    )
    return [load_chat(path) for _, path in files]
