"""verl's compute_score, the remote reward server and the TRL reward functions score a trajectory identically."""

from __future__ import annotations

import json
import math
import random
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import venv
from pathlib import Path

import pytest

from proactive_rewards import get_reward, task_rewards
from proactive_rewards.adapters import SampleError, split_transcript
from proactive_rewards.registry import _REGISTRY
from proactive_rewards.serve import make_server, score_request
from proactive_rewards.verl import compute_score

REPO = Path(__file__).resolve().parents[2]
TASKS = [*sorted(task_rewards()), "proactive_suggestion"]
PARAMS = {"alpha": 0.07, "lam": 0.3, "r_p": 0.75}
WORDS = ["Warning", "warning.", "1", "2", "03", "start", "end", "turn off the stove", "stove", "Warning。", "x"]
OPTIONS = ["Move the occluding object.", "I do not know.", "cat", "dog", "bird"]


def random_step(rng: random.Random) -> str:
    word = rng.choice(WORDS)
    return rng.choice(
        [
            "</Silence>",
            "</Silence>",
            f"</Response> {word}",
            f"</Response>{word}",
            word,  # no state token: malformed
            "",
            f"</Silence> {word}",
            f"</Response> {word}</Silence>",
            f"<t=3.0s></Response> {word}",  # an echoed timestamp: malformed
            f"  </Response>  {word}  ",
        ]
    )


def random_sample(task: str, rng: random.Random) -> dict:
    if task == "proactive_suggestion":
        answer = rng.choice([rng.choice(OPTIONS[2:]), rng.randrange(2, len(OPTIONS))])
        completion = rng.choice(["A", "B.", "C", "d. dog", "E", "cat", "I do not know.", "", "Z", "B. cat"])
        valid = rng.choice([[OPTIONS[0]], [], OPTIONS[:2]])
        return {"task": task, "completion": completion, "options": OPTIONS, "answer": answer, "valid_actions": valid}
    n = rng.randint(1, 12)
    t0 = rng.uniform(0, 30)
    times = [round(t0 + k * rng.choice([0.5, 1.0]), 3) for k in range(n)]
    targets = []
    for _ in range(rng.randint(0, 3)):
        time = round(rng.uniform(t0 - 2, t0 + n + 2), 3)
        window = [time, round(time + rng.uniform(0, 4), 3)] if rng.random() < 0.3 else None
        targets.append({"time": time, "text": rng.choice(WORDS), "window": window})
    steps = [random_step(rng) for _ in range(n)]
    return {"task": task, "completion": steps, "targets": targets, "times": times}


def trl_reward(sample: dict) -> float:
    """What TRL's GRPOTrainer gets: the registry's reward function over dataset columns (one row)."""
    name = task_rewards().get(sample["task"], sample["task"])
    reward = get_reward(name, **{k: v for k, v in PARAMS.items() if k in _REGISTRY[name].params})
    columns = {k: [v] for k, v in sample.items() if k != "completion"}
    return reward([sample["completion"]], **columns)[0]


PROMPT = "<|im_start|>system\nWatch the stream.<|im_end|>\n<|im_start|>user\n<t=0.0s>Tell me.<|im_end|>\n"


def transcript(steps: list[str], times: list[float], marked: bool) -> str:
    """The decoded response of a multi-turn rollout: the policy's turns with a frame turn (timestamp) between,
    with the ChatML markers (``skip_special_tokens=False``) or without (verl's decode)."""
    text = steps[0] + "<|im_end|>\n"
    for step, time in zip(steps[1:], times[1:]):
        text += f"<|im_start|>user\n<t={time!r}s><|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
        text += f"<|im_start|>assistant\n{step}<|im_end|>\n"
    return text if marked else re.sub(r"<\|[a-z_]+\|>", "", text)


