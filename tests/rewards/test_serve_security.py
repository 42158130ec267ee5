"""The reward server runs only registered code and answers hostile requests (docs/rewards.md, "Serving rewards safely").

Loopback only, bounded loops, every server stopped at the end of its test.
"""

from __future__ import annotations

import json
import math
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from proactive_rewards import get_reward, list_rewards, task_rewards
from proactive_rewards.adapters import score_sample
from proactive_rewards.serve import make_server

OPTIONS = ["Move the occluding object.", "I do not know.", "cat", "dog"]
# one well-formed sample per task and per reward name (what a request's `task` may say), each scored > 0
SAMPLES = {
    **{
        task: {"completion": "<t=11.0s></Response> 1", "targets": [{"time": 10.0, "text": "1"}]}
        for task in ("atomic", "event_type", "count")
    },
    **{
        task: {"completion": "<t=11.0s></Response> Warning", "targets": [{"time": 10.0, "text": "Warning"}]}
        for task in ("accident",)
    },
    "compositional": {"completion": "<t=11.0s></Response> start", "targets": [{"time": 10.0, "text": "start"}]},
    "intervention": {
        "completion": "<t=41.0s></Response> turn off the stove",
        "targets": [{"time": 40.0, "text": "turn off the stove", "window": [40.0, 44.0]}],
    },
    "proactive_suggestion": {"completion": "A", "options": OPTIONS, "answer": "dog", "valid_actions": [OPTIONS[0]]},
    "state_format": {"completion": "</Response> 1"},
}
TOUCHED: list = []  # the sentinel a request naming `_touch` would change


def _touch(response_text, target_text):
    TOUCHED.append((response_text, target_text))
    return 1.0


@pytest.fixture()
def serve():
    """``serve(**make_server kwargs) -> (url, server)``; every server started is stopped after the test."""
    started = []

    def start(**kwargs):
        srv = make_server(port=0, **kwargs)
        srv.RequestHandlerClass.log_message = lambda *a: None
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        started.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}/", srv

    yield start
    for srv in started:
        srv.shutdown()
        srv.server_close()


def post(url: str, body) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def get(url: str) -> tuple[int, dict]:
    with urllib.request.urlopen(url, timeout=20) as response:
        return response.status, json.loads(response.read())


def read_all(sock) -> bytes:
    """Everything until the server closes (each read waits 20 s at most: a hang fails, never blocks)."""
    sock.settimeout(20)
    answer = b""
    while chunk := sock.recv(1 << 16):
        answer += chunk
    return answer


