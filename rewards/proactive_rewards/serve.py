"""A remote reward server (OpenRLHF's ``--remote_rm_url``), standard library only: ``python -m proactive_rewards.serve``.

``POST /`` with a JSON body, JSON back (``GET /health`` answers ``{"status": "ok", "rewards": [...], ...}``: the
registry's names). Two request shapes, both answered with ``{"rewards": [...], "scores": [...]}`` (the same list
twice: OpenRLHF reads ``rewards``, newer versions ``scores``):

- **OpenRLHF**: ``{"query": [str], "prompts": [str], "labels": [label]}``. ``query[i]`` is the decoded prompt and
  response (the prompt is cut off when the query starts with it), ``labels[i]`` the dataset's label column
  (``--label_key``): a JSON object (or its string) with ``task`` and the TRL columns (``targets``, ``times``,
  ``options``, ``answer``, ``valid_actions``; `proactive_rewards.trl`).
- **per sample**: ``{"samples": [{"task", "completion", "targets", ...}], "params": {...}}``.

A completion is scored exactly as the TRL reward function scores it (`proactive_rewards.adapters.score_sample`). A
bad request gets a 4xx whose ``error`` names the field (``labels[3].task: unknown 'acident'; ...``); the server
keeps serving after any error. What a request may do (docs/rewards.md, "Serving rewards safely"):

- choose among registered names only: a task or reward of the registry, a content scorer of
  `proactive_rewards.registry.list_content_scorers`; parameters are JSON values, checked against every reward that
  takes them, whatever the task. Nothing in a request is imported (dotted paths are for code and recipes);
- send a body of at most ``--max-bytes`` with a ``Content-Length`` (411, 400 or 413 otherwise);
- stay silent for at most ``--timeout`` seconds (then it is answered 400, or dropped while sending its headers);
- hold one of at most ``--max-connections`` handler threads; more connections wait in the listen backlog.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from proactive_rewards.adapters import SampleError, check_params, score_sample
from proactive_rewards.registry import list_content_scorers, list_rewards, task_rewards

MAX_BYTES = 8 * 1024 * 1024
TIMEOUT = 30.0
MAX_CONNECTIONS = 128
# After the answer, what a client still sends (a body over the limit, a body not read) is read and dropped, up to
# this much within the timeout and LINGER seconds of silence, so that it reads the answer instead of a reset.
DRAIN_BYTES = 64 * 1024 * 1024
LINGER = 2.0


class RequestError(ValueError):
    """A request this server cannot answer; ``status`` is its HTTP status, the message names the field."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _list(payload: dict, key: str) -> list:
    value = payload.get(key)
    if not isinstance(value, list):
        raise RequestError(f"{key}: expected a list, got {type(value).__name__}")
    return value


def _label(raw, where: str) -> dict:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as err:
            raise RequestError(f"{where}: not a JSON object ({err})") from None
        except RecursionError:
            raise RequestError(f"{where}: nested too deeply") from None
    if not isinstance(raw, dict):
        raise RequestError(f"{where}: expected an object with 'task' and the TRL columns, got {type(raw).__name__}")
    return raw


def _samples(payload: dict) -> list[tuple[str, dict]]:
    """``(where, sample)`` pairs of either request shape; a sample has ``task``, ``completion`` and columns."""
    if "samples" in payload:
        samples = _list(payload, "samples")
        out = []
        for i, sample in enumerate(samples):
            if not isinstance(sample, dict):
                raise RequestError(f"samples[{i}]: expected an object, got {type(sample).__name__}")
            out.append((f"samples[{i}]", sample))
        return out
    if "query" not in payload:
        raise RequestError("query: missing (send OpenRLHF's {query, prompts, labels} or {samples: [...]})")
    queries = _list(payload, "query")
    prompts = _list(payload, "prompts") if "prompts" in payload else [""] * len(queries)
    labels = _list(payload, "labels") if "labels" in payload else None
    if labels is None:
        raise RequestError("labels: missing (each label holds the sample's task and targets; OpenRLHF --label_key)")
    for key, values in (("prompts", prompts), ("labels", labels)):
        if len(values) != len(queries):
            raise RequestError(f"{key}: {len(values)} entries for {len(queries)} queries")
    out = []
    for i, (query, prompt, raw) in enumerate(zip(queries, prompts, labels)):
        if not isinstance(query, str):
            raise RequestError(f"query[{i}]: expected a string, got {type(query).__name__}")
        label = _label(raw, f"labels[{i}]")
        completion = query[len(prompt) :] if isinstance(prompt, str) and prompt and query.startswith(prompt) else query
        out.append((f"labels[{i}]", {**label, "completion": completion}))
    return out


