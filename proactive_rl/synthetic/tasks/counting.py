"""Counting tasks (P³I `atomic`, `event_type`): answer the running count at each occurrence.

- `atomic`: count one specific event, "a red circle appears". Decoys pop up too: same colour other
  shape, same shape other colour. Each counted object stays `event_duration` steps, then vanishes.
- `event_type`: count one category of events (an object flashes white / a new object appears / an object
  disappears) among events of the other categories, whatever the object.

The target of the k-th occurrence is ``str(k)`` on the first frame that shows it.
"""

from __future__ import annotations

import numpy as np

from proactive_rl.synthetic.tasks.common import Knobs, Scenario, Stage, target
from proactive_rl.synthetic.world import PALETTE, sprite

EVENT_TYPES = {
    "flash": "any object flashes white",
    "appear": "a new object appears",
    "vanish": "an object disappears",
}


def make_atomic(rng: np.random.Generator, knobs: Knobs, steps: int) -> Scenario:
    st = Stage(rng, knobs, steps)
    shape, colour = st.shape(), st.colour()
    life = knobs.event_duration
    gap = life + 1  # the counted object is gone for at least one frame between two occurrences
    budget = max(1, (steps - 2) // (gap + 3))
    count = st.event_count(budget)
    times = st.spaced_times(count, 1, steps - 1, gap)
    sprites = st.wanderers(knobs.distractors, [c for c in PALETTE if c != colour])
    # Decoys share one attribute with the counted object, so counting needs both shape and colour.
    for _ in range(knobs.distractors):
        if rng.random() < 0.5:
            decoy = (st.shape(exclude=[shape]), colour)
        else:
            decoy = (shape, st.colour(exclude=[colour]))
        t0 = int(rng.integers(0, steps))
        sprites.append(_popup(st, *decoy, t0, life))
    for t in times:
        sprites.append(_popup(st, shape, colour, t, life))
    instruction = f"Tell me each time a {colour} {shape} appears. Answer with the running count."
    targets = [target(t, str(i + 1), knobs.fps) for i, t in enumerate(times)]
    return Scenario(steps, sprites, targets, instruction, {"event": f"{colour} {shape} appears"})


def make_event_type(rng: np.random.Generator, knobs: Knobs, steps: int) -> Scenario:
    st = Stage(rng, knobs, steps)
    counted = st.pick(list(EVENT_TYPES))
    life = knobs.event_duration
    gap = life + 1  # a flash is over before the next event, so each frame shows at most one change
    n_counted = int(rng.integers(1, max(1, (steps - 2) // (gap + 4)) + 1))
    times = st.spaced_times(n_counted + 2 * knobs.distractors, 1, steps - 1, gap)
    n_counted = min(n_counted, len(times))
    kinds = [counted] * n_counted + [st.pick(list(EVENT_TYPES), exclude=[counted]) for _ in times[n_counted:]]
    kinds = [kinds[i] for i in rng.permutation(len(kinds))]
    # Steady objects are there from the start: two take turns flashing, the others vanish one by one.
    n_vanish = kinds.count("vanish")
    steady = [sprite(st.shape(), st.colour(), st.radius(), st.wander(0, steps)) for _ in range(2 + n_vanish)]
    flashers, vanishers = steady[:2], iter(steady[2:])
    appearing, count, targets = [], 0, []
    for i, (t, kind) in enumerate(zip(times, kinds)):
        if kind == "flash":
            flashers[i % 2].setdefault("flash", []).append([t, t + life])
        elif kind == "appear":
            track = st.wander(t, steps)
            appearing.append(sprite(st.shape(), st.colour(), st.radius(), track, span=[t, steps + 1]))
        else:
            next(vanishers)["span"] = [0, t]
        if kind == counted:
            count += 1
            targets.append(target(t, str(count), knobs.fps))
    instruction = f"Tell me each time {EVENT_TYPES[counted]}. Answer with the running count."
    return Scenario(steps, steady + appearing, targets, instruction, {"event_type": counted})


def _popup(st: Stage, shape: str, colour: str, t0: int, life: int) -> dict:
    """An object that appears at step `t0`, drifts for `life` steps and vanishes."""
    x, y = st.point(margin=10)
    angle = float(st.rng.uniform(0, 2 * np.pi))
    drift = st.step_px * 0.25 * life
    track = [[t0, x, y], [t0 + life, x + drift * np.cos(angle), y + drift * np.sin(angle)]]
    return sprite(shape, colour, st.radius(), track, span=[t0, t0 + life])