def raw(url: str, data: bytes, close_write: bool = False) -> tuple[int, str]:
    """Send `data` as is on one connection and read the answer."""
    port = int(url.rsplit(":", 1)[1].strip("/"))
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(data)
        if close_write:
            sock.shutdown(socket.SHUT_WR)
        answer = read_all(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1."), answer[:200]
    return int(head.split()[1]), json.loads(body).get("error", "")


def handler_threads() -> int:
    return sum("process_request_thread" in t.name for t in threading.enumerate())


def wait_until(condition, limit: float = 20.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


# --- only registered names -------------------------------------------------------------------------------------

CODE = ["shutil:copyfile", "os:system", "builtins:eval", "subprocess.getoutput", f"{__name__}:_touch"]


@pytest.mark.parametrize("name", CODE)
def test_a_request_cannot_name_code_to_run(name, serve, tmp_path):
    url, _ = serve()
    source, copy = tmp_path / "source.txt", tmp_path / "copy.txt"
    source.write_text("secret")
    # an intervention sample whose response and target texts are the arguments `name` would be called with
    sample = {
        "task": "intervention",
        "completion": f"<t=41.0s></Response> {source}",
        "targets": [{"time": 40.0, "text": str(copy), "window": [40.0, 44.0]}],
    }
    attempts = [
        (
            {"samples": [sample], "params": {"content_scorer": name}},
            r"^params\.content_scorer: '.*' is not a registered",
        ),
        ({"samples": [sample], "params": json.dumps({"content_scorer": name})}, r"^params\.content_scorer: "),
        ({"samples": [{**sample, "task": name}]}, r"^samples\[0\]\.task: unknown '.*'; expected one of accident, "),
        ({"query": ["x"], "labels": [{**sample, "task": name}]}, r"^labels\[0\]\.task: unknown "),
        ({"samples": [sample], "params": {name: 1}}, rf"^params\.{re.escape(name)}: unknown parameter"),
        ({"samples": [sample], "params": {"content_scorer": [name]}}, r"^params\.content_scorer: "),
    ]
    answers = [post(url, body) for body, _ in attempts]
    assert not copy.exists() and TOUCHED == []  # nothing ran
    for (body, message), (code, answer) in zip(attempts, answers):
        assert code == 400 and re.match(message, answer["error"]), (body, answer)
    assert post(url, {"samples": [sample], "params": {"content_scorer": "exact_match"}})[0] == 200  # scorable
    # code and recipes may still name a scorer by import path (in-process, trusted)
    assert get_reward("intervention", content_scorer=f"{__name__}:_touch")(
        ["<t=41s></Response> a"], targets=[[{"time": 40.0, "text": "b", "window": [40.0, 44.0]}]]
    ) == [1.0]
    TOUCHED.clear()


def test_a_registered_content_scorer_is_chosen_by_name(serve):
    url, _ = serve()
    sample = {
        "task": "intervention",
        "completion": "<t=41.0s></Response> please stop",
        "targets": [{"time": 40.0, "text": "stop", "window": [40.0, 44.0]}],
    }
    assert post(url, {"samples": [sample], "params": {"content_scorer": "token_f1"}})[1]["rewards"] == [
        pytest.approx(2 / 3)
    ]
    assert post(url, {"samples": [sample], "params": {"content_scorer": "exact_match"}})[1]["rewards"] == [0.0]
    with pytest.raises(ValueError, match=r"content_scorer: 'shutil:copyfile' is not a registered content scorer"):
        make_server(port=0, params={"content_scorer": "shutil:copyfile"})


BAD_PARAMS = [
    ({"r_p": 2}, "r_p", r"r_p must be a number in \[0, 1\]"),
    ({"r_p": "half"}, "r_p", "expected a number"),
    ({"alpha": -1}, "alpha", "alpha must be a finite number >= 0"),
    ({"alpha": math.nan}, "alpha", "alpha must be a finite number >= 0"),
    ({"lam": True}, "lam", "expected a number"),
    ({"signal": 5}, "signal", "expected a string"),
    ({"valid_actions": "Move"}, "valid_actions", "expected a list of strings"),
    ({"gamma": 1}, "gamma", "unknown parameter; the rewards take alpha, content_scorer, lam, r_p"),
    ({"content_scorer": 3}, "content_scorer", "is not a registered content scorer"),
]


@pytest.mark.parametrize("task", sorted(set(task_rewards()) | set(list_rewards())))
def test_invalid_parameters_are_refused_for_every_task(task, serve):
    """A parameter the task's own reward does not take is still checked: a bad ``r_p`` fails an accident sample."""
    url, _ = serve()
    sample = {"task": task, **SAMPLES[task]}
    code, answer = post(url, {"samples": [sample]})
    assert code == 200 and answer["rewards"][0] > 0, answer
    for params, field, message in BAD_PARAMS:
        code, answer = post(url, {"samples": [sample], "params": params})
        assert code == 400, (params, answer)
        assert answer["error"].startswith(f"params.{field}: ") and re.search(message, answer["error"]), answer


def test_health_and_errors_list_the_registry_names(serve):
    url, _ = serve(params={"lam": 0.3})
    code, health = get(url + "health")
    assert code == 200 and health["rewards"] == list_rewards() and health["tasks"] == task_rewards()
    assert health["content_scorers"] == ["exact_match", "token_f1"] and health["params"] == {"lam": 0.3}
    with pytest.raises(ValueError) as err:
        get_reward("acident")
    in_process = re.search(r"expected one of (.*) or a dotted", str(err.value)).group(1)
    _, answer = post(url, {"samples": [{"task": "acident", "completion": ""}]})
    served = re.search(r"expected one of (.*) or a task: (.*)", answer["error"])
    assert in_process == served.group(1) == ", ".join(list_rewards())
    assert served.group(2).split(", ") == [t for t in task_rewards() if t not in list_rewards()]


# --- the body, the timeout and the threads ---------------------------------------------------------------------

GOOD = json.dumps({"samples": [{"task": "atomic", **SAMPLES["atomic"]}]}).encode()


def request(length: str | None, body: bytes = b"", extra: str = "") -> bytes:
    head = "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (f"Content-Length: {length}\r\n" if length is not None else "")
    return (head + extra + "\r\n").encode() + body


def test_every_content_length_is_answered(serve):
    url, _ = serve(max_bytes=4096, timeout=0.5)
    cases = [
        (request(None, GOOD), False, 411, r"^Content-Length: required"),
        (request("-1", GOOD), False, 400, r"^Content-Length: expected one number of bytes >= 0, got '-1'"),
        (request("abc", GOOD), False, 400, r"^Content-Length: expected one number"),
        (request("1e3", GOOD), False, 400, r"^Content-Length: expected one number"),
        (request("12", GOOD, "Content-Length: 13\r\n"), False, 400, r"^Content-Length: expected one number"),
        (request("100", GOOD, "Transfer-Encoding: chunked\r\n"), False, 411, r"^Content-Length: required"),
        (request("5000", b"x" * 5000), False, 413, r"^body: 5000 bytes exceeds the limit of 4096"),
        (request("9" * 400, b"x"), False, 413, r"^body: 9{40} bytes exceeds the limit"),
        # more announced than sent: the client waits (answered after the 0.5 s timeout) or closes
        (request(str(len(GOOD) + 10), GOOD), False, 400, r"^body: Content-Length is \d+ but the body stopped short"),
        (request(str(len(GOOD) + 10), GOOD), True, 400, r"^body: Content-Length is \d+ but the body stopped short"),
        (request(str(len(GOOD)), GOOD), False, 200, r"^$"),
    ]
    start = time.monotonic()
    for data, close_write, status, message in cases:
        code, error = raw(url, data, close_write)
        assert code == status and re.match(message, error), (data[:120], code, error)
    assert time.monotonic() - start < 20  # never hangs (each wait is the 0.5 s timeout at most)
    assert post(url, GOOD) == (200, {"rewards": [math.exp(-0.05)], "scores": [math.exp(-0.05)]})


def test_a_50_mb_body_gets_a_413(serve):
    url, _ = serve(max_bytes=4096, timeout=10)
    code, answer = post(url, b"x" * (50 * 1024 * 1024))
    assert code == 413 and answer["error"].startswith(f"body: {50 * 1024 * 1024} bytes exceeds the limit of 4096")


def test_deep_json_gets_a_400(serve):
    url, _ = serve()
    deep = "[" * 10_000 + "]" * 10_000
    for body, message in [
        (deep.encode(), "body: nested too deeply"),
        (f'{{"samples": {deep}}}'.encode(), "body: nested too deeply"),
        (json.dumps({"query": ["x"], "labels": [deep]}).encode(), "labels[0]: nested too deeply"),
        (json.dumps({"samples": [], "params": deep}).encode(), "params: nested too deeply"),
    ]:
        assert post(url, body) == (400, {"error": message})
    assert post(url, GOOD)[0] == 200


FUZZ_VALUES = [
    *(None, 1, -1, 1.5, math.nan, math.inf, "x", "", [], {}, [1], ["a"], {"a": 1}, [[[[1]]]], True, [None]),
    *("<t=5s></Response> 1", [{"time": 1}], [{"time": "x", "text": 1}], [{"time": 1, "text": "1", "window": [1]}]),
    *([{"time": 1, "text": "1", "window": "ab"}], [{"time": 1, "text": "1", "window": [None, 2]}], ["a", None]),
]
FUZZ_TASKS = [*sorted(SAMPLES), "pvqa", None, 1, ["accident"], {"task": "accident"}]
FUZZ_PARAMS = ["alpha", "lam", "r_p", "signal", "valid_actions", "content_scorer"]


def test_malformed_requests_are_400_never_500(serve):
    """300 requests of wrong types, nulls, NaN/inf and bad shapes (fixed seed): each a 200 or a 400 naming a field."""
    url, _ = serve()
    rng = random.Random(55)
    for _ in range(300):
        sample = {"task": rng.choice(FUZZ_TASKS), "completion": rng.choice(FUZZ_VALUES)}
        for column in ("targets", "times", "options", "answer", "valid_actions"):
            if rng.random() < 0.6:
                sample[column] = rng.choice(FUZZ_VALUES)
        body = {"samples": [sample]}
        if rng.random() < 0.5:
            body = {"query": [rng.choice(FUZZ_VALUES)], "prompts": [rng.choice(FUZZ_VALUES)], "labels": [sample]}
        if rng.random() < 0.3:
            body["params"] = {rng.choice(FUZZ_PARAMS): rng.choice(FUZZ_VALUES)}
        code, answer = post(url, body)
        assert code == 200 or (code == 400 and re.match(r"^[\w.\[\]]+: ", answer["error"])), (body, answer)


def test_stalled_clients_are_dropped_and_health_answers_throughout(serve):
    """100 POSTs that stop before their body hold 100 handler threads for the timeout at most; /health answers."""
    url, srv = serve(timeout=5.0)
    base = handler_threads()
    stalled = [socket.create_connection(("127.0.0.1", srv.server_address[1]), timeout=20) for _ in range(100)]
    try:
        for sock in stalled:
            sock.sendall(request("100"))
        assert wait_until(lambda: handler_threads() - base >= 50)
        held = handler_threads() - base
        assert get(url + "health")[0] == 200 and post(url, GOOD)[0] == 200
        assert held > 0 and handler_threads() - base > 0  # the stalled clients were held meanwhile
        for sock in stalled:  # each is answered after the timeout, then its thread ends
            answer = read_all(sock)
            assert answer.startswith(b"HTTP/1.0 400") and b"stopped short" in answer, answer[:200]
    finally:
        for sock in stalled:
            sock.close()
    assert wait_until(lambda: handler_threads() == base)


def test_handler_threads_are_bounded_and_freed_by_the_timeout(serve):
    url, srv = serve(timeout=0.5, max_connections=8)
    base = handler_threads()
    stalled = [socket.create_connection(("127.0.0.1", srv.server_address[1]), timeout=20) for _ in range(30)]
    seen = []
    try:
        for sock in stalled:
            sock.sendall(request("100"))
        for _ in range(40):  # sample the thread count while the 30 wait their turn (8 at a time)
            seen.append(handler_threads() - base)
            time.sleep(0.05)
        for sock in stalled:
            assert read_all(sock).startswith(b"HTTP/1.0 400")
    finally:
        for sock in stalled:
            sock.close()
    assert max(seen) <= 8 and max(seen) > 0, seen
    assert post(url, GOOD)[0] == 200
    assert wait_until(lambda: handler_threads() == base)


def test_200_concurrent_requests_all_get_the_in_process_reward(serve):
    url, srv = serve()
    assert srv.request_queue_size >= 256  # the listen backlog (socketserver's default of 5 drops a burst)
    rng = random.Random(55)
    tasks = sorted(SAMPLES)
    bodies = []
    for _ in range(200):
        task = rng.choice(tasks)
        sample = {"task": task, **SAMPLES[task]}
        if "targets" in sample:
            sample["targets"] = [{**g, "time": g["time"] + rng.uniform(-5, 5)} for g in sample["targets"]]
        bodies.append(sample)
    expected = [score_sample(s["task"], s["completion"], s) for s in bodies]
    health, stop = [], threading.Event()

    def probe():
        while not stop.is_set() and len(health) < 500:
            health.append(get(url + "health")[0])
            time.sleep(0.01)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    try:
        with ThreadPoolExecutor(max_workers=50) as pool:
            answers = list(pool.map(lambda s: post(url, {"samples": [s]}), bodies, timeout=120))
    finally:
        stop.set()
        prober.join(timeout=30)
    assert [code for code, _ in answers] == [200] * 200
    assert [answer["rewards"][0] for _, answer in answers] == expected
    assert health and set(health) == {200}


# --- a target time the stream cannot have ----------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-5.0, -1e-9, math.nan, math.inf, -math.inf])
def test_an_unusable_target_time_earns_no_reward_through_the_server(bad, serve):
    url, _ = serve()
    for task in ("accident", "atomic", "compositional", "intervention"):
        sample = {"task": task, **SAMPLES[task], "times": [0.0]}
        sample["targets"] = [{**sample["targets"][0], "time": bad}]
        sample["targets"][0].pop("window", None)
        code, answer = post(url, {"samples": [sample]})
        assert code == 200 and answer["rewards"] == [0.0], (task, bad, answer)