def check_request_params(params) -> None:
    """Parameters a request (or ``--params``) may set: those the rewards take, a content scorer by registered name only.

    Raises `RequestError` naming the field (``params.<name>``); each value is checked against every reward that takes
    it (`proactive_rewards.adapters.check_params`), whatever the task of the request's samples.

    Example:

    >>> check_request_params({"content_scorer": "shutil:copyfile"})
    Traceback (most recent call last):
    ...
    proactive_rewards.serve.RequestError: params.content_scorer: 'shutil:copyfile' is not a registered content ...
    """
    if not isinstance(params, Mapping):
        raise RequestError(f"params: expected an object, got {type(params).__name__}")
    for key, value in params.items():
        if key == "content_scorer" and (not isinstance(value, str) or value not in list_content_scorers()):
            raise RequestError(
                f"params.content_scorer: {value!r:.80} is not a registered content scorer; expected one of "
                f"{', '.join(list_content_scorers())} (a server imports nothing a request names: register a scorer "
                f"with proactive_rewards.register_content_scorer in the code that calls make_server)"
            )
    try:
        check_params(params)
    except SampleError as err:
        raise RequestError(str(err)) from None


def score_request(payload, params: dict | None = None) -> dict:
    """The response to one request body (already parsed); raises `RequestError` naming the field.

    Example:

    >>> score_request({"samples": [{"task": "atomic", "completion": "<t=11.0s></Response> 1",
    ...                             "targets": [{"time": 10.0, "text": "1"}]}]})["rewards"]
    [0.9512...]
    """
    if not isinstance(payload, dict):
        raise RequestError(f"body: expected a JSON object, got {type(payload).__name__}")
    params = {**(params or {}), **_label(payload.get("params") or {}, "params")}
    check_request_params(params)
    rewards = []
    for where, sample in _samples(payload):
        if "task" not in sample:
            raise RequestError(f"{where}.task: missing")
        if "completion" not in sample:
            raise RequestError(f"{where}.completion: missing")
        try:
            rewards.append(score_sample(sample["task"], sample["completion"], sample, params))
        except SampleError as err:
            field = err.field if err.field.startswith("params") else f"{where}.{err.field}"
            raise RequestError(f"{field}: {str(err).split(': ', 1)[1]}") from None
    return {"rewards": rewards, "scores": rewards}


_LENGTH = re.compile(r"[0-9]+")


