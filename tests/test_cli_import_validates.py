"""`session-memory import` checks the document before it writes anything (issue 16): a bad
document used to leave behind the empty session the import had just created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli_errors import assert_one_line_error, cli

BAD_DOCUMENTS = [
    '{"schema_version": 1, "items": [{"type": "message", "role": "robot"}]}',
    '{"schema_version": 1, "items": [{"type": "message", "role": "user", "content": "a",'
    ' "created_at": "0001-01-01T00:00:00+01:00"}]}',
    '{"schema_version": 1, "items": [{"format": {}, "type": "0"}]}',
]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('cli-import') / 'cli.db'}"
    return {"DATABASE_URL": url}


@pytest.mark.parametrize("document", BAD_DOCUMENTS)
def test_a_bad_document_creates_no_session(
    env: dict[str, str], tmp_path: Path, document: str
) -> None:
    path = tmp_path / "doc.json"
    path.write_text(document)
    assert_one_line_error(cli("import", "fresh", str(path), env=env), "snapshot")
    assert_one_line_error(cli("export", "fresh", env=env), "session 'fresh' not found")


def test_a_good_document_still_creates_the_session(env: dict[str, str]) -> None:
    doc = {"schema_version": 1, "items": [{"type": "message", "role": "user", "content": "hi"}]}
    done = cli("import", "made", "-", env=env, stdin=json.dumps(doc))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored_items"] == 1
    exported = cli("export", "made", env=env)
    assert exported.returncode == 0 and json.loads(exported.stdout)["items"][0]["content"] == "hi"
