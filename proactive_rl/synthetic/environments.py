"""Ask-for-help MCQA environments in the synthetic world (ProactiveBench protocol, docs/spec.md §6).

Every environment is a sequence of images with a current position. The lettered choices are the action
options (proactive suggestions and the abstain option, shuffled once at generation) followed by four
categories (one correct, three hard negatives). A valid proactive suggestion moves the position; a correct
category ends the episode as a success; an abstention, a wrong category, an invalid action, an unparseable
answer or running out of `max_steps` ends it as a failure. Answers are scored by the benchmark's own
`proactive_eval.benchmarks.proactivebench.metric.classify_answer` (the authors' parsing).

Kinds, after the datasets they stand in for (ProactiveBench App. A):

- ``occlusion`` (ROD): a board hides the object; "move the board to the left/right" slides it one step,
  circularly. As in ROD, a category on the first, fully occluded frame counts as wrong.
- ``corruption`` (ImageNet-C): noise, blur, pixelation or low contrast; four quality suggestions, one valid;
  each valid request removes one severity level. The opt-in ``merge`` corruption (knob ``corruptions``) shows
  colours merged into fewer and fewer bins, so that each level has an exact best-guess accuracy (`merge_bins`).
- ``sketch`` (QuickDraw): a drawing shown stroke by stroke; "add more details" adds a stroke.
- ``zoom_out`` (MS-COCO zoom): a tight crop of the object; "move farther" widens it one step.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from proactive_eval.benchmarks.proactivebench.environments import MCQAObservation, StepResult
from proactive_eval.benchmarks.proactivebench.metric import classify_answer
from proactive_rl.synthetic.sketches import CORRUPTIONS, DRAWINGS, corrupt, draw_strokes
from proactive_rl.synthetic.world import BACKGROUND, PALETTE, SHAPES, rgb, shape_mask

KINDS = ("occlusion", "corruption", "sketch", "zoom_out")
# The dataset each kind follows (its dynamics and option style) and its name in reports.
DATASETS = {kind: f"synthetic_{kind}" for kind in KINDS}
ABSTAIN = ("I do not know.", "I cannot answer this question.", "I cannot tell from this image.")
QUESTIONS = {
    "occlusion": ("What object is hidden behind the {occluder}?", "Which object is behind the {occluder}?"),
    "corruption": ("What object is shown in this image?", "Which object does this picture show?"),
    "sketch": ("What does this drawing depict?", "What is being drawn in this sketch?"),
    "zoom_out": ("What object is in this picture?", "Which object does this photo show?"),
}
HINTS = {
    "occlusion": "Hint: moving the occluding object might reveal what is behind it.",
    "corruption": "Hint: enhancing the image quality could help with classification.",
    "sketch": "Hint: Adding more details to the drawing could help with classification.",
    "zoom_out": "Hint: zooming out could help with classification.",
}
QUALITY_ACTIONS = {
    "noise": "Denoise the image.",
    "blur": "Deblur the image.",
    "pixelate": "Increase the image resolution.",
    "contrast": "Increase the contrast of the image.",
}
# The opt-in corruption (not drawn by default, so the standard environments stay as they are): its suggestion
# takes the place of the contrast one among the options.
MERGE = "merge"
MERGE_ACTION = "Restore the colours of the image."


@dataclass
class SequenceEnvironment:
    """An MCQA environment over a fixed image sequence (implements `proactive_eval.MCQAEnvironment`).

    Args:
        id (`str`): unique id.
        dataset (`str`): report name (``synthetic_<kind>``).
        kind (`str`): one of `KINDS`.
        images (`list[np.ndarray]`): the sequence, ``H×W×3`` uint8.
        prompt (`str`): the question.
        options (`list[str]`): action options shown before the categories (suggestions and the abstain option).
        categories (`list[str]`): four categories; `answer` is one of them.
        answer (`str`): the correct category.
        moves (`dict[str, int]`): valid suggestion -> change of the image position.
        first_image (`int`): the starting position.
        reference_image (`int`): the position where the object is fully recognisable.
        steps_needed (`int`): valid moves from `first_image` to `reference_image`.
        max_steps (`int`): turns allowed (the authors' `num_images`).
        circular (`bool`): positions wrap around (ROD) instead of stopping at the ends.
        category_from_move (`int`): moves needed before a category can be correct (1 for ROD, else 0).
        hint (`str`): the dataset's hint (ProactiveBench §4.3), for prompts that use one.
    """

    id: str
    dataset: str
    kind: str
    images: list
    prompt: str
    options: list[str]
    categories: list[str]
    answer: str
    moves: dict[str, int]
    first_image: int
    reference_image: int
    steps_needed: int
    max_steps: int
    circular: bool = False
    category_from_move: int = 0
    hint: str = ""
    _position: int = field(default=0, repr=False)
    _turns: int = field(default=0, repr=False)
    _moves_made: int = field(default=0, repr=False)

    @property
    def choices(self) -> list[str]:
        """All lettered choices in order: action options, then categories (docs/spec.md §6)."""
        return self.options + self.categories

    def valid_actions(self) -> list[str]:
        """Suggestions that move the environment from the current position."""
        n = len(self.images)
        return [a for a, d in self.moves.items() if self.circular or 0 <= self._position + d < n]

    def reset(self) -> MCQAObservation:
        self._position, self._turns, self._moves_made = self.first_image, 0, 0
        return self._observe()

    def step(self, answer: str) -> StepResult:
        allowed = self.answer if self._moves_made >= self.category_from_move else None
        outcome, index = classify_answer(answer, self.options, self.valid_actions(), self.categories, allowed)
        self._turns += 1
        if outcome != "proactive":
            return StepResult(None, outcome, True)
        self._position = (self._position + self.moves[self.choices[index]]) % len(self.images)
        self._moves_made += 1
        if self._turns >= self.max_steps:
            return StepResult(None, "proactive", True)
        return StepResult(self._observe(), "proactive", False)

    def oracle_answer(self, observation: MCQAObservation | None = None) -> str:
        """The shortest successful answer from here: a move towards the reference, else the category."""
        if self._moves_made >= self.category_from_move and self._position == self.reference_image:
            return self.answer
        valid = self.valid_actions()
        if not valid:
            return self.answer
        n = len(self.images)
        # Distance to the reference after each valid move (circular or not); ties go to the first option.
        return min(
            valid, key=lambda a: _distance(self._position + self.moves[a], self.reference_image, n, self.circular)
        )

    def _observe(self) -> MCQAObservation:
        return MCQAObservation(
            image=self.images[self._position],
            prompt=self.prompt,
            options=self.choices,
            valid_actions=self.valid_actions(),
            step=self._turns,
        )


NEGATIVES = ("hard", "easy")
LAYOUTS = ("shuffled", "fixed")


@dataclass(frozen=True)
class EnvKnobs:
    """Difficulty knobs of `make_environments` (all defaults give the standard, ProactiveBench-like environments).

    Args:
        negatives (`str`, *optional*, defaults to `"hard"`): wrong categories of the object kinds. ``"hard"``: they
            share the answer's colour or shape (ProactiveBench mines CLIP hard negatives); ``"easy"``: the answer's
            shape in three other colours of `colours`, so colour alone names the category.
        colours (`tuple[str]`, *optional*): the object colours drawn from (default: the palette without black).
        layout (`str`, *optional*, defaults to `"shuffled"`): ``"fixed"`` lists the action options in alphabetical
            order with the abstain option last, and the categories in palette-then-shape (or drawing) order, so with
            four `colours` and ``negatives="easy"`` each colour always has the same letter.
        corruptions (`tuple[str]`, *optional*): corruption types drawn from (``corruption`` kind; default: all).
        object_radius (`float`, *optional*): the object's radius as a fraction of the frame (``corruption`` kind;
            default 0.28). Above 0.5 the object fills the frame, so its colour is the whole image.
        colour_weights (`tuple[float]`, *optional*): how often each of `colours` is the answer (default: uniform).
            With the ``merge`` corruption they set each level's best-guess accuracy (`merge_bins`).
    """

    negatives: str = "hard"
    colours: tuple[str, ...] | None = None
    layout: str = "shuffled"
    corruptions: tuple[str, ...] | None = None
    object_radius: float | None = None
    colour_weights: tuple[float, ...] | None = None

    def __post_init__(self):
        if self.negatives not in NEGATIVES:
            raise ValueError(f"negatives: expected one of {', '.join(NEGATIVES)}, got {self.negatives!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout: expected one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        if self.colours is not None:
            object.__setattr__(self, "colours", tuple(self.colours))
            unknown = [c for c in self.colours if c not in PALETTE]
            if unknown or not self.colours or len(set(self.colours)) != len(self.colours):
                raise ValueError(f"colours: expected distinct colours of {', '.join(PALETTE)}, got {self.colours!r}")
        if self.negatives == "easy" and len(self.palette) < 4:
            raise ValueError(f"colours: negatives='easy' needs at least 4 colours, got {self.palette!r}")
        if self.corruptions is not None:
            object.__setattr__(self, "corruptions", tuple(self.corruptions))
            allowed = (*CORRUPTIONS, MERGE)
            if not self.corruptions or any(c not in allowed for c in self.corruptions):
                raise ValueError(f"corruptions: expected some of {', '.join(allowed)}, got {self.corruptions!r}")
            if MERGE in self.corruptions and (self.negatives != "easy" or len(self.palette) != 4):
                raise ValueError(
                    "corruptions: 'merge' needs negatives='easy' and exactly 4 colours (the categories are the "
                    f"four colours of one shape), got negatives={self.negatives!r}, colours={self.palette!r}"
                )
        if self.colour_weights is not None:
            object.__setattr__(self, "colour_weights", tuple(float(w) for w in self.colour_weights))
            if len(self.colour_weights) != len(self.palette) or not all(w > 0 for w in self.colour_weights):
                raise ValueError(
                    f"colour_weights: expected one positive weight per colour of {self.palette!r}, "
                    f"got {self.colour_weights!r}"
                )

        if self.object_radius is not None and not 0.05 <= self.object_radius <= 1.0:
            raise ValueError(
                f"object_radius: expected a fraction of the frame in [0.05, 1], got {self.object_radius!r}"
            )

    @property
    def palette(self) -> tuple[str, ...]:
        return self.colours if self.colours is not None else tuple(c for c in PALETTE if c != "black")


def make_environments(
    kind: str,
    n: int,
    seed: int = 0,
    size: int = 64,
    *,
    negatives: str = "hard",
    colours=None,
    layout: str = "shuffled",
    corruptions=None,
    object_radius: float | None = None,
    colour_weights=None,
) -> list[SequenceEnvironment]:
    """`n` seeded environments of one kind (``occlusion``, ``corruption``, ``sketch``, ``zoom_out``).

    Same arguments give identical environments (ids ``{kind}_s{seed}_{i:05d}``). The keyword-only difficulty
    knobs are documented in :class:`EnvKnobs`; their defaults reproduce the standard environments exactly.
    """
    if kind not in _BUILDERS:
        raise ValueError(f"unknown environment kind {kind!r}; expected one of {', '.join(KINDS)}")
    knobs = EnvKnobs(negatives, colours, layout, corruptions, object_radius, colour_weights)
    if kind == "sketch" and (knobs.negatives != "hard" or knobs.colours is not None):
        raise ValueError("negatives/colours: sketch categories are drawings; these knobs apply to the object kinds")
    if kind != "corruption" and (knobs.corruptions is not None or knobs.object_radius is not None):
        raise ValueError(f"corruptions/object_radius: only apply to kind 'corruption', got kind {kind!r}")
    out = []
    for i in range(n):
        env_seed = int(np.random.SeedSequence([int(seed), zlib.crc32(kind.encode()), i]).generate_state(1)[0])
        rng = np.random.default_rng(env_seed)
        env = _BUILDERS[kind](rng, f"{kind}_s{seed}_{i:05d}", size, env_seed, knobs)
        if knobs.layout == "fixed":
            _fix_layout(env)
        out.append(env)
    return out


def _fix_layout(env: SequenceEnvironment) -> None:
    # Reordering after building keeps every random draw (and so the images and the answer) as with "shuffled".
    env.options = sorted(env.options, key=lambda o: (o in ABSTAIN, o))
    if env.kind == "sketch":
        order = list(DRAWINGS)
        env.categories = sorted(env.categories, key=order.index)
    else:
        colours, shapes = list(PALETTE), list(SHAPES)
        env.categories = sorted(
            env.categories, key=lambda c: (colours.index(c.split(" ")[0]), shapes.index(c.split(" ")[1]))
        )


def oracle_policy(env: SequenceEnvironment):
    """A `policy_fn` for `run_environment` that plays `env` optimally (for tests and baselines)."""
    return env.oracle_answer


def abstain_policy(observation: MCQAObservation) -> str:
    """A `policy_fn` that always picks the abstain option."""
    return next(o for o in observation.options if o in ABSTAIN)


# --- builders ------------------------------------------------------------------------------------


def _occlusion(rng, env_id: str, size: int, seed: int, knobs: EnvKnobs) -> SequenceEnvironment:
    answer, categories = _object_categories(rng, knobs)
    colour, shape = answer.split(" ")
    board_colour = _pick(rng, [c for c in PALETTE if c != colour])
    occluder = f"{board_colour} board"
    reach = int(rng.integers(2, 5))  # moves from the centre until the object is fully visible
    radius = size * 0.16
    board_half = radius + 2
    shift = (board_half + radius + 2) / reach  # pixels per move
    images = []
    n = 2 * reach + 1  # positions -reach..reach; the middle one hides the object
    c = size / 2
    yy, xx = np.mgrid[0:size, 0:size]
    for i in range(n):
        img = _canvas(size)
        img[shape_mask(shape, c, c, radius, size, yy, xx)] = rgb(colour)
        ox = c + (i - reach) * shift
        board = (np.abs(xx + 0.5 - ox) <= board_half) & (np.abs(yy + 0.5 - c) <= size * 0.3)
        img[board] = rgb(board_colour)
        images.append(img)
    left, right = f"Move the {occluder} to the left.", f"Move the {occluder} to the right."
    options = _shuffled(rng, [left, right, _pick(rng, ABSTAIN)])
    reference = reach if rng.random() < 0.5 else -reach  # either end reveals it; the oracle heads one way
    return SequenceEnvironment(
        id=env_id,
        dataset=DATASETS["occlusion"],
        kind="occlusion",
        images=images,
        prompt=_pick(rng, QUESTIONS["occlusion"]).format(occluder=occluder),
        options=options,
        categories=categories,
        answer=answer,
        moves={left: -1, right: 1},
        first_image=reach,
        reference_image=(reach + reference) % n,
        steps_needed=reach,
        max_steps=n,
        circular=True,
        category_from_move=1,
        hint=HINTS["occlusion"],
    )


def _corruption(rng, env_id: str, size: int, seed: int, knobs: EnvKnobs) -> SequenceEnvironment:
    answer, categories = _object_categories(rng, knobs)
    colour, shape = answer.split(" ")
    kind = _pick(rng, knobs.corruptions or CORRUPTIONS)
    levels = int(rng.integers(3, 5))
    radius = size * (knobs.object_radius or 0.28)
    mask = shape_mask(shape, size / 2, size / 2, radius, size)
    actions = dict(QUALITY_ACTIONS)
    if kind == MERGE:
        levels = len(knobs.palette) - 1
        images = [_merged(mask, size, colour, merge_bins(knobs.palette, s)) for s in range(levels + 1)]
        del actions["contrast"]
        actions[MERGE] = MERGE_ACTION
    else:
        clean = _canvas(size)
        clean[mask] = rgb(colour)
        images = [corrupt(clean, kind, s, levels, seed) for s in range(levels + 1)]
    options = _shuffled(rng, list(actions.values()) + [_pick(rng, ABSTAIN)])
    return SequenceEnvironment(
        id=env_id,
        dataset=DATASETS["corruption"],
        kind="corruption",
        images=images,
        prompt=_pick(rng, QUESTIONS["corruption"]),
        options=options,
        categories=categories,
        answer=answer,
        moves={actions[kind]: -1},
        first_image=levels,
        reference_image=0,
        steps_needed=levels,
        max_steps=levels + 1,
        hint=HINTS["corruption"],
    )


def _sketch(rng, env_id: str, size: int, seed: int, knobs: EnvKnobs) -> SequenceEnvironment:
    names = list(DRAWINGS)
    order = rng.permutation(len(names))[:4]
    categories = [names[i] for i in order]
    answer = categories[0]
    categories = _shuffled(rng, categories)
    strokes = DRAWINGS[answer]
    images = [draw_strokes(strokes[: k + 1], size) for k in range(len(strokes))]
    action = "Add more details to the drawing."
    options = _shuffled(rng, [action, _pick(rng, ABSTAIN)])
    return SequenceEnvironment(
        id=env_id,
        dataset=DATASETS["sketch"],
        kind="sketch",
        images=images,
        prompt=_pick(rng, QUESTIONS["sketch"]),
        options=options,
        categories=categories,
        answer=answer,
        moves={action: 1},
        first_image=0,
        reference_image=len(strokes) - 1,
        steps_needed=len(strokes) - 1,
        max_steps=len(strokes),
        hint=HINTS["sketch"],
    )


def _zoom_out(rng, env_id: str, size: int, seed: int, knobs: EnvKnobs) -> SequenceEnvironment:
    answer, categories = _object_categories(rng, knobs, same_colour=True)
    colour, shape = answer.split(" ")
    big = size * 4  # render large so crops stay sharp, then sample down to `size`
    cx, cy = rng.uniform(0.4, 0.6, size=2) * big
    radius = big * 0.3
    scene = _canvas(big)
    scene[shape_mask(shape, cx, cy, radius, big)] = rgb(colour)
    granularity = int(rng.integers(3, 6))
    # The first crop sits inside the object, so only its colour shows; each step widens it to the full frame.
    half0 = radius * 0.35
    images = []
    for k in range(granularity + 1):
        a = k / granularity
        x0, x1 = (1 - a) * (cx - half0), (1 - a) * (cx + half0) + a * big
        y0, y1 = (1 - a) * (cy - half0), (1 - a) * (cy + half0) + a * big
        xs = np.clip((x0 + (np.arange(size) + 0.5) * (x1 - x0) / size).astype(int), 0, big - 1)
        ys = np.clip((y0 + (np.arange(size) + 0.5) * (y1 - y0) / size).astype(int), 0, big - 1)
        images.append(scene[ys][:, xs])
    action = "Move farther from the object."
    options = _shuffled(rng, [action, _pick(rng, ABSTAIN)])
    return SequenceEnvironment(
        id=env_id,
        dataset=DATASETS["zoom_out"],
        kind="zoom_out",
        images=images,
        prompt=_pick(rng, QUESTIONS["zoom_out"]),
        options=options,
        categories=categories,
        answer=answer,
        moves={action: 1},
        first_image=0,
        reference_image=granularity,
        steps_needed=granularity,
        max_steps=granularity + 1,
        hint=HINTS["zoom_out"],
    )


_BUILDERS = {"occlusion": _occlusion, "corruption": _corruption, "sketch": _sketch, "zoom_out": _zoom_out}


def merge_bins(colours, severity: int) -> list[tuple[str, ...]]:
    """The colour bins of the ``merge`` corruption at `severity` (``0..len(colours) - 1``): the colours in order,
    split into ``len(colours) - severity`` contiguous bins, the larger bins last. Every colour of a bin is drawn as
    the bin's mean colour, so an image names its bin and no more: the best guess is the bin's most likely colour
    and is right with probability ``sum over bins of max weight`` (`colour_weights`). Four colours give
    ``[c0] [c1] [c2] [c3]``, ``[c0] [c1] [c2 c3]``, ``[c0 c1] [c2 c3]``, ``[c0 c1 c2 c3]``."""
    colours = tuple(colours)
    n_bins = len(colours) - severity
    if not 1 <= n_bins <= len(colours):
        raise ValueError(f"severity: expected 0..{len(colours) - 1}, got {severity}")
    small, extra = divmod(len(colours), n_bins)
    sizes = [small] * (n_bins - extra) + [small + 1] * extra
    bounds = np.cumsum([0, *sizes])
    return [colours[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _merged(mask: np.ndarray, size: int, colour: str, bins: list[tuple[str, ...]]) -> np.ndarray:
    shown = next(b for b in bins if colour in b)
    img = _canvas(size)
    img[mask] = np.rint(np.mean([PALETTE[c] for c in shown], axis=0)).astype(np.uint8)
    return img


def _object_categories(rng, knobs: EnvKnobs, same_colour: bool = False) -> tuple[str, list[str]]:
    """A "colour shape" answer and three negatives: hard ones share its colour (or, if allowed, its shape); easy
    ones are its shape in other colours."""
    colours = list(knobs.palette)
    if knobs.colour_weights is None:
        colour = _pick(rng, colours)
    else:
        weights = np.asarray(knobs.colour_weights) / sum(knobs.colour_weights)
        colour = colours[int(rng.choice(len(colours), p=weights))]
    shape = _pick(rng, SHAPES)
    if knobs.negatives == "easy":
        negatives = [f"{c} {shape}" for c in colours if c != colour]
    else:
        negatives = [f"{colour} {s}" for s in SHAPES if s != shape]
        if not same_colour:
            negatives += [f"{c} {shape}" for c in colours if c != colour]
    chosen = [negatives[i] for i in rng.permutation(len(negatives))[:3]]
    answer = f"{colour} {shape}"
    return answer, _shuffled(rng, [answer] + chosen)


def _canvas(size: int) -> np.ndarray:
    img = np.empty((size, size, 3), dtype=np.uint8)
    img[:] = BACKGROUND
    return img


def _pick(rng, items):
    return items[int(rng.integers(len(items)))]


def _shuffled(rng, items: list) -> list:
    return [items[i] for i in rng.permutation(len(items))]


def _distance(position: int, reference: int, n: int, circular: bool) -> int:
    if circular:
        position %= n
        return min((position - reference) % n, (reference - position) % n)
    return abs(position - reference)
