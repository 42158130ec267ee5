"""The protocols that put OVO-Bench and StreamingBench Proactive Output to a model, writing the official results
shapes (docs/ovo_bench.md, docs/streamingbench.md). No torch: the model is a *prompter*.

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

import json
import logging
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from proactive_eval.formats.ovo_bench import FORWARD_TASKS, OVOBench, category_of, load_ovo_bench, ovo_prompt
from proactive_eval.formats.streamingbench import (
    PROACTIVE_TEMPLATE,
    StreamingBenchPO,
    load_streamingbench_po,
    poll_query,
    said_yes,
)
from proactive_eval.stream_bench_score import ovo_bench_summary, streamingbench_summary
from proactive_eval.video import read_video_frames

PROTOCOLS = ("official", "streaming")
RESULTS_FILES = {"ovo-bench": "ovo_bench_results.json", "streamingbench-po": "streamingbench_po_results.json"}
MODEL_KEY = "proactive_rl"  # the model's key in a StreamingBench results file

logger = logging.getLogger(__name__)


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
        from proactive_eval.openai_policy import encode_image

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


def _play(prompter, path: Path, start: float, asks: list, protocol: str, fps: float, answer) -> None:
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


# ---- OVO-Bench ---------------------------------------------------------------------------------------


def ovo_video_groups(bench: OVOBench) -> list[dict]:
    """The records grouped by source video (a streaming pass each): ``{"video", "records"}``, in file order."""
    groups: dict[str, list] = {}
    for record in bench.records:
        groups.setdefault(record["video"], []).append(record)
    return [{"video": str(bench.video_path(rs[0])), "records": rs} for rs in groups.values()]


def run_ovo_group(prompter, group: dict, protocol: str, fps: float = 1.0) -> list[dict]:
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
        try:
            response = ask(ovo_prompt(record, j))
        except Exception as err:  # noqa: BLE001 - the authors' loop records a failed call as a null response
            logger.warning("OVO-Bench record %s probe %s: no answer (%s)", record["id"], j, err)
            response = None
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


def run_po_question(prompter, bench: StreamingBenchPO, index: int, protocol: str, fps: float = 1.0):
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


# ---- a whole run -------------------------------------------------------------------------------------


def run_benchmark(benchmark: str, annotations, prompter, protocol: str, out, video_root=None) -> dict:
    """Run `prompter` on every item of a benchmark's annotation file; write the official results file and
    ``results.json`` (the official numbers, blind floor, coverage, speed) to `out`; return the summary."""
    start = time.perf_counter()
    if benchmark == "ovo-bench":
        bench = load_ovo_bench(annotations, video_root=video_root)
        records = [r for g in ovo_video_groups(bench) for r in run_ovo_group(prompter, g, protocol)]
        results = ovo_results(records)
        prompter.speed.wall_s = time.perf_counter() - start
        summary = ovo_bench_summary(bench.records, results)
        missing = bench.missing
    else:
        bench = load_streamingbench_po(annotations, video_root=video_root)
        results = json.loads(json.dumps(bench.entries))
        for i, q in enumerate(bench.questions):
            results[q.entry]["questions"][q.index][MODEL_KEY] = run_po_question(prompter, bench, i, protocol)
        prompter.speed.wall_s = time.perf_counter() - start
        summary = streamingbench_summary(bench.entries, results, MODEL_KEY)
        missing = bench.missing
    summary.update(protocol=protocol, speed={**summary["speed"], **prompter.speed.summary()}, missing_videos=missing)
    out = Path(out)
    summary["meta"] = {"annotations": str(annotations), "results_json": str(out / "results.json")}
    out.mkdir(parents=True, exist_ok=True)
    (out / RESULTS_FILES[benchmark]).write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    (out / "results.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    return summary


def run_po_proactive(policy, bench: StreamingBenchPO, index: int, fps: float = 1.0) -> dict:
    """``{"answered", "dialog_history"}`` of question `index` from a state-token streaming `policy`
    (`proactive_eval.streaming.StreamingPolicy`) that decides by itself when to speak: it watches the video from
    ``time_stamp`` with the question as its instruction, and its first response is the answer, at the time of
    that frame (no polling, no "yes" turn). Silent to the end of the official window (ground truth + 4 s): the
    last entry is an empty answer there, as the official loop's last poll."""
    # deferred: the streaming loop pulls the policy stack only where a policy is run
    from proactive_eval.episodes import Episode
    from proactive_eval.streaming import run_episode

    q = bench.questions[index]
    end = q.polls[-1] if q.polls else q.start
    frames = video_frames(q.video, float(q.start), float(end), fps)
    episode = Episode.from_dict(
        {"id": f"po_{index}", "task": "pvqa", "duration": max(end - q.start, 1e-6), "instruction":
         q.question["question"], "targets": [], "fps": fps}
    )  # fmt: skip
    outputs = [
        r for r in run_episode(policy, episode, lambda _: [(t - q.start, f) for t, f in frames]) if not r.malformed
    ]
    if not outputs:
        return {"answered": False, "dialog_history": [{"role": "assistant", "content": "", "time": end}]}
    first = outputs[0]
    said = q.start + first.time
    return {"answered": said, "dialog_history": [{"role": "assistant", "content": first.text, "time": said}]}
