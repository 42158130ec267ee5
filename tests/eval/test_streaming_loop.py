"""The streaming loop (P³I Algorithm 1): causality, user-text joining, silence stripping, and kill/resume."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from proactive_eval.episodes import Episode, UserTurn
from proactive_eval.streaming import ScriptedPolicy, SilentPolicy, run_episode, run_streaming
from proactive_rewards import Response, Target

HERE = Path(__file__).parent


def frames_at(times):
    return lambda episode: ((t, np.full((4, 4, 3), int(t) % 256, np.uint8)) for t in times)


def make_episodes(n=6):
    """In-memory episodes with 1 FPS frames and a deterministic script (independent of the loop)."""
    episodes = [
        Episode(
            id=f"ep{i}", task="atomic", duration=5.0 + i, instruction=f"count things {i}", targets=[Target(2.0, "1")]
        )
        for i in range(n)
    ]
    script = {f"ep{i}": [(1.0, str(i)), (3.0 + i % 2, "again")] for i in range(n)}
    return episodes, script


def unit_frames(episode):
    return ((float(k), np.zeros((2, 2, 3), np.uint8)) for k in range(int(episode.duration)))


class InterruptAfter(ScriptedPolicy):
    """Raises KeyboardInterrupt in the middle of episode number `k` (0-based), like a Ctrl-C."""

    def __init__(self, script, k):
        super().__init__(script)
        self.k, self.resets = k, 0

    def reset(self, episode):
        super().reset(episode)
        self.resets += 1

    def step(self, observation):
        if self.resets == self.k + 1 and observation.step == 2:
            raise KeyboardInterrupt
        return super().step(observation)


class HangAt(ScriptedPolicy):
    """Blocks forever at the start of episode number `k` (to be killed from outside)."""

    def __init__(self, script, k):
        super().__init__(script)
        self.k, self.resets = k, 0

    def reset(self, episode):
        super().reset(episode)
        if self.resets == self.k:
            time.sleep(600)
        self.resets += 1


def run_for_subprocess(path, hang_at):
    episodes, script = make_episodes()
    run_streaming(HangAt(script, hang_at), episodes, path, frame_source=unit_frames, progress=False)


def test_one_step_per_frame_and_user_text_joins_the_next_frame():
    episode = Episode(
        id="e",
        task="pvqa",
        duration=4.0,
        instruction="watch",
        user_turns=[UserTurn(0.0, "hi"), UserTurn(1.5, "first"), UserTurn(2.0, "second"), UserTurn(3.5, "late")],
    )
    policy = ScriptedPolicy({})
    run_episode(policy, episode, frame_source=frames_at([0.0, 1.0, 2.0, 3.0]))
    # 1.5 and 2.0 both join the frame at 2.0; 3.5 comes after the last frame and is never shown.
    assert policy.log == [("e", 0, 0.0, "hi"), ("e", 1, 1.0, ""), ("e", 2, 2.0, "first\nsecond"), ("e", 3, 3.0, "")]


def test_turns_are_classified_by_the_one_rule():
    """docs/spec.md §13: silence dropped, responses stripped, malformed turns kept as flagged outputs."""
    outputs = {0.0: "</Silence>", 1.0: "</Response> 3", 2.0: "NO REPLY", 3.0: "</Response>", 4.0: "a free answer"}
    policy = ScriptedPolicy({"e": list(outputs.items())}, raw=True)
    episode = Episode(id="e", task="atomic", duration=5.0, instruction="x")
    got = run_episode(policy, episode, frames_at(sorted(outputs)), silence_signals=("NO REPLY",))
    assert got == [Response(1.0, "3"), Response(3.0, "", True), Response(4.0, "a free answer", True)]
    # Undeclared, NO REPLY is a bare turn of a state-token model: malformed.
    policy = ScriptedPolicy({"e": list(outputs.items())}, raw=True)
    assert Response(2.0, "NO REPLY", True) in run_episode(policy, episode, frames_at(sorted(outputs)))
    # A model without state tokens (plain): bare text is a response, NO REPLY declared silent.
    policy = ScriptedPolicy({"e": list(outputs.items())}, raw=True)
    got = run_episode(policy, episode, frames_at(sorted(outputs)), silence_signals=("NO REPLY",), plain=True)
    assert got == [Response(1.0, "3"), Response(3.0, "", True), Response(4.0, "a free answer")]


def test_max_frames_reaches_the_policy_and_observations_are_causal():
    seen = []

    class Spy(SilentPolicy):
        def step(self, observation):
            seen.append((observation.time, observation.meta.get("max_frames"), len(observation.frames)))
            return super().step(observation)

    episode = Episode(id="e", task="atomic", duration=3.0, instruction="x", meta={"question": "q"})
    run_episode(Spy(), episode, frames_at([0.0, 1.0, 2.0]), max_frames=2)
    assert seen == [(0.0, 2, 1), (1.0, 2, 1), (2.0, 2, 1)]


def test_run_streaming_writes_and_returns_predictions(tmp_path):
    episodes, script = make_episodes(3)
    path = tmp_path / "preds.jsonl"
    out = run_streaming(ScriptedPolicy(script), episodes, path, frame_source=unit_frames, progress=False)
    # ep1: script at 1.0 and 4.0; frames 0..5 -> said at 1.0 and 4.0.
    assert out["ep1"] == [Response(1.0, "1"), Response(4.0, "again")]
    lines = path.read_text().splitlines()
    assert lines[1] == '{"id": "ep1", "responses": [{"time": 1.0, "text": "1"}, {"time": 4.0, "text": "again"}]}'
    silent = SilentPolicy()
    again = run_streaming(silent, episodes, path, frame_source=unit_frames, progress=False)
    assert silent.steps == {} and again == out  # everything resumed from the file, nothing re-run


def test_interrupted_run_resumes_to_the_same_file(tmp_path):
    """Acceptance 4 (in process): Ctrl-C in episode 3, restart, same bytes as an uninterrupted run."""
    episodes, script = make_episodes()
    reference = tmp_path / "full.jsonl"
    run_streaming(ScriptedPolicy(script), episodes, reference, frame_source=unit_frames, progress=False)

    path = tmp_path / "resumed.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run_streaming(InterruptAfter(script, k=3), episodes, path, frame_source=unit_frames, progress=False)
    assert len(path.read_text().splitlines()) == 3
    # A torn line, as if killed mid-write: dropped and redone.
    with path.open("a") as f:
        f.write('{"id": "ep3", "responses": [{"ti')
    resumed = ScriptedPolicy(script)
    run_streaming(resumed, episodes, path, frame_source=unit_frames, progress=False)
    assert {eid for eid, *_ in resumed.log} == {"ep3", "ep4", "ep5"}
    assert path.read_bytes() == reference.read_bytes()


def test_killed_process_resumes_to_the_same_file(tmp_path):
    """Acceptance 4 (real kill): SIGKILL a run after 3 episodes are on disk, restart, compare bytes."""
    episodes, script = make_episodes()
    reference = tmp_path / "full.jsonl"
    run_streaming(ScriptedPolicy(script), episodes, reference, frame_source=unit_frames, progress=False)

    path = tmp_path / "killed.jsonl"
    code = f"import test_streaming_loop as t; t.run_for_subprocess({str(path)!r}, 3)"  # `-c` imports from its cwd
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(1200):  # up to ~60 s on a loaded machine; usually about one second
            if path.exists() and len(path.read_text().splitlines()) == 3 or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert len(path.read_text().splitlines()) == 3
    run_streaming(ScriptedPolicy(script), episodes, path, frame_source=unit_frames, progress=False)
    assert path.read_bytes() == reference.read_bytes()


def test_openai_policy_against_the_fake_server(tmp_path):
    """A served VLM end to end: history, timestamps, images (decoded back), max_frames, a retried 500."""
    import base64
    import io

    from PIL import Image

    from proactive_eval.common.openai_policy import OpenAIChatPolicy
    from tests.support.fake_openai import FakeOpenAI

    def answer(messages):
        images = [
            p for m in messages if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image_url"
        ]
        texts = " ".join(p["text"] for p in messages[-1]["content"] if p["type"] == "text")
        if "<t=2.0s>" in texts or "where?" in texts:
            return f"</Response> {len(images)} images"
        return "</Silence>"

    def fault(prompt, attempt):
        return "500" if "<t=3.0s>" in prompt and attempt == 0 else None

    episode = Episode(
        id="e", task="pvqa", duration=5.0, instruction="Tell me when.", user_turns=[UserTurn(3.5, "where?")]
    )
    with FakeOpenAI(answer, fault) as server:
        policy = OpenAIChatPolicy(server.base_url, "vlm", image_format="png", backoff=0.001, timeout=10)
        out = run_streaming(
            policy,
            [episode],
            tmp_path / "p.jsonl",
            frame_source=frames_at([0.0, 1.0, 2.0, 3.0, 4.0]),
            max_frames=2,
            progress=False,
        )
        policy.close()
    # t=2: 2 images kept (max_frames); t=4 ("where?" joined the frame at 4.0): still 2.
    assert out == {"e": [Response(2.0, "2 images"), Response(4.0, "2 images")]}
    assert server.kinds == {"ok": 5, "500": 1} and policy.transport.stats.retries == 1
    first, last = server.bodies[0]["messages"], server.bodies[-1]["messages"]
    assert first[0]["role"] == "system" and [p["type"] for p in first[1]["content"]] == ["text", "text", "image_url"]
    assert first[1]["content"][0]["text"] == "Tell me when." and first[1]["content"][1]["text"] == "<t=0.0s>"
    url = last[-1]["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    assert pixels.shape == (4, 4, 3) and (pixels == 4).all()  # the frame at t=4 (value int(t))
    # Full history: system + 5 user turns + 4 assistant turns; only the last 2 user turns keep their image.
    assert [m["role"] for m in last] == ["system"] + ["user", "assistant"] * 4 + ["user"]
    assert [sum(p["type"] == "image_url" for p in m["content"]) for m in last if m["role"] == "user"] == [
        0,
        0,
        0,
        1,
        1,
    ]
    assert [m["content"] for m in last if m["role"] == "assistant"][2] == "</Response> 2 images"
    assert last[-1]["content"][-1] == {"type": "text", "text": "where?"}


def test_lines_due_at_the_same_frame_are_said_together_at_that_frame():
    # 1 FPS frames; 1.2 and 1.7 are both due at the 2 s frame, the repeat of "a" at 1.9 too; 3.0 has its own.
    script = {"e": [(1.2, "a"), (1.7, "</Response> b"), (1.9, "a"), (3.0, "c"), (2.5, "</Silence>")]}
    episode = Episode(id="e", task="atomic", duration=5.0, instruction="x")
    got = run_episode(ScriptedPolicy(script), episode, frames_at([0.0, 1.0, 2.0, 3.0, 4.0]))
    assert got == [Response(2.0, "a b"), Response(3.0, "c")]
    # Lines due after the last frame are never said; a lone silent line stays silent.
    late = ScriptedPolicy({"e": [(0.5, "</Silence>"), (9.0, "too late")]})
    assert run_episode(late, episode, frames_at([0.0, 1.0, 2.0])) == []


class Lookahead(ScriptedPolicy):
    """Decides a seeded random number of the upcoming frames per call (like the HF engine's `step_ahead`), each
    by the scripted `step`, and records what it was offered."""

    lookahead = 4

    def __init__(self, script, seed=0):
        super().__init__(script)
        self.rng = np.random.default_rng(seed)
        self.offered: list[tuple[list[int], int]] = []  # per call: the steps offered, how many were decided

    def step_ahead(self, observations):
        n = int(self.rng.integers(1, len(observations) + 1))
        self.offered.append(([o.step for o in observations], n))
        return [self.step(o) for o in observations[:n]]


def test_lookahead_policies_see_upcoming_frames_and_give_the_same_responses():
    episodes, script = make_episodes(4)
    episodes[0].user_turns.append(UserTurn(2.5, "hello"))
    for episode in episodes:
        policy = Lookahead(script)
        got = run_episode(policy, episode, unit_frames)
        assert got == run_episode(ScriptedPolicy(script), episode, unit_frames)
        decided = 0
        for offered, n in policy.offered:  # each call gets the undecided frames in order, up to the lookahead
            assert offered == list(range(decided, decided + min(4, int(episode.duration) - decided)))
            decided += n
        assert decided == int(episode.duration) and len(policy.offered) >= 2
        assert [entry[1] for entry in policy.log] == list(range(int(episode.duration)))
        assert [entry[3] for entry in policy.log if entry[3]] == (["hello"] if episode.id == "ep0" else [])
