"""The READMEs' and every docs page's snippets run as pasted, in order, against a real server
started the way the README says (``session-memory serve``, here on a fresh SQLite file and a
free port; command-line snippets get its ``DATABASE_URL``).

Every ```` ```sh ```` and ```` ```python ```` block of a file is run, in document order, in one
bash process (so a variable one snippet sets is seen by the next); Python blocks are fed to
the project's Python. Each shell command must exit 0. Where the file shows a command's output
(comment lines right after it: ``# {"version": 3, ...}``, a header line ``# etag: "2"``, or a
few plain words such as ``# 204``), every ``"key": value`` pair shown must occur in the
command's JSON output (a string ending in ``...`` is a prefix), and every other line shown
must occur in its output; a value shown as ``[...]`` or ``{...}`` must be a list or an
object. A block preceded by
``<!-- snippet: skip (why) -->`` is not run (starting the server itself, say); the few such
blocks are counted so that skipping does not become a habit.

A docs page's blocks are commands (``sh``, ``python``) or documents that are not (JSON, HTTP
in brief, TypeScript); a shell transcript (``console``) is refused. The OpenAI Agents SDK
snippets talk to a local HTTP server standing in for the OpenAI
Responses API (``OPENAI_BASE_URL``); the test checks that the second run saw the first.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.services import ROOT, free_port

README_PORT = 8080
RUNNABLE = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python"}
SKIP_MARK = re.compile(r"^<!--\s*snippet:\s*skip\b(.*)-->\s*$")
SKIP_REASON = re.compile(r"^\s*\(\S.*\)\s*$")  # `skip (why)`
FENCE = re.compile(r"^( *)```\s*([A-Za-z0-9_+-]*)\s*$")  # indented: inside a list item
PAIR = re.compile(
    r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:\s*'
    r'("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null|\[\.\.\.\]|\{\.\.\.\})'
)
# A value shown as `[...]` or `{...}` is a list or an object, whatever it holds.
PLACEHOLDER_KIND: dict[str, type] = {"[...]": list, "{...}": dict}
HEADER_LINE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: \S")
PLAIN_OUTPUT = re.compile(r"^[\w.-]+(?: [\w.-]+){0,2}$")  # `204`, `same`, `a.b 1`
END = "@@SNIPPET-END"


@dataclass
class Command:
    text: str
    line: int
    shown: list[str] = field(default_factory=list)  # output lines the file shows, without "# "


@dataclass
class Snippet:
    lang: str
    code: str
    line: int  # the first line of code
    skipped: bool
    skip_reason: str = ""  # what the skip comment says, `(why)`


def extract_snippets(path: Path) -> list[Snippet]:
    """Fenced blocks in document order; ``skipped`` when a skip comment precedes the fence
    (blank lines between them allowed)."""
    out: list[Snippet] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    skip_next = False
    reason = ""
    while i < len(lines):
        text = lines[i]
        mark = SKIP_MARK.match(text.strip())
        if mark:
            skip_next, reason = True, mark.group(1).strip()
            i += 1
            continue
        fence = FENCE.match(text)
        if fence:
            indent = fence.group(1)
            start = i + 1
            j = start
            while j < len(lines) and not lines[j].startswith(indent + "```"):
                j += 1
            out.append(
                Snippet(
                    lang=fence.group(2).lower(),
                    code="\n".join(line.removeprefix(indent) for line in lines[start:j]) + "\n",
                    line=start + 1,  # of the block's first line, counted from 1
                    skipped=skip_next,
                    skip_reason=reason if skip_next else "",
                )
            )
            skip_next = False
            i = j + 1
            continue
        if text.strip():
            skip_next = False
        i += 1
    return out


def _complete(text: str) -> bool:
    if text.rstrip().endswith("\\"):
        return False
    done = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    return done.returncode == 0


def split_commands(code: str, first_line: int) -> list[Command]:
    """Shell commands (a command may span lines: backslashes, quoted JSON), each with the
    output lines shown right after it."""
    commands: list[Command] = []
    pending: list[str] = []
    start = 0
    after_command = False
    for n, line in enumerate(code.splitlines()):
        stripped = line.strip()
        if not pending:
            if not stripped:
                after_command = False
                continue
            if stripped.startswith("#"):
                shown = stripped[1:].strip()
                if after_command and commands and _is_output(shown, commands[-1].shown):
                    commands[-1].shown.append(shown)
                continue
            start = n
        pending.append(line)
        if _complete("\n".join(pending)):
            commands.append(Command(text="\n".join(pending), line=first_line + start))
            pending = []
            after_command = True
    assert not pending, f"unterminated command at line {first_line + start}: {pending}"
    return commands


def _is_output(text: str, shown_so_far: list[str]) -> bool:
    if text.startswith("{"):
        return True
    if shown_so_far and shown_so_far[0].startswith("{"):
        return True  # a continuation of the JSON shown
    if PLAIN_OUTPUT.match(text):
        return True
    return bool(HEADER_LINE.match(text)) and "{" not in text


def rewrite_port(text: str, port: int) -> str:
    for host in ("localhost", "127.0.0.1"):
        text = text.replace(f"{host}:{README_PORT}", f"{host}:{port}")
    return text


def build_script(snippets: list[Snippet], port: int) -> tuple[str, list[tuple[Command, str]]]:
    """One bash script running every snippet in order; a marker after each step."""
    steps: list[tuple[Command, str]] = []
    parts = ["exec 2>&1"]
    for snippet in snippets:
        kind = RUNNABLE.get(snippet.lang)
        if snippet.skipped or kind is None:
            continue
        if kind == "sh":
            for command in split_commands(snippet.code, snippet.line):
                parts.append(rewrite_port(command.text, port))
                parts.append(f"printf '\\n{END} {len(steps)} %s\\n' \"$?\"")
                steps.append((command, "sh"))
        else:
            body = rewrite_port(snippet.code, port)
            assert "__SNIPPET_PY__" not in body
            parts.append(f"\"$SNIPPET_PYTHON\" - <<'__SNIPPET_PY__'\n{body}__SNIPPET_PY__")
            parts.append(f"printf '\\n{END} {len(steps)} %s\\n' \"$?\"")
            steps.append((Command(text=snippet.code, line=snippet.line), "python"))
    return "\n".join(parts) + "\n", steps


def run_script(script: str, env: dict[str, str], cwd: Path) -> dict[int, tuple[int, str]]:
    done = subprocess.run(
        ["bash", "-c", script], env=env, cwd=cwd, capture_output=True, text=True, timeout=400
    )
    results: dict[int, tuple[int, str]] = {}
    chunk: list[str] = []
    for line in done.stdout.splitlines():
        if line.startswith(END + " "):
            _, index, code = line.split()
            results[int(index)] = (int(code), "\n".join(chunk).strip())
            chunk = []
        else:
            chunk.append(line)
    return results


def _pairs(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key, inner
            yield from _pairs(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _pairs(inner)


def _json_of(output: str) -> Any:
    try:
        return json.loads(output)
    except ValueError:
        return json.loads(output.splitlines()[-1])


def check_shown(command: Command, output: str) -> list[str]:
    """What the file shows that the output does not have."""
    if not command.shown:
        return []
    missing: list[str] = []
    if command.shown[0].startswith("{"):
        try:
            actual = list(_pairs(_json_of(output)))
        except (ValueError, IndexError):
            return [f"output is not JSON: {output[:300]!r}"]
        for key, raw in PAIR.findall(" ".join(command.shown)):
            if raw in PLACEHOLDER_KIND:
                kind = PLACEHOLDER_KIND[raw]
                if not any(k == key and isinstance(v, kind) for k, v in actual):
                    seen = [type(v).__name__ for k, v in actual if k == key][:5]
                    missing.append(f'"{key}": {raw} (a {kind.__name__}; output has {seen})')
                continue
            expected = json.loads(raw)
            if isinstance(expected, str) and expected.endswith("..."):
                ok = any(
                    k == key and isinstance(v, str) and v.startswith(expected[:-3])
                    for k, v in actual
                )
            else:
                ok = any(
                    k == key and v == expected and type(v) is type(expected) for k, v in actual
                )
            if not ok:
                seen = [v for k, v in actual if k == key][:5]
                missing.append(f'"{key}": {raw} (output has {seen})')
    else:
        lower = output.lower()
        missing.extend(line for line in command.shown if line.lower() not in lower)
    return missing


class FakeResponsesAPI:
    """A local HTTP server answering ``POST /v1/responses`` like the OpenAI Responses API,
    recording each request body."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                outer.bodies.append(body)
                n = len(outer.bodies)
                reply = {
                    "id": f"resp_{n}",
                    "object": "response",
                    "created_at": int(time.time()),
                    "model": body.get("model") or "gpt-test",
                    "status": "completed",
                    "output": [
                        {
                            "type": "message",
                            "id": f"msg_{n}",
                            "role": "assistant",
                            "status": "completed",
                            "content": [
                                {"type": "output_text", "text": f"Answer {n}.", "annotations": []}
                            ],
                        }
                    ],
                    "parallel_tool_calls": True,
                    "tool_choice": "auto",
                    "tools": [],
                    "usage": {
                        "input_tokens": 10,
                        "output_tokens": 2,
                        "total_tokens": 12,
                        "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens_details": {"reasoning_tokens": 0},
                    },
                }
                data = json.dumps(reply).encode()
                self.send_response(200 if self.path.endswith("/responses") else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeResponsesAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _clean_env() -> dict[str, str]:
    drop = (
        "DATABASE_URL",
        "REDIS_URL",
        "HOST",
        "PORT",
        "AUTO_MIGRATE",
        "OPENAI_",
        "SESSION_MEMORY",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env = {k: v for k, v in env.items() if "__" not in k}  # nested settings (AUTH__MODE, ...)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def readme_database(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The server's database: the command-line snippets (``session-memory keys create``, ...)
    act on it, as a reader's do on the one ``scripts/serve`` made."""
    return f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('readme-db') / 'readme.db'}"


@pytest.fixture(scope="module")
def readme_server(tmp_path_factory: pytest.TempPathFactory, readme_database: str) -> Iterator[str]:
    """`session-memory serve` with the embedded defaults, on a fresh SQLite file. One server
    for the module: the files use distinct session ids, as a reader pasting all of them into
    one `scripts/serve` would."""
    tmp_path = tmp_path_factory.mktemp("readme-server")
    port = free_port()
    env = _clean_env() | {"DATABASE_URL": readme_database, "LOG_LEVEL": "warning"}
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "session-memory"), "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(url + "/healthz", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def run_file(relative: str, url: str, tmp_path: Path, *, extra_env: dict[str, str]) -> None:
    path = ROOT / relative
    snippets = extract_snippets(path)
    port = int(url.rsplit(":", 1)[1])
    script, steps = build_script(snippets, port)
    assert steps, f"{relative}: no runnable snippet found"
    workdir = tmp_path / "work"
    workdir.mkdir(parents=True)
    env = _clean_env() | {"SNIPPET_PYTHON": sys.executable} | extra_env
    results = run_script(script, env, workdir)
    failures: list[str] = []
    for index, (command, kind) in enumerate(steps):
        where = f"{relative}:{command.line}"
        if index not in results:
            failures.append(f"{where}: did not run (an earlier step stopped the script)")
            break
        code, output = results[index]
        if code != 0:
            failures.append(f"{where}: {kind} snippet exited {code}\n{output[-2000:]}")
            continue
        failures.extend(
            f"{where}: shown but not in output: {m}" for m in check_shown(command, output)
        )
    assert not failures, "\n\n".join(failures)


