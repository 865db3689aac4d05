"""A real local HTTP server standing in for an OpenAI-compatible LLM provider.

Run it on its own::

    python -m tests.support.fake_llm --port 8099      # prints "FAKE_LLM_LISTENING <port>"

or from a test with ``FakeLLMServer`` (a subprocess on a free port, stopped on exit)::

    with FakeLLMServer() as fake:
        fake.configure("fenced", delay=0.2)
        settings = LLMSettings(base_url=fake.base_url, model="fake-model")
        ...
        assert fake.requests()[0]["body"]["messages"][0]["role"] == "system"

Endpoints:

- ``POST /v1/chat/completions``: an OpenAI chat completion (``id``, ``object``, ``created``,
  ``model``, ``choices[0].message.content``, ``finish_reason``, ``usage``), shaped by the mode;
- ``POST /v1/embeddings``: an OpenAI embeddings answer (``object: list``, ``data[i]`` with
  ``index`` and ``embedding``, ``model``, ``usage``). Each vector is a deterministic function of
  its text (``fake_embedding``: word hashes into ``dimensions`` buckets, default 8), so texts
  sharing words are near. The same modes apply (``error``, ``hang``, ``malformed``: 200 without
  ``data``; ``raw``: ``content`` returned as the whole body); ``data`` is answered in reverse
  order, so a client must place vectors by ``index``;
- ``POST /_control``: ``{"mode": ..., "delay": s, "status": n, "hang_seconds": s,
  "content": ..., "script": [{...}, ...]}``. Keys given replace the default behaviour; each
  ``script`` entry (same keys) answers exactly one later request, in order, before the default
  applies again;
- ``GET /_requests``: ``{"requests": [{"path", "headers", "body"}, ...]}``, every chat request
  received since the last reset (headers lower-cased);
- ``POST /_reset``: default behaviour (``json``, no delay), empty script and request log.

Modes: ``json`` (clean JSON object), ``fenced`` (the JSON in a code fence with prose around
it), ``string_lists`` (strings and null where lists were asked), ``prose`` (no JSON at all),
``broken`` (truncated JSON), ``error`` (HTTP ``status``, default 500), ``hang`` (sleeps
``hang_seconds``, default 30, before answering), ``malformed`` (200 without ``choices``),
``reject_response_format`` (HTTP 400 when the request carries ``response_format``, else
``json``), ``raw`` (``content`` returned as the message text). ``delay`` (seconds) applies
before any answer.

Only the standard library is imported: the module is also the server process's entry point.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import selectors
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self

__all__ = [
    "FENCED_PREFIX",
    "MODES",
    "SUMMARY",
    "FakeLLMServer",
    "fake_embedding",
    "main",
    "reply_content",
]

MODES = (
    "json",
    "fenced",
    "string_lists",
    "prose",
    "broken",
    "error",
    "hang",
    "malformed",
    "reject_response_format",
    "raw",
)

# The summary the ``json`` and ``fenced`` modes answer with (tests assert against it).
SUMMARY: dict[str, Any] = {
    "goal": "Fix the failing date parser tests in utils/dates.py",
    "completed": ["Read utils/dates.py", "Found the off-by-one in parse_range"],
    "pending": ["Fix parse_range", "Re-run pytest"],
    "decisions": ["Keep the public signature of parse_range unchanged"],
    "errors": ["pytest: 2 failed in tests/test_dates.py"],
    "test_results": ["2 failed, 14 passed"],
    "open_questions": ["Should ranges be inclusive at the end?"],
}
FENCED_PREFIX = "Sure! Here is the summary of the conversation so far:\n\n```json\n"
_STRING_LISTS: dict[str, Any] = {
    "goal": "Fix the failing date parser tests",
    "completed": "Read utils/dates.py",
    "pending": None,
    "decisions": "Keep the signature",
    "errors": [],
    "test_results": 3,
    "open_questions": [None, {"q": "inclusive end?"}],
}
_PROSE = (
    "The user asked to fix the failing date parser tests. I read utils/dates.py, found an "
    "off-by-one error in parse_range and still need to fix it and re-run the tests."
)
_BROKEN = '{"goal": "Fix the failing date parser tests", "completed": ["Read utils/dates.py", '


def fake_embedding(text: str, dimensions: int = 8) -> list[float]:
    """The vector the fake embeddings endpoint answers for ``text`` (not normalised)."""
    vector = [0.0] * dimensions
    for word in text.lower().split():
        bucket = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dimensions
        vector[bucket] += 1.0 + len(word) % 3
    if not any(vector):
        vector[0] = 1.0
    return vector


def reply_content(mode: str, content: Any = None) -> str:
    """The assistant text a mode answers with (``content`` overrides the JSON or raw text)."""
    summary = content if content is not None else SUMMARY
    if mode == "fenced":
        return f"{FENCED_PREFIX}{json.dumps(summary, indent=2)}\n```\n\nAnything else?"
    if mode == "string_lists":
        return json.dumps(_STRING_LISTS)
    if mode == "prose":
        return _PROSE
    if mode == "broken":
        return _BROKEN
    if mode == "raw":
        return content if isinstance(content, str) else json.dumps(content)
    return json.dumps(summary)


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.default: dict[str, Any] = {"mode": "json", "delay": 0.0}
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.counter = 0


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests): nothing to answer

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode(errors="replace")

    def do_GET(self) -> None:
        state = self.server.state
        if self.path == "/_requests":
            with state.lock:
                self._send(200, {"requests": list(state.requests)})
        elif self.path == "/_health":
            self._send(200, {"ok": True})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        state = self.server.state
        body = self._body()
        if self.path == "/_control":
            with state.lock:
                options = dict(body or {})
                script = options.pop("script", None)
                state.default.update(options)
                if script:
                    state.script.extend(script)
            self._send(200, {"default": state.default, "scripted": len(state.script)})
        elif self.path == "/_reset":
            with state.lock:
                state.reset()
            self._send(200, {"ok": True})
        elif self.path.rstrip("/").endswith("/chat/completions"):
            self._chat(body)
        elif self.path.rstrip("/").endswith("/embeddings"):
            self._embeddings(body)
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def _take(self, body: Any) -> tuple[dict[str, Any], int]:
        """The behaviour for this request (the default, or the next scripted one) and its
        number; the request is recorded."""
        state = self.server.state
        with state.lock:
            behaviour = dict(state.default)
            if state.script:
                behaviour.update(state.script.pop(0))
            state.counter += 1
            state.requests.append(
                {
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                }
            )
            return behaviour, state.counter

    def _misbehaved(self, behaviour: dict[str, Any]) -> bool:
        """Delay, hang, fail or answer malformed as ``behaviour`` says; True if answered."""
        mode = behaviour.get("mode", "json")
        time.sleep(float(behaviour.get("delay") or 0))
        if mode == "hang":
            time.sleep(float(behaviour.get("hang_seconds", 30)))
        if mode == "error":
            status = int(behaviour.get("status", 500))
            self._send(status, {"error": {"message": f"fake upstream error {status}"}})
            return True
        if mode == "malformed":
            self._send(200, {"unexpected": True})
            return True
        return False

    def _chat(self, body: Any) -> None:
        behaviour, number = self._take(body)
        if self._misbehaved(behaviour):
            return
        mode = behaviour.get("mode", "json")
        request = body if isinstance(body, dict) else {}
        if mode == "reject_response_format" and "response_format" in request:
            self._send(
                400,
                {"error": {"message": "response_format is not supported by this server"}},
            )
            return
        content = reply_content(mode, behaviour.get("content"))
        prompt_chars = sum(
            len(str(m.get("content", "")))
            for m in request.get("messages", [])
            if isinstance(m, dict)
        )
        prompt_tokens = prompt_chars // 4
        completion_tokens = len(content) // 4
        self._send(
            200,
            {
                "id": f"chatcmpl-fake-{number}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model", "fake-model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )

    def _embeddings(self, body: Any) -> None:
        behaviour, _ = self._take(body)
        if self._misbehaved(behaviour):
            return
        mode = behaviour.get("mode", "json")
        if mode == "raw":
            self._send(200, behaviour.get("content"))
            return
        request = body if isinstance(body, dict) else {}
        texts = request.get("input", [])
        texts = [texts] if isinstance(texts, str) else list(texts)
        dimensions = int(request.get("dimensions") or 8)
        data = [
            {"object": "embedding", "index": i, "embedding": fake_embedding(str(t), dimensions)}
            for i, t in enumerate(texts)
        ]
        self._send(
            200,
            {
                "object": "list",
                "data": data[::-1],
                "model": request.get("model", "fake-embed"),
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            },
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.state = _State()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible LLM server for tests")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args(argv)
    server = _Server((args.host, args.port))
    print(f"FAKE_LLM_LISTENING {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


_REPO_ROOT = Path(__file__).resolve().parents[2]


class FakeLLMServer:
    """The fake server as a subprocess on a free port; a context manager (start/stop)."""

    def __init__(self, *, host: str = "127.0.0.1", start_timeout: float = 10.0) -> None:
        self.host = host
        self.start_timeout = start_timeout
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the fake LLM server is not running")
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What ``LLMSettings.base_url`` (and the OpenAI SDKs) expect: ``http://host:port/v1``."""
        return self.url + "/v1"

    def start(self) -> Self:
        env = {**os.environ, "PYTHONPATH": str(_REPO_ROOT), "PYTHONUNBUFFERED": "1"}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.fake_llm", "--host", self.host, "--port", "0"],
            cwd=_REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
        )
        assert self._process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self._process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + self.start_timeout
        line = b""
        while time.monotonic() < deadline and not line.endswith(b"\n"):
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            chunk = os.read(self._process.stdout.fileno(), 1)
            if not chunk:
                break
            line += chunk
        selector.close()
        text = line.decode().strip()
        if not text.startswith("FAKE_LLM_LISTENING "):
            self.stop()
            raise RuntimeError(f"the fake LLM server did not start (got {text!r})")
        self.port = int(text.split()[1])
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        if process.stdout is not None:
            process.stdout.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())

    def configure(
        self,
        mode: str = "json",
        *,
        delay: float = 0.0,
        status: int = 500,
        hang_seconds: float = 30.0,
        content: Any = None,
    ) -> None:
        """Set the default behaviour for every following chat request."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {MODES}")
        self._call(
            "POST",
            "/_control",
            {
                "mode": mode,
                "delay": delay,
                "status": status,
                "hang_seconds": hang_seconds,
                "content": content,
            },
        )

    def script(self, *replies: dict[str, Any]) -> None:
        """Queue one-shot behaviours (same keys as ``configure``), one per coming request."""
        for reply in replies:
            if reply.get("mode", "json") not in MODES:
                raise ValueError(f"unknown mode {reply.get('mode')!r}")
        self._call("POST", "/_control", {"script": list(replies)})

    def requests(self) -> list[dict[str, Any]]:
        """The chat requests received since the last reset, oldest first."""
        result: list[dict[str, Any]] = self._call("GET", "/_requests")["requests"]
        return result

    def reset(self) -> None:
        self._call("POST", "/_reset", {})


if __name__ == "__main__":
    main()
