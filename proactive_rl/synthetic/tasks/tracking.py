"""Tracking tasks (P³I `object`, ProactiveVideoQA `pvqa`).

- `object`: a tracked object wanders, then leaves the view; the target is the side it left through
  (``left``/``right``/``top``/``bottom``) on the first frame where it is completely gone. On the frame before,
  its centre sits on the edge, half visible. Decoys of other colours leave too.
- `pvqa`: a question at t = 0 ("tell me whenever a new shape appears"); each appearance is a turn whose
  reply span starts at the appearance and lasts `event_duration` steps, and whose related span is the time
  the shape stays in view (docs/spec.md §5).
"""

from __future__ import annotations

import numpy as np

from proactive_rl.synthetic.tasks.common import Knobs, Scenario, Stage, a_an, target
from proactive_rl.synthetic.world import PALETTE, sprite

SIDES = ("left", "right", "top", "bottom")
PVQA_QUESTION = "Tell me whenever a new shape appears: what colour and shape is it?"


def make_object(rng: np.random.Generator, knobs: Knobs, steps: int) -> Scenario:
    st = Stage(rng, knobs, steps)
    shape, colour = st.shape(), st.colour()
    others = [c for c in PALETTE if c != colour]
    gone = int(rng.integers(max(3, steps // 3), steps))  # first frame without the object (<= last frame)
    sprites = st.wanderers(knobs.distractors, others)
    for _ in range(knobs.distractors):  # decoys: other colours leaving at other times
        sprites.append(_leaver(st, st.shape(), st.pick(others), int(rng.integers(2, steps + 2)), st.pick(SIDES)))
    side = st.pick(SIDES)
    sprites.append(_leaver(st, shape, colour, gone, side))
    instruction = (
        f"Keep track of the {colour} {shape}. Tell me when it leaves the view, and on which side: "
        "say left, right, top or bottom."
    )
    return Scenario(steps, sprites, [target(gone, side, knobs.fps)], instruction, {"tracked": f"{colour} {shape}"})


def make_pvqa(rng: np.random.Generator, knobs: Knobs, steps: int) -> Scenario:
    st = Stage(rng, knobs, steps)
    reply = knobs.event_duration
    stay = reply + int(rng.integers(1, 4))
    count = int(rng.integers(1, max(1, (steps - 2) // (reply + 4)) + 1))
    times = st.spaced_times(count, 1, steps - 2, reply + 1)
    sprites = st.wanderers(knobs.distractors, list(PALETTE))  # there from the start: not "new"
    targets = []
    for t in times:
        shape, colour = st.shape(), st.colour()
        end = min(t + stay, steps)
        sprites.append(sprite(shape, colour, st.radius(), st.wander(t, end), span=[t, end]))
        targets.append(
            target(t, pvqa_answer(colour, shape), knobs.fps, window=(t, min(t + reply, steps - 1)), related=(t, end))
        )
    return Scenario(steps, sprites, targets, PVQA_QUESTION, {"question": PVQA_QUESTION})


def pvqa_answer(colour: str, shape: str) -> str:
    """The pvqa answer for a new object: ``A red circle appears.``"""
    return f"{a_an(colour).capitalize()} {shape} appears."


def _leaver(st: Stage, shape: str, colour: str, gone: int, side: str) -> dict:
    """An object that wanders, reaches `side` with its centre on the edge at ``gone - 1`` and is out at `gone`."""
    r = st.radius()
    size = st.size
    x, y = st.point(margin=12)
    edge = {"left": (0.0, y), "right": (size, y), "top": (x, 0.0), "bottom": (x, size)}[side]
    out = {"left": (-r - 1, y), "right": (size + r + 1, y), "top": (x, -r - 1), "bottom": (x, size + r + 1)}[side]
    # Walk straight to the edge at the stage speed, wandering before that if there is time.
    run = max(1, int(np.ceil(np.hypot(edge[0] - x, edge[1] - y) / st.step_px)))
    arrive = gone - 1
    leave_from = max(0, arrive - run)
    track: list = [[0, x, y]] if arrive > 0 else []
    if leave_from > 0:  # time to spare: wander first, then hold the last point until the run starts
        track = [k for k in st.wander(0, leave_from, origin=(x, y)) if k[0] < leave_from]
        track.append([leave_from, track[-1][1], track[-1][2]])
    track += [[arrive, *edge], [gone, *out]]
    return sprite(shape, colour, r, track)