def test_the_extractor_splits_commands_and_their_shown_output() -> None:
    code = (
        "# a comment that explains\n"
        'curl -s -X POST x -d \'{"a":\n'
        "   1}'\n"
        '# {"version": 3,\n'
        '#  "report": {"projected_tokens": 28}}\n'
        "\n"
        "curl -si y | grep -i etag\n"
        '# etag: "2"\n'
        "A=$(echo 1 \\\n  | cat)\n"
        "# 204\n"
    )
    commands = split_commands(code, 1)
    assert [c.line for c in commands] == [2, 7, 9]
    assert commands[0].shown == ['{"version": 3,', '"report": {"projected_tokens": 28}}']
    assert commands[1].shown == ['etag: "2"']
    assert check_shown(commands[0], '{"version": 3, "report": {"projected_tokens": 28}}') == []
    assert check_shown(commands[0], '{"version": 4, "report": {"projected_tokens": 28}}')
    assert check_shown(commands[1], 'HTTP/1.1 200 OK\r\netag: "2"') == []
    assert check_shown(commands[1], 'etag: "3"')
    assert commands[2].shown == ["204"]
    assert check_shown(commands[2], "204") == [] and check_shown(commands[2], "404")


def test_the_extractor_reads_indented_blocks_and_shown_kinds(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "- a list item:\n\n"
        "  <!-- snippet: skip (why) -->\n"
        "  ```sh\n  skipped\n  ```\n\n"
        '  ```sh\n  curl -s x\n  # {"system": "...", "messages": [...]}\n  ```\n'
    )
    first, second = extract_snippets(page)
    assert first.skipped and first.code == "skipped\n"
    assert not second.skipped and second.code.startswith("curl -s x\n")
    (command,) = split_commands(second.code, second.line)
    assert check_shown(command, '{"system": "Be brief.", "messages": []}') == []
    wrong = check_shown(command, '{"system": [{"type": "text"}], "messages": {}}')
    assert len(wrong) == 2 and '"system"' in wrong[0] and "a list" in wrong[1], wrong