@pytest.mark.parametrize("task", TASKS)
def test_verl_server_and_trl_agree_on_200_random_trajectories(task):
    rng = random.Random(f"adapters-{task}")
    samples = [random_sample(task, rng) for _ in range(200)]
    trl = [trl_reward(s) for s in samples]
    expected = list(trl)
    assert all(isinstance(r, float) and math.isfinite(r) for r in expected)
    assert len(set(expected)) >= 3, "the random trajectories must exercise several reward values"

    verl, queries, labels = [], [], []
    for k, s in enumerate(samples):
        if task == "proactive_suggestion":
            text = s["completion"]
            extra = {"options": s["options"], "valid_actions": s["valid_actions"]}
            ground_truth = s["answer"]
            label = {"task": task, "answer": s["answer"], **extra}
        else:
            text = transcript(s["completion"], s["times"], marked=k % 2 == 0)
            if split_transcript(text) is None:  # one turn, markers dropped: a plain string, read as TRL reads one
                expected[k] = trl_reward({**s, "completion": text})
            extra = {"times": s["times"]}
            ground_truth = json.dumps(s["targets"]) if k % 3 else s["targets"]
            label = {"task": task, "targets": s["targets"], "times": s["times"]}
        verl.append(compute_score(task, text, ground_truth, extra, **PARAMS))
        queries.append(PROMPT + "<|im_start|>assistant\n" + text)
        labels.append(json.dumps(label) if k % 2 else label)
    assert verl == expected

    openrlhf = score_request(
        {"query": queries, "prompts": [PROMPT + "<|im_start|>assistant\n"] * len(queries), "labels": labels}, PARAMS
    )
    assert openrlhf["rewards"] == expected
    explicit = score_request({"samples": samples, "params": PARAMS})
    assert explicit["rewards"] == trl


def test_transcript_times_come_from_the_user_turns_when_extra_info_has_none():
    steps, times = ["</Silence>", "</Response> Warning", "</Silence>"], [4.0, 5.5, 6.25]
    for marked in (True, False):
        got = split_transcript(transcript(steps, times, marked))
        assert got[0] == steps and math.isnan(got[1][0]) and got[1][1:] == times[1:]
    targets = [{"time": 5.0, "text": "Warning"}]
    with_times = compute_score("accident", transcript(steps, times, True), targets, {"times": times})
    from_text = compute_score("accident", transcript(steps, times, True), targets)
    assert with_times == from_text == pytest.approx(math.exp(-0.05 * 0.5))


def test_verl_names_the_bad_field():
    with pytest.raises(SampleError, match=r"^task: unknown 'acident'; expected one of accident,"):
        compute_score("acident", "</Silence>", "[]")
    with pytest.raises(SampleError, match=r"^ground_truth: not valid JSON"):
        compute_score("accident", "</Silence>", "[{oops")
    with pytest.raises(SampleError, match=r"^valid_actions: required"):
        compute_score("proactive_suggestion", "A", "cat", {"options": OPTIONS})
    with pytest.raises(SampleError, match=r"^targets: .*target 0"):
        compute_score("accident", "</Silence>", [{"text": "Warning"}])
    with pytest.raises(SampleError, match=r"^params\.gamma: unknown parameter; the rewards take alpha, "):
        compute_score("accident", "</Silence>", [], gamma=1)


# --- the HTTP server ------------------------------------------------------------------------------------------


@pytest.fixture()
def server():
    srv = make_server(port=0, max_bytes=4096)
    srv.RequestHandlerClass.log_message = lambda *a: None
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()


def post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


GOOD = {
    "samples": [{"task": "atomic", "completion": "<t=11.0s></Response> 1", "targets": [{"time": 10, "text": "1"}]}]
}


