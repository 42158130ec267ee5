"""The protocols that put OVO-Bench and StreamingBench Proactive Output to a model (docs/ovo_bench.md,
docs/streamingbench.md): what both share; each benchmark's runner is its ``run`` module
(`proactive_eval.benchmarks.ovo_bench.run`, `proactive_eval.benchmarks.streamingbench_po.run`). No torch: the model
is a *prompter*.

- ``official``: each probe (or poll) is a fresh offline call on the clip up to its time, every frame encoded again,
  with the authors' prompt; on StreamingBench the question itself is asked after the first "yes", as their
  script does. Any prompter has ``official(frames, prompt) -> text`` (`EndpointPrompter`: an OpenAI-compatible
  server; `proactive_rl.evaluation.stream_bench.ClipPrompter`: a local model).
- ``streaming``: one KV-cache pass over each video: frames are appended as they come, and at every probe the
  session is forked, the probe's prompt appended to the copy and decoded, and the copy dropped, so no probe sees
  another's question. A prompter that can (``ClipPrompter``) has ``open()``, ``prepare(session, blocks)``,
  ``feed(session, chunk)`` and ``ask(session, prompt)``.

Frames are sampled at ``fps`` on ``[clip start, probe time)``: OVO-Bench clips start at 0, StreamingBench's at
the question's ``time_stamp``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from proactive_eval.video import read_video_frames

PROTOCOLS = ("official", "streaming")


@dataclass
class Speed:
    """Wall time and frame counts of one run (`summary` gives the report's speed columns)."""

    wall_s: float = 0.0
    video_frames: int = 0  # frames of the videos the run covered, each counted once
    frames_encoded: int = 0  # frames given to the model, over all calls
    call_s: list[float] = field(default_factory=list)
    frame_s: list[float] = field(default_factory=list)  # streaming: the time to append each frame

    def summary(self) -> dict:
        def p95(values):
            values = sorted(values)
            return values[min(len(values) - 1, -(-95 * len(values) // 100) - 1)] if values else None

        per_frame = self.frame_s or ([self.wall_s / self.video_frames] if self.video_frames else [])
        return {
            "wall_s": self.wall_s,
            "video_frames": self.video_frames,
            "frames_encoded": self.frames_encoded,
            "frames_per_s": self.video_frames / self.wall_s if self.wall_s else None,
            "frame_latency_median_s": statistics.median(per_frame) if per_frame else None,
            "frame_latency_p95_s": p95(per_frame),
            "calls": len(self.call_s),
            "latency_median_s": statistics.median(self.call_s) if self.call_s else None,
            "latency_p95_s": p95(self.call_s),
        }


class EndpointPrompter:
    """The ``official`` protocol through an OpenAI-compatible server: one request per probe, the clip's frames as
    images then the prompt in one user turn (no system turn), greedy. It cannot fork a cache: no ``streaming``.

    Args:
        base_url (`str`), model (`str`), api_key (`str`, *optional*): the server.
        max_tokens (`int`, *optional*, defaults to `16`): longest answer.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, max_tokens: int = 16):
        # deferred: optional extra (httpx)
        from proactive_eval.judges.transport import ChatTransport

        self.model, self.max_tokens = model, max_tokens
        self.transport = ChatTransport(base_url, api_key, 120.0, 6, 1.0, 60.0)
        self._client = None
        self.speed = Speed()

    def official(self, frames: list, prompt: str) -> str:
        # deferred: optional extra (Pillow)
        from proactive_eval.common.openai_policy import encode_image

        content = [{"type": "image_url", "image_url": {"url": encode_image(f)}} for f in frames]
        content.append({"type": "text", "text": prompt})
        payload = {"model": self.model, "messages": [{"role": "user", "content": content}],
                   "temperature": 0.0, "max_tokens": self.max_tokens}  # fmt: skip
        if self._client is None:
            self._client = self.transport.client()
        start = time.perf_counter()
        reply = self.transport.post(self._client, payload)
        self.speed.call_s.append(time.perf_counter() - start)
        self.speed.frames_encoded += len(frames)
        return reply


def video_frames(path: Path, start: float, end: float, fps: float) -> list[tuple[float, object]]:
    """``(time, frame)`` at ``start + k / fps`` for times before `end` (the frames a clip ``[start, end)`` holds)."""
    times, k = [], 0
    while start + k / fps < end - 1e-9:
        times.append(start + k / fps)
        k += 1
    return list(read_video_frames(path, times)) if times else []


def play(prompter, path: Path, start: float, asks: list, protocol: str, fps: float, answer) -> None:
    """Ask every ``(time, key)`` of `asks` (sorted by time) on the clip ``[start, time)``; `answer(key, ask_fn)`
    puts its questions through ``ask_fn(prompt)`` and may stop the run by returning True."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if protocol == "streaming" and not hasattr(prompter, "open"):
        raise ValueError(f"{type(prompter).__name__} cannot fork a session: use the official protocol")
    end = max(t for t, _ in asks)
    frames = video_frames(path, start, end, fps)
    prompter.speed.video_frames += len(frames)
    clips = [[f for s, f in frames if s < t - 1e-9] for t, _ in asks]
    chunks = {}
    if protocol == "streaming":
        session = prompter.open()
        cuts = [0] + [len(c) for c in clips]
        blocks = [clips[-1][cuts[i] : cuts[i + 1]] if clips else [] for i in range(len(clips))]
        chunks = dict(zip([i for i, b in enumerate(blocks) if b], prompter.prepare(session, blocks)))
    for i, ((_, key), clip) in enumerate(zip(asks, clips)):
        if protocol == "streaming":
            if i in chunks:
                prompter.feed(session, chunks[i])
            stop = answer(key, lambda prompt: prompter.ask(session, prompt))
        else:
            stop = answer(key, lambda prompt, clip=clip: prompter.official(clip, prompt))
        if stop:
            return