def _readme_skips(relative: str) -> int:
    return sum(s.skipped for s in extract_snippets(ROOT / relative))


def _openai_env(api: FakeResponsesAPI) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "sk-test-readme",
        "OPENAI_BASE_URL": api.base_url,
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }


@pytest.mark.timeout(900)
def test_readme_snippets_run_as_pasted_then_the_client_readme(
    readme_server: str, tmp_path: Path
) -> None:
    assert _readme_skips("README.md") <= 3
    assert _readme_skips("clients/python/README.md") <= 1
    with FakeResponsesAPI() as openai_api:
        run_file("README.md", readme_server, tmp_path / "main", extra_env=_openai_env(openai_api))
        # The Python client's loop stored its three items; the Agents SDK's second run was
        # sent the first run's conversation, read back from the service.
        session = httpx.get(readme_server + "/v1/sessions/agent-42").json()
        assert session["item_count"] == 3
        assert len(openai_api.bodies) == 2
        second_input = json.dumps(openai_api.bodies[1]["input"])
        assert "What city is the Eiffel Tower in?" in second_input
        assert "Answer 1." in second_input
        agent_session = httpx.get(readme_server + "/v1/sessions/py-agent%40example.com").json()
        assert agent_session["item_count"] == 4
        demo = httpx.get(readme_server + "/v1/sessions/demo").json()

        # Pasted a second time into the same server, the README starts over and ends where the
        # first run did (no 409 from a session the first run created).
        run_file("README.md", readme_server, tmp_path / "again", extra_env=_openai_env(openai_api))
        again = httpx.get(readme_server + "/v1/sessions/demo").json()
        assert {k: again[k] for k in ("version", "item_count", "token_count")} == {
            k: demo[k] for k in ("version", "item_count", "token_count")
        }
        assert httpx.get(readme_server + "/v1/sessions/agent-42").json()["item_count"] == 3
        agent_session = httpx.get(readme_server + "/v1/sessions/py-agent%40example.com").json()
        assert agent_session["item_count"] == 4
        assert len(openai_api.bodies) == 4

        # The client README, pasted after the main one into the same server: its ids are its
        # own (no 409 from a session the walk-through created), and twice over.
        for run in ("client", "client-again"):
            run_file(
                "clients/python/README.md",
                readme_server,
                tmp_path / run,
                extra_env=_openai_env(openai_api),
            )
        assert len(openai_api.bodies) == 8


