"""Every error of the `session-memory` command an operator can act on is one line on standard
error, `error: ...`, with exit code 2 (as argparse does for a bad command line); never a
traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def cli(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT, env={**base, "LOG_LEVEL": "warning", **env}, input=stdin,
        capture_output=True, text=True, timeout=120,
    )


def assert_one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('cli') / 'cli.db'}"
    return {"DATABASE_URL": url}


def test_import_of_a_missing_file(env: dict[str, str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    assert_one_line_error(cli("import", "s1", str(missing), env=env),
                          f"cannot read {missing}", "No such file")
    assert_one_line_error(cli("import", "s1", str(tmp_path), env=env), "Is a directory")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("not json", ["is not a JSON document"]),
        ("[1, 2]", ["is not an exported session document"]),
        ('{"schema_version": 7, "items": []}', ["schema_version", "unknown schema_version 7"]),
        ('{"schema_version": 1, "items": [{"type": "message", "role": "robot"}, {"type": "message", "role": "robot"}]}',
         ["invalid snapshot document", "items.0", "; "]),  # every field error, on the line
    ],
)
def test_import_of_a_bad_document(
    env: dict[str, str], tmp_path: Path, content: str, words: list[str]
) -> None:
    path = tmp_path / "doc.json"
    path.write_text(content)
    assert_one_line_error(cli("import", "s2", str(path), env=env), *words)
    assert_one_line_error(cli("import", "s2", "-", env=env, stdin=content), *words)


def test_import_and_export_of_a_missing_session(env: dict[str, str]) -> None:
    doc = '{"schema_version": 1, "items": []}'
    assert_one_line_error(cli("import", "nope", "-", "--no-create", env=env, stdin=doc),
                          "session 'nope' not found")
    assert_one_line_error(cli("export", "nope", env=env), "session 'nope' not found")


def test_export_into_a_missing_directory(env: dict[str, str], tmp_path: Path) -> None:
    done = cli("import", "s3", "-", env=env, stdin='{"schema_version": 1, "items": []}')
    assert done.returncode == 0, done.stderr
    out = tmp_path / "no" / "such" / "dir.json"
    assert_one_line_error(cli("export", "s3", "--out", str(out), env=env),
                          f"cannot write {out}", "No such file")


def test_keys_refusals(env: dict[str, str]) -> None:
    assert_one_line_error(cli("keys", "revoke", "smk_000000000000", env=env), "not found")
    assert_one_line_error(
        cli("keys", "create", "--tenant", "acme", "--name", "x", "--scopes", "root", env=env),
        "scopes",
    )


def test_an_unreachable_database(tmp_path: Path) -> None:
    env = {"DATABASE_URL": "postgresql://postgres@127.0.0.1:1/nothing"}
    for args in (["migrate"], ["export", "s"], ["keys", "list"]):
        assert_one_line_error(cli(*args, env=env), "the database refused or could not be reached")


def test_invalid_settings() -> None:
    line = assert_one_line_error(
        cli("export", "s", env={"LIMITS__MAX_ITEM_BYTES": "lots"}), "invalid Settings"
    )
    assert "limits.max_item_bytes" in line


def test_serve_on_a_taken_port_fails_fast_naming_the_setting(env: dict[str, str]) -> None:
    """A second server on the same port: refused before migrating or starting, with the
    setting that changes it, rather than "startup complete" and then `address already in use`."""
    import socket
    import time

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        done = cli("serve", "--port", str(port), env={**env, "HOST": "127.0.0.1"})
        elapsed = time.monotonic() - started
    line = assert_one_line_error(done, str(port), "--port", "PORT")
    assert "in use" in line
    assert "startup complete" not in done.stderr.lower()
    assert elapsed < 30, elapsed


def test_top_level_help_lists_every_command_in_plain_text() -> None:
    done = cli("--help", env={})
    assert done.returncode == 0
    intro = done.stdout.split("positional arguments")[0]
    for command in ("serve", "migrate", "openapi", "keys", "export", "import", "tenants", "sweep"):
        assert command in intro, (command, intro)
    assert "``" not in done.stdout
    for args, option in ((["keys", "create", "--help"], "--tenant"), (["serve", "--help"], "--workers"),
                         (["export", "--help"], "--tenant"), (["import", "--help"], "--tenant")):
        text = cli(*args, env={}).stdout
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(option))
        assert len(line.split()) > 2, (args, line)  # the option and its help, not the option alone


def test_keys_list_with_no_keys_says_so_and_create_warns_when_auth_is_off(
    tmp_path: Path,
) -> None:
    env = {"DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}", "HOST": "127.0.0.1"}
    done = cli("keys", "list", env=env)
    assert done.returncode == 0 and done.stdout == ""  # JSON lines: none
    assert "no keys" in done.stderr
    made = cli("keys", "create", "--tenant", "t", "--name", "n", "--scopes", "read", env=env)
    assert made.returncode == 0, made.stderr
    assert "warning" in made.stderr and "AUTH__MODE=on" in made.stderr, made.stderr
    on = cli("keys", "create", "--tenant", "t", "--name", "m", "--scopes", "read",
             env={**env, "AUTH__MODE": "on"})
    assert on.returncode == 0 and "warning" not in on.stderr, on.stderr
