"""What every task generator shares: the difficulty knobs, the scene frame, and scene helpers.

A generator is ``make(rng, knobs, duration) -> Scenario``: it draws a scene (``world`` sprites), the
targets that the scene's evidence supports, and a natural instruction. Times are whole decision steps
(``k / fps``) and every target sits on the first frame that shows its evidence, so a policy that reads the
frames can answer at exactly the target time (docs/spec.md §10, §4).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from proactive_rewards import Target
from proactive_rl.synthetic.world import PALETTE, SHAPES, sprite


@dataclass(frozen=True)
class Knobs:
    """Difficulty knobs shared by every streaming task.

    Args:
        size (`int`, *optional*, defaults to `64`): frame side in pixels (64-112 recommended).
        duration (`tuple[int, int]`, *optional*, defaults to `(10, 60)`): episode length range in seconds.
        fps (`float`, *optional*, defaults to `1.0`): decision steps per second.
        distractors (`int`, *optional*, defaults to `2`): wandering objects and decoy events per episode.
        speed (`float`, *optional*, defaults to `1.0`): motion speed multiplier (1.0 = 1/16 of the frame per step).
        event_duration (`int`, *optional*, defaults to `3`): steps an event (appearance, flash, reply span) lasts.
        noise (`float`, *optional*, defaults to `0.0`): Gaussian pixel noise standard deviation (0-255 units).
        scale (`float`, *optional*, defaults to `1.0`): object size multiplier (radii and placement margins; 2.0
            draws objects twice as large, which a model with a handful of vision tokens per frame can tell apart).
        max_events (`int`, *optional*, defaults to `0`): most counted events (atomic) or fill cycles
            (compositional) per episode; 0 = as many as fit. The count is uniform in ``1..max_events``.
    """

    size: int = 64
    duration: tuple[int, int] = (10, 60)
    fps: float = 1.0
    distractors: int = 2
    speed: float = 1.0
    event_duration: int = 3
    noise: float = 0.0
    scale: float = 1.0
    max_events: int = 0

    def __post_init__(self):
        lo, hi = self.duration
        if not (isinstance(self.size, int) and 32 <= self.size <= 512):
            raise ValueError(f"knob size must be an int in [32, 512], got {self.size!r}")
        if not (10 <= lo <= hi):
            raise ValueError(f"knob duration must be a (min, max) range with 10 <= min <= max, got {self.duration!r}")
        if not self.fps > 0:
            raise ValueError(f"knob fps must be > 0, got {self.fps!r}")
        if self.distractors < 0 or self.event_duration < 1 or self.speed <= 0 or self.noise < 0:
            raise ValueError(
                "knobs need distractors >= 0, event_duration >= 1, speed > 0, noise >= 0; got "
                f"{self.distractors}, {self.event_duration}, {self.speed}, {self.noise}"
            )
        if not (0.5 <= self.scale <= 4.0) or self.max_events < 0:
            raise ValueError(f"knobs need 0.5 <= scale <= 4 and max_events >= 0; got {self.scale}, {self.max_events}")

    @classmethod
    def from_kwargs(cls, **kwargs) -> Knobs:
        """Knobs from keyword arguments; unknown names list the valid ones."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise TypeError(f"unknown knob(s) {', '.join(unknown)}; expected one of {', '.join(names)}")
        if "duration" in kwargs:
            d = kwargs["duration"]
            kwargs["duration"] = (int(d), int(d)) if np.isscalar(d) else (int(d[0]), int(d[1]))
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        record["duration"] = list(self.duration)
        return record


@dataclass
class Scenario:
    """A generated episode before it becomes an `Episode`: scene, targets, instruction and extras."""

    steps: int  # number of decision steps; the episode lasts steps / fps seconds
    sprites: list[dict]
    targets: list[Target]
    instruction: str
    extra: dict[str, Any] = field(default_factory=dict)  # task facts kept in meta (question, plan, ...)


class Stage:
    """Geometry helpers for one episode: frame size, per-step speed and random placement."""

    def __init__(self, rng: np.random.Generator, knobs: Knobs, steps: int):
        self.rng, self.knobs, self.steps = rng, knobs, steps
        self.size = knobs.size
        self.unit = knobs.size / 64.0  # sizes are designed at 64 px and scale with the frame
        self.obj = self.unit * knobs.scale  # object sizes: the frame's unit times the scale knob
        self.step_px = knobs.speed * knobs.size / 16.0  # pixels moved per decision step

    def radius(self) -> float:
        return float(self.rng.uniform(4.0, 6.0) * self.obj)

    def point(self, margin: float = 8.0) -> tuple[float, float]:
        m = min(margin * max(self.unit, self.obj), self.size / 2 - 1)
        return float(self.rng.uniform(m, self.size - m)), float(self.rng.uniform(m, self.size - m))

    def event_count(self, fit: int) -> int:
        """How many counted events an episode has: uniform in ``1..fit``, capped by the `max_events` knob."""
        cap = self.knobs.max_events or fit
        return int(self.rng.integers(1, max(1, min(fit, cap)) + 1))

    def pick(self, options, exclude=()):
        choices = [o for o in options if o not in set(exclude)]
        return choices[int(self.rng.integers(len(choices)))]

    def colour(self, exclude=()) -> str:
        return self.pick(list(PALETTE), exclude)

    def shape(self, exclude=()) -> str:
        return self.pick(list(SHAPES), exclude)

    def wander(self, start: float, end: float, origin=None) -> list[list[float]]:
        """A track of random waypoints from `start` to `end` at the stage speed."""
        x, y = origin if origin is not None else self.point()
        t, track = float(start), [[float(start), x, y]]
        while t < end:
            nx, ny = self.point()
            dist = float(np.hypot(nx - x, ny - y))
            t += max(1.0, dist / self.step_px)
            x, y = nx, ny
            track.append([t, x, y])
        return track

    def wanderers(self, count: int, colours, shapes=SHAPES, avoid=()) -> list[dict]:
        """`count` distractors wandering for the whole episode, never drawn as any (shape, colour) in `avoid`."""
        out = []
        for _ in range(count):
            for _attempt in range(50):
                shape, colour = self.pick(list(shapes)), self.pick(list(colours))
                if (shape, colour) not in set(avoid):
                    break
            out.append(sprite(shape, colour, self.radius() * 0.8, self.wander(0, self.steps)))
        return out

    def spaced_times(self, count: int, first: int, last: int, gap: int) -> list[int]:
        """`count` sorted integer steps in ``[first, last]`` at least `gap` apart (fewer if they do not fit)."""
        slack = (last - first) - gap * (count - 1)
        while count > 0 and slack < 0:
            count -= 1
            slack = (last - first) - gap * (count - 1)
        if count <= 0:
            return []
        # Spread the slack randomly between the gaps (stars and bars), so times are uniform-ish.
        cuts = np.sort(self.rng.integers(0, slack + 1, size=count))
        return [int(first + c + i * gap) for i, c in enumerate(cuts)]


def target(step: int, text: str, fps: float, window=None, related=None) -> Target:
    """A target at decision step `step` (seconds = step / fps); windows given in steps too."""
    to_s = lambda s: round(float(s) / fps, 6)  # noqa: E731
    win = (to_s(window[0]), to_s(window[1])) if window is not None else None
    rel = (to_s(related[0]), to_s(related[1])) if related is not None else None
    return Target(to_s(step), str(text), win, rel)


def a_an(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word