@pytest.mark.timeout(600)
def test_api_guide_examples_run_as_pasted(readme_server: str, tmp_path: Path) -> None:
    assert _readme_skips("docs/api-guide.md") <= 2
    run_file("docs/api-guide.md", readme_server, tmp_path, extra_env={})
    # The examples left what they say: the branch came from the snapshot, the copy from its
    # document, and the reader key is confined to the guide's sessions.
    branch = httpx.get(readme_server + "/v1/sessions/guide-branch").json()
    copy = httpx.get(readme_server + "/v1/sessions/guide-copy").json()
    assert branch["item_count"] == copy["item_count"] == 5
    keys = httpx.get(readme_server + "/v1/admin/keys").json()["items"]
    assert [(k["name"], k["session_prefix"]) for k in keys] == [("reader", "guide")]


@pytest.mark.timeout(600)
def test_clients_doc_python_snippets_run_as_pasted(readme_server: str, tmp_path: Path) -> None:
    """docs/clients.md: the Agents SDK wrapper, LangChain and Pydantic AI sections (its
    TypeScript blocks run in clients/typescript's own tests), twice into the same server."""
    # the generated-client commands (Node.js), and the ADK snippet (run by
    # clients/python/tests_adk in the venv that has google-adk)
    assert _readme_skips("docs/clients.md") <= 2
    for run in ("first", "again"):
        run_file("docs/clients.md", readme_server, tmp_path / run, extra_env={})
    for sid, count in (("docs-langchain", 4), ("docs-pydantic-ai", 4), ("docs-encrypted", 1)):
        assert httpx.get(f"{readme_server}/v1/sessions/{sid}").json()["item_count"] == count