def test_server_answers_bad_requests_with_a_4xx_naming_the_field_and_keeps_serving(server):
    bad = [
        (b"{not json", 400, r"^body: not valid JSON"),
        (b"[1, 2]", 400, r"^body: expected a JSON object"),
        (
            json.dumps({"samples": [{"task": "acident", "completion": ""}]}).encode(),
            400,
            r"^samples\[0\]\.task: unknown",
        ),
        (json.dumps({"query": ["x"], "labels": ['{"task": "nope"}']}).encode(), 400, r"^labels\[0\]\.task: unknown"),
        (json.dumps({"query": ["x"], "labels": ["{"]}).encode(), 400, r"^labels\[0\]: not a JSON object"),
        (json.dumps({"query": ["x", "y"], "labels": [{}]}).encode(), 400, r"^labels: 1 entries for 2 queries"),
        (json.dumps({"query": ["x"]}).encode(), 400, r"^labels: missing"),
        (json.dumps({"samples": [{"task": "accident"}]}).encode(), 400, r"^samples\[0\]\.completion: missing"),
        (json.dumps({"samples": [{"task": "accident", "completion": ""}]}).encode(), 400, r"^samples\[0\]\.targets"),
        (b"x" * 10_000, 413, r"^body: 10000 bytes exceeds the limit of 4096"),
    ]
    for body, status, message in bad:
        code, answer = post(server, body)
        assert code == status, (body[:60], answer)
        assert re.match(message, answer["error"]), answer
        assert post(server, json.dumps(GOOD).encode()) == (
            200,
            {"rewards": [math.exp(-0.05)], "scores": [math.exp(-0.05)]},
        )


def test_server_answers_get_health(server):
    with urllib.request.urlopen(server + "health", timeout=30) as response:
        health = json.loads(response.read())
        assert response.status == 200 and health["status"] == "ok" and health["params"] == {}
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(server, timeout=30)
    assert err.value.code == 405 and "GET /health" in json.loads(err.value.read())["error"]


@pytest.mark.parametrize(
    "params, message",
    [
        ('{"r_p": -1}', r"r_p must be a number in \[0, 1\].*got -1.0"),
        ('{"r_p": 2}', r"r_p must be a number in \[0, 1\]"),
        ('{"alpha": -0.1}', r"alpha must be a finite number >= 0"),
        ('{"alfa": 0.1}', r"--params: alfa: unknown parameter; the rewards take alpha"),
        ('{"content_scorer": "shutil:copyfile"}', r"--params: content_scorer: 'shutil:copyfile' is not a registered"),
        ("[1]", r"expected a JSON object"),
    ],
)
def test_serve_rejects_bad_params_in_one_line_before_binding(params, message, capsys):
    from proactive_rewards.serve import main

    assert main(["--port", "0", "--params", params]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("python -m proactive_rewards.serve: error: --params:")
    assert re.search(message, err), err


def test_serve_starts_in_a_venv_holding_only_proactive_rewards(tmp_path):
    """``python -m proactive_rewards.serve`` needs nothing but the standard library (a venv without pip packages)."""
    src = tmp_path / "src"  # pip builds in place: build a copy, the checkout stays clean
    shutil.copytree(REPO / "rewards", src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path / "whl"]
    subprocess.run([*pip, src], check=True, capture_output=True)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    wheel = next((tmp_path / "whl").glob("proactive_rewards-*.whl"))
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], check=True)
    listed = subprocess.run([python, "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True)
    assert {p["name"] for p in json.loads(listed.stdout)} <= {"pip", "setuptools", "proactive-rewards", "wheel"}
    proc = subprocess.Popen(
        [python, "-m", "proactive_rewards.serve", "--port", "0", "--quiet"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    try:
        line = proc.stderr.readline()
        url = re.search(r"http://\S+", line)
        assert url, line
        code, answer = post(url.group(0), json.dumps(GOOD).encode())
        assert code == 200 and answer["rewards"] == [math.exp(-0.05)]
        where = subprocess.run(
            [python, "-c", "import proactive_rewards; print(proactive_rewards.__file__)"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin"},
        )
        assert str(env_dir) in where.stdout, where.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=30)
