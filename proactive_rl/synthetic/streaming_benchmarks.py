"""The synthetic world in the official formats of OVO-Bench (forward active responding) and StreamingBench
Proactive Output, so both benchmarks' whole path runs offline (docs/ovo_bench.md, docs/streamingbench.md).

Layout of ``out/``::

    out/ovo_bench/ovo_bench_new.json              forward records: REC (counts), SSR (steps), CRR (clue times)
    out/ovo_bench/src_videos/synthetic/<id>.mp4   their ``video`` (relative to the ``src_videos`` root)
    out/streamingbench/questions_proactive.json   one video per entry, ``H:MM:SS`` times
    out/streamingbench/videos/sample_<N>_proactive.mp4

Sources: REC and Proactive Output from ``atomic`` episodes (a shape appearing: the running count), SSR from
``compositional`` ones (a tank filling: the step is "being performed" from its start to its end), CRR from
``atomic`` ones (the clue is the first appearance). The worlds run at 1 frame per second, so every event sits on a
whole second, as the official ``H:MM:SS`` times need.
"""

from __future__ import annotations

import json
from pathlib import Path

from proactive_eval.video import write_video
from proactive_rl.synthetic.generate import generate_episodes, render_frames

OVO_FILE = "ovo_bench/ovo_bench_new.json"
PO_FILE = "streamingbench/questions_proactive.json"


def _stamp(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


def _write(path: Path, episode) -> None:
    if not (path.is_file() and path.stat().st_size > 0):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_video(path, (frame for _, frame in render_frames(episode)), fps=episode.fps)


def rec_record(rid: int, episode, video: str) -> dict:
    """REC: the running count of the episode's appearances, probed one second after each and at the end."""
    times = [t.time for t in episode.targets]
    event = episode.meta["event"]  # "red circle appears"
    probes = sorted({min(episode.duration, t + 1) for t in times} | {episode.duration})
    return {
        "id": rid,
        "task": "REC",
        "video": video,
        "activity": "make a " + event.replace(" appears", " appear"),
        "start_times": times,
        "end_times": [min(episode.duration, t + episode.meta["knobs"]["event_duration"]) for t in times],
        "test_info": [{"realtime": p, "count": sum(t <= p for t in times)} for p in probes],
    }


def ssr_record(rid: int, episode, video: str) -> dict:
    """SSR: each fill of the tank is a step, performed from its start to its end; probed inside and outside."""
    starts = [t.time for t in episode.targets if t.text == "start"]
    ends = [t.time for t in episode.targets if t.text == "end"]
    steps = [f"fill the blue tank for the {k + 1}. time" for k in range(len(starts))]
    probes = []
    for k, (s, e) in enumerate(zip(starts, ends)):
        for t in sorted({s + 1, e, max(0.0, s - 1), min(episode.duration, e + 2)}):
            probes.append({"realtime": t, "step": steps[k], "type": int(s <= t <= e)})
    return {
        "id": rid,
        "task": "SSR",
        "video": video,
        "tutorial": "FillTheTank",
        "all_steps": steps,
        "start_time": starts,
        "end_time": ends,
        "test_info": probes,
    }


def crr_record(rid: int, episode, video: str) -> dict:
    """CRR: "what appears?" asked at the start; the clue is the first appearance (type 1 from then on)."""
    clue = episode.targets[0].time
    event = episode.meta["event"]
    probes = sorted({0.0, max(0.0, clue - 1), clue, min(episode.duration, clue + 2), episode.duration})
    return {
        "id": rid,
        "task": "CRR",
        "video": video,
        "question": "Which coloured shape appears in the video?",
        "answer": "A " + event.replace(" appears", "."),
        "ask_time": 0,
        "clue_time": clue,
        "test_info": [{"realtime": t, "type": int(t >= clue)} for t in probes],
    }


def po_question(episode) -> dict:
    """Proactive Output: say the count when it reaches its last value; asked 5 s before (the official files' most
    common lead), or at the start."""
    last = episode.targets[-1]
    event = episode.meta["event"].replace(" appears", "")
    return {
        "task_type": "Proactive Output",
        "question": f'When the {event} has appeared {last.text} times, output "{last.text}".',
        "time_stamp": _stamp(max(0.0, last.time - 5)),
        "ground_truth_time_stamp": _stamp(last.time),
        "ground_truth_output": last.text,
        "required_ability": "counting",
    }


def export_streaming_benchmarks(out: str | Path, n: int = 2, seed: int = 0, videos: bool = True, **knobs) -> dict:
    """Write the synthetic OVO-Bench forward records and StreamingBench proactive questions (module docstring).

    Args:
        out (`str` or `Path`): the output folder.
        n (`int`, *optional*, defaults to `2`): records per OVO task and questions of Proactive Output.
        seed (`int`, *optional*, defaults to `0`): the run seed.
        videos (`bool`, *optional*, defaults to `True`): write the mp4 files (existing ones are kept).
        **knobs: difficulty knobs (`proactive_rl.synthetic.Knobs`); ``fps`` is 1 (whole-second events).

    Returns:
        `dict`: the two annotation files' paths and their record counts.
    """
    out = Path(out)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    knobs = {**knobs, "fps": 1.0}
    atomic = generate_episodes("atomic", 2 * n, seed, **knobs)
    tanks = generate_episodes("compositional", n, seed, **knobs)
    records = []
    for builder, episodes in ((rec_record, atomic[:n]), (ssr_record, tanks), (crr_record, atomic[n:])):
        for episode in episodes:
            video = f"synthetic/{episode.id}.mp4"
            records.append(builder(len(records), episode, video))
            if videos:
                _write(out / "ovo_bench" / "src_videos" / video, episode)
    entries = []
    for k, episode in enumerate(atomic[:n]):
        video = f"./videos/sample_{k + 1}_proactive.mp4"
        end = int(round(episode.duration))
        entries.append(
            {"time": f"[0:00:00 - {end // 3600}:{end // 60 % 60:02d}:{end % 60:02d}]", "questions": [po_question(episode)], "video_categories": "synthetic",
             "video_path": video}
        )  # fmt: skip
        if videos:
            _write(out / "streamingbench" / video, episode)
    for rel, data in ((OVO_FILE, records), (PO_FILE, entries)):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(json.dumps(data, indent=1) + "\n")
    return {"ovo_bench": str(out / OVO_FILE), "records": len(records), "streamingbench": str(out / PO_FILE),
            "questions": len(entries)}  # fmt: skip
