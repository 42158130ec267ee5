"""Run a model on OVO-Bench and StreamingBench Proactive Output under two protocols (docs/ovo_bench.md,
docs/streamingbench.md), writing the official results-file shapes.

- ``official``: each probe (or poll) is a fresh offline call on the clip up to its time, every frame encoded again,
  with the authors' prompt; on StreamingBench the question itself is asked after the first "yes", as their
  script does.
- ``streaming``: one KV-cache pass over each video (`proactive_rl.streaming.StreamingSession`): frames are appended
  as they come, and at every probe the session is forked (`StreamingSession.fork(1)`: a copy of the cache), the
  probe's prompt appended to the copy and decoded, and the copy dropped, so no probe sees another's question.

Both render one user turn through the processor's chat template: the frames, then the prompt, then the generation
prompt. The streaming prefix is the official prompt's prefix token for token, so with the same frames both
protocols give the same greedy answers (a test checks it). Frames are sampled at ``fps`` on ``[clip start, probe
time)``: OVO-Bench clips start at 0, StreamingBench's at the question's ``time_stamp``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from proactive_eval.formats.ovo_bench import FORWARD_TASKS, OVOBench, category_of, ovo_prompt
from proactive_eval.formats.streamingbench import PROACTIVE_TEMPLATE, StreamingBenchPO, poll_query, said_yes
from proactive_eval.video import read_video_frames

PROTOCOLS = ("official", "streaming")
_SENTINEL = "\x00PROMPT\x00"
ENCODE_FRAMES = 32  # frames per vision call when a recorded video is encoded ahead


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


class ClipPrompter:
    """The model answering "these frames, then this prompt" offline, or through a streaming session.

    Args:
        model (`PreTrainedModel`): a model `proactive_rl.streaming.StreamingSession` drives.
        processor (`ProcessorMixin`): its processor (its chat template renders the turn).
        max_new_tokens (`int`, *optional*, defaults to `16`): longest answer (greedy).
        params (`SamplingParams`, *optional*): how answers are decoded instead (e.g. suppressed tokens).
    """

    def __init__(self, model, processor, max_new_tokens: int = 16, params=None):
        # deferred: keeps torch out of light import paths
        from proactive_rl.streaming import SamplingParams

        self.model, self.processor = model, processor
        self.params = params or SamplingParams(max_new_tokens=max_new_tokens)
        heads = []
        for n in (0, 1):
            content = [{"type": "image"}] * n + [{"type": "text", "text": _SENTINEL}]
            text = processor.apply_chat_template(
                [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
            )
            heads.append(text.split(_SENTINEL))
        (self.head, self.tail), (head1, _) = heads
        self.frame_text = head1[len(self.head) :]  # one frame's placeholder block
        self.speed = Speed()
        self._encode_share = 0.0
        self.turns: list = []  # every decoded `TurnOutput`, in order (tokens and log-probabilities, for checks)

    def _session(self):
        # deferred: keeps torch out of light import paths
        from proactive_rl.streaming import StreamingSession

        return StreamingSession(self.model, self.processor)

    def _decode(self, session, prompt: str) -> str:
        start = time.perf_counter()
        session.append(prompt + self.tail)
        turn = session.generate(self.params)
        self.speed.call_s.append(time.perf_counter() - start)
        self.turns.append(turn)
        return turn.texts[0].strip()

    def official(self, frames: list, prompt: str) -> str:
        """One offline call: a fresh context, every frame encoded, then the prompt."""
        session = self._session()
        start = time.perf_counter()
        session.append(self.head + self.frame_text * len(frames), frames)
        self.speed.frames_encoded += len(frames)
        elapsed = time.perf_counter() - start
        text = self._decode(session, prompt)
        self.speed.call_s[-1] += elapsed
        return text

    def open(self):
        """A streaming session holding the turn's head; feed frames with `feed`, ask with `ask`."""
        session = self._session()
        session.append(self.head)
        return session

    def prepare(self, session, blocks: list[list]) -> list:
        """Each block of frames (those between two probes) as one chunk, all made in one processor call (a
        recorded video: the frames are known in advance), encoded by vision calls of up to `ENCODE_FRAMES` frames
        (a call has a fixed cost; one call over every frame would attend over all of their patches at once)."""
        blocks = [b for b in blocks if b]
        if not blocks:
            return []
        start = time.perf_counter()
        chunks = session.chunks([self.frame_text * len(b) for b in blocks], blocks)
        group: list = []
        for chunk in chunks + [None]:
            if chunk is None or (group and sum(c.n_images for c in group) + chunk.n_images > ENCODE_FRAMES):
                session.encode(group)
                group = []
            if chunk is not None:
                group.append(chunk)
        n = sum(len(b) for b in blocks)
        self.speed.frames_encoded += n
        self._encode_share = (time.perf_counter() - start) / n
        return chunks

    def feed(self, session, chunk) -> None:
        """Append one prepared block (one language-model forward); each of its frames is given an equal share."""
        start = time.perf_counter()
        session.append_chunk(chunk)
        n = chunk.n_images
        self.speed.frame_s += [(time.perf_counter() - start) / n + self._encode_share] * n

    def ask(self, session, prompt: str) -> str:
        """The answer to `prompt` after the frames fed so far; the session itself is left as it was."""
        return self._decode(session.fork(1), prompt)


