"""A real HTTP server on loopback that speaks ``POST /v1/chat/completions`` and misbehaves on a schedule.

Used by the judge and policy tests. ``fault(prompt, attempt)`` decides, per request, whether to answer or to
inject a fault: ``"timeout"`` (sleep past the client timeout, then answer), ``"429"``, ``"500"``, ``"malformed"``
(a 200 with a truncated JSON body) or ``"unparseable"`` (a well-formed answer whose text is not a score).
``attempt`` counts earlier requests with the same last user message, so a schedule is deterministic whatever
the client's concurrency.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _user_text(messages: list[dict]) -> str:
    content = messages[-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if part.get("type") == "text")


class FakeOpenAI:
    """Start with ``with FakeOpenAI(answer=..., fault=...) as server:``; `server.base_url` ends in ``/v1``.

    Args:
        answer (`Callable[[list[dict]], str]`): the assistant text for a request's messages.
        fault (`Callable[[str, int], str | None]`, *optional*): the fault to inject for (user text, attempt).
        sleep (`float`, *optional*, defaults to `1.0`): how long a ``"timeout"`` request stalls.
    """

    def __init__(
        self,
        answer: Callable[[list[dict]], str],
        fault: Callable[[str, int], str | None] | None = None,
        sleep: float = 1.0,
    ):
        self.answer, self.fault, self.sleep = answer, fault or (lambda prompt, attempt: None), sleep
        self.requests = 0
        self.kinds: Counter = Counter()
        self.bodies: list[dict] = []
        self._attempts: Counter = Counter()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def _send(self, status: int, body: bytes, headers: dict | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if self.path != "/v1/chat/completions":
                    self._send(404, b'{"error": "not found"}')
                    return
                prompt = _user_text(body["messages"])
                with fake._lock:
                    fake.requests += 1
                    fake.bodies.append(body)
                    attempt = fake._attempts[prompt]
                    fake._attempts[prompt] += 1
                kind = fake.fault(prompt, attempt)
                with fake._lock:
                    fake.kinds[kind or "ok"] += 1
                if kind == "429":
                    self._send(429, b'{"error": "rate limited"}', {"Retry-After": "0"})
                    return
                if kind == "500":
                    self._send(500, b'{"error": "boom"}')
                    return
                if kind == "malformed":
                    self._send(200, b'{"id": "x", "choices": [{"message": {"content": "')
                    return
                if kind == "timeout":
                    time.sleep(fake.sleep)
                text = "I would rather not say." if kind == "unparseable" else fake.answer(body["messages"])
                reply = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "model": body.get("model", ""),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
                }
                self._send(200, json.dumps(reply).encode())

        return Handler