# Pages whose snippets a test of their own runs (above), with checks of what they leave.
DEDICATED_PAGES = {"docs/api-guide.md", "docs/clients.md"}
# Fenced blocks that are not commands: JSON documents, HTTP requests in brief, TypeScript
# (compiled and run by clients/typescript's tests), diagrams. A shell transcript (`console`)
# is not among them: a command is written as `sh`, its output as `# ...` lines.
DESCRIPTIVE = {"", "json", "http", "text", "ts", "typescript", "js", "javascript"}


def docs_pages() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))


def test_every_docs_page_is_run_by_one_test() -> None:
    pages = docs_pages()
    assert DEDICATED_PAGES <= set(pages)
    assert {"docs/index.md", "docs/mcp.md", "docs/retention.md"} <= set(pages) - DEDICATED_PAGES


@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", [p for p in docs_pages() if p not in DEDICATED_PAGES])
def test_docs_page_snippets_run_as_pasted(
    page: str, readme_server: str, readme_database: str, tmp_path: Path
) -> None:
    """Every other docs page: its blocks are commands that run (each skip says why) or
    documents that are not commands. The OpenAI Agents SDK example of docs/mcp.md reaches the
    stand-in Responses API with the service's tools in its request."""
    snippets = extract_snippets(ROOT / page)
    unknown = [
        (s.line, s.lang) for s in snippets if s.lang not in RUNNABLE and s.lang not in DESCRIPTIVE
    ]
    assert not unknown, f"{page}: blocks neither runnable nor descriptive: {unknown}"
    unexplained = [s.line for s in snippets if s.skipped and not SKIP_REASON.match(s.skip_reason)]
    assert not unexplained, f"{page}: a skip without a reason, `skip (why)`, at {unexplained}"
    runnable = [s for s in snippets if s.lang in RUNNABLE and not s.skipped]
    if not runnable:
        return
    with FakeResponsesAPI() as openai_api:
        env = _openai_env(openai_api) | {"DATABASE_URL": readme_database}
        run_file(page, readme_server, tmp_path, extra_env=env)
    if page == "docs/mcp.md":
        assert len(openai_api.bodies) == 1
        tools = {t.get("name") for t in openai_api.bodies[0].get("tools", [])}
        assert {"get_context", "append_items", "search"} <= tools, tools
        context = httpx.get(f"{readme_server}/v1/sessions/mcp-demo/items").json()
        assert [i["content"] for i in context["items"]][-1] == "Hello"
