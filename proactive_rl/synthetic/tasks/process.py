"""Process tasks (P³I `compositional`, `intervention`).

- `compositional`: a tank (a bar) fills up, one or more times; ``start`` is due on the first frame with
  water in it, ``end`` on the first frame where it is full. The tank empties at once between cycles.
- `intervention`: squares are put into slots from left to right following the instruction's colour order;
  one placement is a deliberate mistake (a colour that is not in the plan). The target names the fix, is
  free text, and has a window of `event_duration` steps after the placement lands (P³I windowed targets).
"""

from __future__ import annotations

import numpy as np

from proactive_rl.synthetic.tasks.common import Knobs, Scenario, Stage, a_an, target
from proactive_rl.synthetic.world import PALETTE, sprite

ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")


def make_compositional(rng: np.random.Generator, knobs: Knobs, steps: int) -> Scenario:
    st = Stage(rng, knobs, steps)
    # Fill time shrinks with speed; each fill step adds >= 1/13 of the bar, i.e. >= 3 px at 64 px.
    fill_len = int(np.clip(round(rng.integers(4, 10) / knobs.speed), 2, min(12, steps - 3)))
    cycle = fill_len + 3  # start .. end, then a pause before the reset and the next start
    cycles = st.event_count((steps - 2) // (cycle + 2))
    starts = st.spaced_times(cycles, 1, steps - 1 - fill_len, cycle)
    fill, targets = [[0, 0.0]], []
    for i, s in enumerate(starts):
        e = s + fill_len
        if i > 0:  # empty at once, one step after the previous end at the earliest
            fill += [[s - 1.001, 1.0], [s - 1, 0.0]]
        fill += [[s - 1, 0.0], [e, 1.0]]
        targets += [target(s, "start", knobs.fps), target(e, "end", knobs.fps)]
    # The bar is as thick as the `scale` knob makes objects (up to a quarter of the frame), so a model with a
    # handful of vision tokens per frame sees it fill; at scale 1 it is the same as ever.
    width, height = 0.75 * st.size, min(0.12 * knobs.scale, 0.24) * st.size
    tank = sprite("bar", "blue", 0, [[0, st.size / 2, st.size * 0.85]], width=width, height=height, fill=fill)
    sprites = st.wanderers(knobs.distractors, [c for c in PALETTE if c != "blue"]) + [tank]
    instruction = (
        "The blue tank at the bottom is filled from time to time. Say 'start' when it starts filling and "
        "'end' when it is full."
    )
    return Scenario(steps, sprites, targets, instruction, {"fill_steps": fill_len})


def make_intervention(rng: np.random.Generator, knobs: Knobs, steps: int) -> Scenario:
    st = Stage(rng, knobs, steps)
    gap = max(2, int(round(3 / knobs.speed)))  # steps between two placements
    slots = int(np.clip((steps - 2) // gap, 2, 5))
    gap = max(2, min(gap, (steps - 2) // slots))
    plan = [str(c) for c in rng.permutation([c for c in PALETTE if c != "black"])[:slots]]
    wrong_slot = int(rng.integers(slots))
    wrong_colour = st.colour(exclude=plan + ["black"])
    spacing = st.size / (slots + 1)
    y = st.size * 0.7
    sprites = [sprite("ring", "black", 5.5 * st.unit, [[0, spacing * (k + 1), y]]) for k in range(slots)]
    spare = [c for c in PALETTE if c not in plan + [wrong_colour]]
    sprites += st.wanderers(knobs.distractors, spare, shapes=("circle", "triangle", "diamond"))
    first = int(rng.integers(1, max(2, steps - gap * slots)))
    window = knobs.event_duration
    targets = []
    for k in range(slots):
        land = first + gap * k  # the square is in its slot from this step on
        colour = wrong_colour if k == wrong_slot else plan[k]
        x = spacing * (k + 1)
        sprites.append(sprite("square", colour, 4 * st.unit, [[land, x, y]], span=[land, steps + 1]))
        if k == wrong_slot:
            fix = (
                f"The {ORDINALS[k]} slot should hold {a_an(plan[k])} square, not {a_an(wrong_colour)} one: "
                f"replace the {wrong_colour} square with {a_an(plan[k])} square."
            )
            end = min(land + window, steps - 1)
            targets.append(target(land, fix, knobs.fps, window=(land, end) if end > land else None))
    order = ", ".join(plan)
    instruction = (
        f"I am putting squares into the slots from left to right in this order: {order}. "
        "If I make a mistake, tell me right away how to fix it."
    )
    return Scenario(steps, sprites, targets, instruction, {"plan": plan, "mistake": [wrong_slot, wrong_colour]})
