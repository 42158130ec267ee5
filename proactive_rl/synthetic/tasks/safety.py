"""Safety tasks (P³I `accident`, `crime`): one dangerous event; the target is the signal ``Warning``.

- `accident`: two vehicles on a collision course; the warning is due 2-3 steps before contact (earlier in slow
  traffic, so they are still clearly apart), while they converge (the contact frame itself is too late). The
  contact time is uniform over the episode. With the `max_events` knob an episode holds 1..max_events
  collisions spread over the whole of it, each a ``Warning`` target.
- `crime`: a thief walks to a parked package and carries it away; the warning is due on the first frame
  where the package moves with the thief (touching alone is not yet a theft: bystanders brush past too).
"""

from __future__ import annotations

import numpy as np

from proactive_rl.synthetic.tasks.common import Knobs, Scenario, Stage, target
from proactive_rl.synthetic.world import PALETTE, position, sprite

WARNING = "Warning"


def make_accident(rng: np.random.Generator, knobs: Knobs, steps: int) -> Scenario:
    st = Stage(rng, knobs, steps)
    pairs, used = [], []
    if knobs.max_events:
        # 1..max_events collisions, crashes spread over the whole episode (the first vehicles may already be on the
        # road at the first frame, but every warning is due while they are still apart), each pair cleared from the
        # road `event_duration` steps after its crash.
        for _ in range(st.event_count(steps // _STEPS_PER_COLLISION)):
            pairs.append(_collision(st, used))
            used += list(pairs[-1]["colours"])
        first = max(p["lead"] for p in pairs) + 1
        crashes = st.spaced_times(len(pairs), min(first, steps - 1), steps - 1, _STEPS_PER_COLLISION)
        pairs = pairs[: len(crashes)]
        for pair, contact in zip(pairs, crashes):
            pair.update(contact=contact, start=max(0, contact - pair["travel"]))
    else:  # one collision (P³I's accident videos), at least lead + 4 steps into the episode
        pairs.append(_collision(st, used, lambda lead: int(rng.integers(lead + 4, steps))))
        used += list(pairs[-1]["colours"])
    sprites = st.wanderers(knobs.distractors, [c for c in list(PALETTE) if c not in used])
    for pair in pairs:
        end = pair["contact"] + knobs.event_duration + 1 if knobs.max_events else steps + 1
        sprites += _vehicles(st, pair, end)
    instruction = (
        "You are watching a road from above. Say 'Warning' as soon as two vehicles are about to collide, "
        "early enough to avoid the crash."
    )
    vehicles = [[f"{c} {s}" for c, s in zip(p["colours"], p["shapes"])] for p in pairs]
    if not knobs.max_events:
        extra = {"contact": pairs[0]["contact"], "vehicles": vehicles[0]}
    else:
        extra = {"contacts": [p["contact"] for p in pairs], "vehicles": vehicles}
    targets = [target(p["contact"] - p["lead"], WARNING, knobs.fps) for p in pairs]
    return Scenario(steps, sprites, targets, instruction, extra)


# Steps between two crashes (approach, warning lead, crash and clearing), so an episode holds steps // this many.
_STEPS_PER_COLLISION = 12


def _collision(st: Stage, used: list, pick=None) -> dict:
    """Two vehicles (colours not in `used`) on a collision course, crashing at step ``pick(lead)`` (or at the
    ``contact`` the caller sets, with ``start = max(0, contact - travel)``)."""
    rng = st.rng
    ra, rb = st.radius(), st.radius()
    ca = st.colour(exclude=used)
    cb = st.colour(exclude=[*used, ca])
    sa, sb = st.shape(), st.shape()
    angle = float(rng.uniform(0, 2 * np.pi))
    # B comes in at 90-180 degrees to A, as at a crossing or head-on.
    angle_b = angle + float(rng.choice([-1, 1]) * rng.uniform(np.pi / 2, np.pi))
    # They crash into each other: each centre stops 0.2 (ra + rb) short of the crash point, so shapes overlap.
    stop = 0.2 * (ra + rb)
    # Warn 2-3 steps ahead, and at least when the vehicles are still clearly apart (centres 1.5 (ra + rb) + 2 px):
    # centres close at |uA - uB| * step_px per step, so slow traffic needs an earlier warning.
    closing = float(np.hypot(np.cos(angle) - np.cos(angle_b), np.sin(angle) - np.sin(angle_b)))
    apart = (1.5 * (ra + rb) + 2 * st.unit) / closing
    lead = max(int(rng.integers(2, 4)), int(np.ceil((apart - stop) / st.step_px)))
    lead = min(lead, st.steps - 5)
    contact = pick(lead) if pick is not None else None  # at most the last frame
    cx, cy = st.point(margin=18)
    travel = max(int(rng.integers(6, 13)), lead + 2)  # both are on screen before the warning
    return {
        "radii": (ra, rb),
        "colours": (ca, cb),
        "shapes": (sa, sb),
        "angles": (angle, angle_b),
        "stop": stop,
        "lead": lead,
        "contact": contact,
        "centre": (cx, cy),
        "travel": travel,
        "start": None if contact is None else max(0, contact - travel),
    }


def _vehicles(st: Stage, pair: dict, end: int) -> list[dict]:
    out = []
    cx, cy = pair["centre"]
    contact, start, stop = pair["contact"], pair["start"], pair["stop"]
    for shape, colour, r, a in zip(pair["shapes"], pair["colours"], pair["radii"], pair["angles"]):
        ux, uy = np.cos(a), np.sin(a)
        hit = (cx - ux * stop, cy - uy * stop)
        back = stop + st.step_px * (contact - start)
        origin = (cx - ux * back, cy - uy * back)
        out.append(sprite(shape, colour, r, [[start, *origin], [contact, *hit]], span=[start, end]))
    return out


def make_crime(rng: np.random.Generator, knobs: Knobs, steps: int) -> Scenario:
    st = Stage(rng, knobs, steps)
    package_colour, thief_colour = "yellow", st.colour(exclude=["yellow"])
    thief_shape = st.shape(exclude=["square"])
    px, py = st.point(margin=14)
    grab = int(rng.integers(max(4, steps // 3), steps - 1))  # the theft shows at grab + 1 <= last frame
    # The thief wanders, then walks straight to the package and leaves with it.
    approach = max(1, int(np.ceil(st.size / 3 / st.step_px)))
    wander_end = max(0, grab - approach)
    thief = st.wander(0, wander_end)
    thief = [k for k in thief if k[0] < wander_end] + [[wander_end, *position(thief, wander_end)]]
    thief.append([grab, px, py])
    ux, uy = _away(px, py, st.size)
    exit_steps = max(1, steps - grab)
    run = min(st.size * 1.5, st.step_px * exit_steps)
    thief.append([grab + exit_steps, px + ux * run, py + uy * run])
    thief_r = st.radius()
    package_r = 3.0 * st.unit
    package_track = [[0, px, py], [grab, px, py], [thief[-1][0], thief[-1][1], thief[-1][2]]]
    others = [c for c in list(PALETTE) if c not in (package_colour, thief_colour)]
    sprites = st.wanderers(knobs.distractors, others)
    # The package is drawn over the thief, so it stays visible while carried.
    sprites.append(sprite(thief_shape, thief_colour, thief_r, thief))
    sprites.append(sprite("square", package_colour, package_r, package_track))
    instruction = "This is a security camera watching a yellow package. Say 'Warning' as soon as anyone steals it."
    extra = {"grab": grab, "thief": f"{thief_colour} {thief_shape}"}
    return Scenario(steps, sprites, [target(grab + 1, WARNING, knobs.fps)], instruction, extra)


def _away(x: float, y: float, size: int) -> tuple[float, float]:
    """Unit vector from the package towards the nearest frame edge (the thief's escape route)."""
    dists = {(-1.0, 0.0): x, (1.0, 0.0): size - x, (0.0, -1.0): y, (0.0, 1.0): size - y}
    return min(dists, key=dists.get)