def video_frames(path: Path, start: float, end: float, fps: float) -> list[tuple[float, object]]:
    """``(time, frame)`` at ``start + k / fps`` for times before `end` (the frames a clip ``[start, end)`` holds)."""
    times, k = [], 0
    while start + k / fps < end - 1e-9:
        times.append(start + k / fps)
        k += 1
    return list(read_video_frames(path, times)) if times else []


def _play(prompter: ClipPrompter, path: Path, start: float, asks: list, protocol: str, fps: float, answer) -> None:
    """Ask every ``(time, key)`` of `asks` (sorted by time) on the clip ``[start, time)``; `answer(key, ask_fn)`
    puts its questions through ``ask_fn(prompt)`` and may stop the run by returning True."""
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


# ---- OVO-Bench ---------------------------------------------------------------------------------------


def ovo_video_groups(bench: OVOBench) -> list[dict]:
    """The records grouped by source video (a streaming pass each): ``{"video", "records"}``, in file order."""
    groups: dict[str, list] = {}
    for record in bench.records:
        groups.setdefault(record["video"], []).append(record)
    return [{"video": str(bench.video_path(rs[0])), "records": rs} for rs in groups.values()]


def run_ovo_group(prompter: ClipPrompter, group: dict, protocol: str, fps: float = 1.0) -> list[dict]:
    """The results of one video's records, in the official shape (a forward record gains probe responses; a
    multiple-choice record becomes ``{"id", "video", "task", "question", "response", "ground_truth"}``)."""
    out = []
    asks = []
    for record in group["records"]:
        if record["task"] in FORWARD_TASKS:
            out.append({**record, "test_info": [dict(p) for p in record["test_info"]]})
            asks += [(float(p["realtime"]), (len(out) - 1, j)) for j, p in enumerate(record["test_info"])]
        else:
            out.append(
                {"id": record["id"], "video": record["video"], "task": record["task"], "question": record["question"],
                 "response": None, "ground_truth": chr(65 + record["gt"])}
            )  # fmt: skip
            asks.append((float(record["realtime"]), (len(out) - 1, None)))
    asks.sort(key=lambda a: a[0])

    def answer(key, ask) -> bool:
        i, j = key
        record = group["records"][i]
        start = time.perf_counter()
        response = ask(ovo_prompt(record, j))
        target = out[i] if j is None else out[i]["test_info"][j]
        target["response"], target["cost"] = response, time.perf_counter() - start
        return False

    _play(prompter, Path(group["video"]), 0.0, asks, protocol, fps, answer)
    return out


def ovo_results(records: list[dict]) -> dict:
    """Per-record results → the official ``{"backward", "realtime", "forward"}`` object."""
    results = {"backward": [], "realtime": [], "forward": []}
    for record in records:
        results[category_of(record["task"])].append(record)
    return results


# ---- StreamingBench Proactive Output -----------------------------------------------------------------


def run_po_question(prompter: ClipPrompter, bench: StreamingBenchPO, index: int, protocol: str, fps: float = 1.0):
    """``{"answered", "dialog_history"}`` of question `index`, polled as the official script polls."""
    q = bench.questions[index]
    question = q.question
    history: list[dict] = []
    answered: list = [False]

    def answer(poll, ask) -> bool:
        start = time.perf_counter()
        query = poll_query(question)
        response = ask(PROACTIVE_TEMPLATE.format(query))
        cost = time.perf_counter() - start
        history.append({"role": "user", "content": query, "time": poll, "cost": cost})
        history.append({"role": "assistant", "content": response, "time": poll, "cost": cost})
        if not said_yes(response):
            return False
        start = time.perf_counter()
        response = ask(PROACTIVE_TEMPLATE.format(question["question"]))
        cost = time.perf_counter() - start
        history.append({"role": "user", "content": question["question"], "time": poll, "cost": cost})
        history.append({"role": "assistant", "content": response, "time": poll, "cost": cost})
        answered[0] = poll
        return True

    if q.polls:
        _play(prompter, q.video, float(q.start), [(float(p), p) for p in q.polls], protocol, fps, answer)
    return {"answered": answered[0], "dialog_history": history}
