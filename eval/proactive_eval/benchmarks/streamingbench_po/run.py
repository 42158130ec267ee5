"""StreamingBench Proactive Output put to a model: one question per unit of work, polled every second from its
``time_stamp`` under the ``official`` or ``streaming`` protocol (`proactive_eval.benchmarks.stream_bench.run`; the
question itself is asked after the first "yes", as the authors' script does), or watched by a state-token policy
under ``proactive``; written in the official results shape, the outputs under `MODEL_KEY` (docs/streamingbench.md).
"""

from __future__ import annotations

import json
import time

from proactive_eval.benchmarks.stream_bench.run import play, video_frames
from proactive_eval.benchmarks.streamingbench_po.format import (
    PROACTIVE_TEMPLATE,
    StreamingBenchPO,
    poll_query,
    said_yes,
)

MODEL_KEY = "proactive_rl"  # the model's key in a StreamingBench results file


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
        play(prompter, q.video, float(q.start), [(float(p), p) for p in q.polls], protocol, fps, answer)
    return {"answered": answered[0], "dialog_history": history}


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


def po_items(bench: StreamingBenchPO) -> list[tuple[str, int]]:
    """The units of work of a run: ``("question-<i>", i)`` of every question, in file order."""
    return [(f"question-{i}", i) for i in range(len(bench.questions))]


def run_po_item(prompter, bench: StreamingBenchPO, index: int, protocol: str) -> dict:
    """``{"index", "output"}`` of question `index`: `run_po_proactive` under ``proactive`` (`prompter` is a
    `StreamingPolicy`), else `run_po_question` (``official`` / ``streaming``)."""
    if protocol == "proactive":
        return {"index": index, "output": run_po_proactive(prompter, bench, index)}
    return {"index": index, "output": run_po_question(prompter, bench, index, protocol)}


def po_run_results(bench: StreamingBenchPO, outputs: list[dict]) -> list[dict]:
    """The official results file of a run: the question file with each output under `MODEL_KEY`."""
    entries = json.loads(json.dumps(bench.entries))
    for output in outputs:
        q = bench.questions[output["index"]]
        entries[q.entry]["questions"][q.index][MODEL_KEY] = output["output"]
    return entries
