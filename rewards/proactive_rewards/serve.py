"""A remote reward server (OpenRLHF's ``--remote_rm_url``), standard library only: ``python -m proactive_rewards.serve``.

``POST /`` with a JSON body, JSON back (``GET /health`` answers ``{"status": "ok", "params": ...}``). Two request shapes, both answered with ``{"rewards": [...], "scores": [...]}``
(the same list twice: OpenRLHF reads ``rewards``, newer versions ``scores``):

- **OpenRLHF**: ``{"query": [str], "prompts": [str], "labels": [label]}``. ``query[i]`` is the decoded prompt and
  response (the prompt is cut off when the query starts with it), ``labels[i]`` the dataset's label column
  (``--label_key``): a JSON object (or its string) with ``task`` and the TRL columns (``targets``, ``times``,
  ``options``, ``answer``, ``valid_actions``; `proactive_rewards.trl`).
- **per sample**: ``{"samples": [{"task", "completion", "targets", ...}], "params": {...}}``.

A completion is scored exactly as the TRL reward function scores it (`proactive_rewards.adapters.score_sample`). A
bad request gets a 4xx whose ``error`` names the field (``labels[3].task: unknown 'acident'; ...``); the body is
bounded (``--max-bytes``, 413 beyond it); the server keeps serving after any error.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from proactive_rewards.adapters import SampleError, check_params, score_sample

MAX_BYTES = 8 * 1024 * 1024


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
    rewards = []
    for where, sample in _samples(payload):
        if "task" not in sample:
            raise RequestError(f"{where}.task: missing")
        if "completion" not in sample:
            raise RequestError(f"{where}.completion: missing")
        try:
            rewards.append(score_sample(sample["task"], sample["completion"], sample, params))
        except SampleError as err:
            field = "params" if err.field == "params" else f"{where}.{err.field}"
            raise RequestError(f"{field}: {str(err).split(': ', 1)[1]}") from None
    return {"rewards": rewards, "scores": rewards}


class RewardHandler(BaseHTTPRequestHandler):
    """``POST /``: score the body (`score_request`); every error is a JSON ``{"error": ...}`` answer."""

    server_version = "proactive-rewards"
    max_bytes = MAX_BYTES
    params: dict = {}

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.split("?", 1)[0] == "/health":  # a load balancer's or launcher's liveness probe
            self._answer(200, {"status": "ok", "params": self.params})
            return
        self._answer(405, {"error": "method: POST a JSON body to / (GET /health answers a liveness probe)"})

    def do_POST(self) -> None:  # noqa: N802
        if self.path.split("?", 1)[0] not in ("/", "/get_reward"):
            self._answer(404, {"error": f"path: {self.path!r} is not served; POST to /"})
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._answer(411, {"error": "Content-Length: required (a number of bytes)"})
            self.close_connection = True
            return
        if length > self.max_bytes:
            self.close_connection = True
            for _ in range(0, min(length, 8 * self.max_bytes), 1 << 16):  # drain a little, so the client reads us
                if not self.rfile.read(min(1 << 16, length)):
                    break
            self._answer(413, {"error": f"body: {length} bytes exceeds the limit of {self.max_bytes} (--max-bytes)"})
            return
        try:
            payload = json.loads(self.rfile.read(length) or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            self._answer(400, {"error": f"body: not valid JSON ({err})"})
            return
        try:
            self._answer(200, score_request(payload, self.params))
        except RequestError as err:
            self._answer(err.status, {"error": str(err)})
        except Exception as err:  # a bug, not the client's fault: say so and keep serving
            self._answer(500, {"error": f"internal: {type(err).__name__}: {err}"})

    def log_message(self, format, *args) -> None:  # noqa: A002 (http.server's signature)
        sys.stderr.write(f"proactive_rewards.serve: {format % args}\n")


def make_server(host: str = "127.0.0.1", port: int = 0, max_bytes: int = MAX_BYTES, params: dict | None = None):
    """A `ThreadingHTTPServer` answering reward requests (``server.server_address`` has the bound port)."""
    handler = type("Handler", (RewardHandler,), {"max_bytes": max_bytes, "params": dict(params or {})})
    return ThreadingHTTPServer((host, port), handler)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proactive_rewards.serve", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5000, help="port (default: 5000; 0 picks a free one)")
    parser.add_argument("--max-bytes", type=int, default=MAX_BYTES, help=f"largest body (default: {MAX_BYTES})")
    parser.add_argument("--params", default="{}", help="reward parameters as JSON, e.g. '{\"alpha\": 0.05}'")
    parser.add_argument("--quiet", action="store_true", help="no request log")
    args = parser.parse_args(argv)
    try:
        params = json.loads(args.params)
        if not isinstance(params, dict):
            raise ValueError("expected a JSON object")
        check_params(params)
    except ValueError as err:  # one line, before the port is bound
        print(f"{parser.prog}: error: --params: {str(err).removeprefix('params: ')}", file=sys.stderr)
        return 2
    server = make_server(args.host, args.port, args.max_bytes, params)
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