class RewardHandler(BaseHTTPRequestHandler):
    """``POST /``: score the body (`score_request`); every error is a JSON ``{"error": ...}`` answer.

    ``timeout`` (`StreamRequestHandler`) is set on every connection: a client silent that long while sending its
    headers is dropped, while sending its body it is answered 400.
    """

    server_version = "proactive-rewards"
    max_bytes = MAX_BYTES
    timeout = TIMEOUT
    params: dict = {}

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.split("?", 1)[0] == "/health":  # a load balancer's or launcher's liveness probe
            # the registry's lists: the names `get_reward` and the `task` field accept, the scorers a request may name
            health = {"status": "ok", "rewards": list_rewards(), "tasks": task_rewards()}
            self._answer(200, {**health, "content_scorers": list_content_scorers(), "params": self.params})
            return
        self._answer(405, {"error": "method: POST a JSON body to / (GET /health answers a liveness probe)"})

    def _body(self) -> bytes:
        """The request body, `RequestError` (411, 400, 413) when its length is missing, wrong or too large."""
        lengths = self.headers.get_all("Content-Length") or []
        if self.headers.get("Transfer-Encoding") or not lengths:
            raise RequestError("Content-Length: required (the body's size in bytes; chunked bodies are not read)", 411)
        if len(set(lengths)) > 1 or not _LENGTH.fullmatch(lengths[0].strip()):
            raise RequestError(f"Content-Length: expected one number of bytes >= 0, got {', '.join(lengths)!r:.80}")
        digits = lengths[0].strip().lstrip("0") or "0"
        length = int(digits) if len(digits) <= 18 else DRAIN_BYTES + 1  # no int() of a huge string
        if length > self.max_bytes:
            raise RequestError(f"body: {digits:.40} bytes exceeds the limit of {self.max_bytes} (--max-bytes)", 413)
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            body = None
        if body is None or len(body) < length:
            raise RequestError(
                f"body: Content-Length is {length} but the body stopped short "
                f"(the connection closed, or sent nothing for {self.timeout:g} s: --timeout)"
            )
        return body

    def do_POST(self) -> None:  # noqa: N802
        if self.path.split("?", 1)[0] not in ("/", "/get_reward"):
            self.close_connection = True  # the body is not read
            self._answer(404, {"error": f"path: {self.path!r:.200} is not served; POST to /"})
            return
        try:
            body = self._body()
        except RequestError as err:
            self.close_connection = True
            self._answer(err.status, {"error": str(err)})
            return
        try:
            payload = json.loads(body or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            self._answer(400, {"error": f"body: not valid JSON ({err})"})
            return
        except RecursionError:
            self._answer(400, {"error": "body: nested too deeply"})
            return
        try:
            self._answer(200, score_request(payload, self.params))
        except RequestError as err:
            self._answer(err.status, {"error": str(err)})
        except RecursionError:
            self._answer(400, {"error": "body: nested too deeply"})
        except Exception as err:  # a bug, not the client's fault: say so and keep serving
            self._answer(500, {"error": f"internal: {type(err).__name__}: {err}"})

    def log_message(self, format, *args) -> None:  # noqa: A002 (http.server's signature)
        sys.stderr.write(f"proactive_rewards.serve: {format % args}\n")


class RewardServer(ThreadingHTTPServer):
    """A `ThreadingHTTPServer` with at most `max_connections` handler threads and a long listen backlog.

    A connection beyond the limit waits in the backlog until a thread is free (each is freed after the answer, or
    after ``timeout`` seconds of silence), so a burst of clients is queued, not refused, and threads stay bounded.
    """

    # the listen backlog (socketserver's default, 5, drops a burst of concurrent clients); the kernel may cap it
    request_queue_size = 1024

    def __init__(self, address, handler, max_connections: int = MAX_CONNECTIONS):
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stopping = False
        super().__init__(address, handler)

    def process_request(self, request, client_address):
        while not self._slots.acquire(timeout=0.5):
            if self._stopping:
                self.close_request(request)
                return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def shutdown(self):
        self._stopping = True
        super().shutdown()

    def shutdown_request(self, request):
        """A lingering close: the answer is sent (FIN), then what the client still sends is dropped, bounded."""
        timeout = self.RequestHandlerClass.timeout
        try:
            request.shutdown(socket.SHUT_WR)
            deadline, left = time.monotonic() + timeout, DRAIN_BYTES
            while left > 0 and (wait := deadline - time.monotonic()) > 0:
                request.settimeout(min(wait, LINGER, timeout))
                chunk = request.recv(min(left, 1 << 16))
                if not chunk:  # the client read the answer and closed
                    break
                left -= len(chunk)
        except OSError:  # a timeout or a reset: the client stopped sending
            pass
        self.close_request(request)

    def handle_error(self, request, client_address):
        # a client that went away mid-answer: one line, not a traceback
        print(f"proactive_rewards.serve: {client_address[0]}: {sys.exc_info()[1]!r}", file=sys.stderr)


def make_server(
    host: str = "127.0.0.1",
    port: int = 0,
    max_bytes: int = MAX_BYTES,
    params: dict | None = None,
    timeout: float = TIMEOUT,
    max_connections: int = MAX_CONNECTIONS,
) -> RewardServer:
    """A `RewardServer` answering reward requests (``server.server_address`` has the bound port).

    Args:
        host (`str`, *optional*, defaults to `"127.0.0.1"`): the address to bind; loopback unless a proxy is in front.
        port (`int`, *optional*, defaults to `0`): the port (0 picks a free one).
        max_bytes (`int`, *optional*, defaults to 8 MiB): the largest body (413 beyond it).
        params (`dict`, *optional*): reward parameters for every request (a request's ``params`` win), checked as a
            request's are (`check_request_params`); raises `RequestError` (a `ValueError`) naming the field.
        timeout (`float`, *optional*, defaults to `30.0`): seconds a client may stay silent on its connection.
        max_connections (`int`, *optional*, defaults to `128`): handler threads at most.
    """
    params = dict(params or {})
    check_request_params(params)
    if not (0 < timeout < 1e6 and max_bytes >= 0 and max_connections >= 1):
        raise ValueError(
            f"--timeout must be in (0, 1e6) s, --max-bytes >= 0, --max-connections >= 1; "
            f"got {timeout}, {max_bytes}, {max_connections}"
        )
    attrs = {"max_bytes": max_bytes, "params": params, "timeout": timeout}
    return RewardServer((host, port), type("Handler", (RewardHandler,), attrs), max_connections)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proactive_rewards.serve", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1; others: behind a proxy)"
    )
    parser.add_argument("--port", type=int, default=5000, help="port (default: 5000; 0 picks a free one)")
    parser.add_argument("--max-bytes", type=int, default=MAX_BYTES, help=f"largest body (default: {MAX_BYTES})")
    parser.add_argument(
        "--timeout", type=float, default=TIMEOUT, help=f"seconds a client may stay silent (default: {TIMEOUT:g})"
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        help=f"handler threads at most; more connections wait in the backlog (default: {MAX_CONNECTIONS})",
    )
    parser.add_argument("--params", default="{}", help="reward parameters as JSON, e.g. '{\"alpha\": 0.05}'")
    parser.add_argument("--quiet", action="store_true", help="no request log")
    args = parser.parse_args(argv)
    try:
        params = json.loads(args.params)
        if not isinstance(params, dict):
            raise ValueError("expected a JSON object")
        check_request_params(params)
    except (ValueError, RecursionError) as err:  # one line, before the port is bound
        message = str(err).removeprefix("params: ").removeprefix("params.") if str(err) else "nested too deeply"
        print(f"{parser.prog}: error: --params: {message}", file=sys.stderr)
        return 2
    try:
        server = make_server(args.host, args.port, args.max_bytes, params, args.timeout, args.max_connections)
    except (ValueError, OSError) as err:  # a bad limit, an address in use
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    if args.quiet:
        server.RequestHandlerClass.log_message = lambda *a: None
    host, port = server.server_address[:2]
    print(f"proactive_rewards.serve: listening on http://{host}:{port}/", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
