"""Property tests: every reward is total on model output (docs/spec.md §7) and PRS matches a slow reference (docs/spec.md §4).

For arbitrary strings, unicode, empty or enormous completions in every accepted form, NaN/inf/negative
times and unsorted turns, each reward returns one finite float (or `None` on rows of another task) per
completion and never raises. 2,000 examples per reward.
"""

import math
import struct

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from proactive_rewards import Target, get_reward, prs_score

PROPERTY = settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))

# Hypothesis draws a byte string and a unicode string; `_Builder` decodes them into completions in every form
# parse_turns accepts, ground truth and times. Two primitive draws per example keep 2,000 examples per reward
# fast, while shrinking still works (on the bytes).
FLOATS = [0.0, 1.0, 5.0, 18.867, 40.2, 300.0, -1.0, -1e9, 1e308, math.inf, -math.inf, math.nan, 1e-300]
PIECES = [
    "</Silence>",
    "</Response>",
    " Warning",
    "warning!",
    " 1",
    " 02",
    "start",
    "END.",
    "<t=",
    "s>",
    " ",
    "\n",
    "</response>",
    "<t=nans>",
    "<t=-3.5s>",
    "<t=1e400s>",
    "A.",
    "dog",
    "stop the car",
    "\u0301",
    "\U0001f600",
]
LABELS = ["Warning", "1", "2", "start", "end", "stop the car", ""]
TASKS = ["accident", "atomic", "event_type", "compositional", "intervention", "pvqa", None]
GARBAGE = [None, 42, 3.5, [None, 1], {"role": "assistant"}, {"role": "assistant", "content": 7}, b"</Silence>"]


class _Builder:
    def __init__(self, data: bytes, free: str):
        self.data, self.i, self.free = data, 0, free

    def byte(self) -> int:
        self.i += 1
        return self.data[self.i - 1] if self.i <= len(self.data) else 0

    def pick(self, pool):
        return pool[self.byte() % len(pool)]

    def float(self) -> float:
        if self.byte() < 200:
            return self.pick(FLOATS)
        return struct.unpack("<d", bytes(self.byte() for _ in range(8)))[0]  # any double, NaN payloads included

    def time(self):
        k = self.byte() % 8
        return self.float() if k < 6 else ["x", None][k - 6]

    def text(self) -> str:
        parts = []
        for _ in range(self.byte() % 16):
            k = self.byte() % 10
            if k < 3:  # a well-formed timed turn, so the scoring branches (not only the error paths) run
                parts.append(f"<t={self.float()}s></Response> {self.pick(LABELS)}")
            else:
                parts.append(self.free if k == 3 else f"<t={self.float()}s>" if k == 4 else self.pick(PIECES))
        return "".join(parts)

    def message(self) -> dict:
        role = self.pick(["assistant", "assistant", "user", "system", "tool"])
        k = self.byte() % 4
        content = [self.text(), [{"type": "text", "text": self.text()}, {"type": "image"}], None, self.free][k]
        m = {"role": role, "content": content}
        if self.byte() % 3 == 0:
            m["time"] = self.time()
        return m

    def completion(self):
        n = self.byte() % 10
        form = self.byte() % 8
        if form == 0:
            return self.text()
        if form == 1:
            return self.free
        if form == 2:
            return [self.message() for _ in range(n)]
        if form == 3:
            return [self.text() for _ in range(n)]
        if form == 4:
            return [(self.float(), self.text()) for _ in range(n)]
        if form == 5:
            return [{"time": self.time(), "text": self.text()} for _ in range(n)]
        if form == 6:
            return self.pick(GARBAGE)
        return [
            self.pick([self.text(), self.message(), self.pick(GARBAGE), (self.float(), self.free)]) for _ in range(n)
        ]

    def times(self):
        k = self.byte() % 3
        return None if k == 0 else [self.time() for _ in range(self.byte() % 12)]

    def targets(self) -> list:
        out = []
        for _ in range(self.byte() % 5):
            g = {"time": self.float(), "text": self.pick(LABELS + [self.free])}
            if self.byte() % 2:
                g["window"] = [self.float(), self.float()] if self.byte() % 4 else None
            out.append(g)
        return out

    def rows(self) -> list:
        return [
            (self.completion(), self.targets(), self.times(), self.pick(TASKS)) for _ in range(1 + self.byte() % 3)
        ]


seeds = st.tuples(st.binary(max_size=160), st.text(max_size=12))

HUGE = [
    "</Response> 1" * 20000,
    "x" * 1_000_000,
    "<t=1.0s>" * 30000,
    "\U0001f600\u0301" * 50000,
    "9" * 10000,
    [{"role": "assistant", "content": "</Silence>" * 20000}],
]

TASK_OF = {
    "accident": {"accident"},
    "count": {"atomic", "event_type"},
    "compositional": {"compositional"},
    "intervention": {"intervention"},
}


def _check(name, batch):
    completions = [r[0] for r in batch]
    columns = {"targets": [r[1] for r in batch], "times": [r[2] for r in batch], "task": [r[3] for r in batch]}
    out = get_reward(name)(completions, **columns)
    assert len(out) == len(batch)
    for value, r in zip(out, batch):
        if r[3] in TASK_OF[name]:
            assert isinstance(value, float) and math.isfinite(value), (value, r)
        else:
            assert value is None
    # Every row, whatever its task, with the components used for logging.
    for parts in get_reward(name, tasks=["*"], components=True)(completions, **columns):
        assert all(math.isfinite(v) for v in parts.values())


def _property(name):
    huge = [(h, [{"time": 5.0, "text": "1"}], [math.nan, -1.0], next(iter(TASK_OF[name]))) for h in HUGE]

    @PROPERTY
    @given(seeds)
    @example(None)
    def test(seed):
        _check(name, huge if seed is None else _Builder(*seed).rows())

    test.__name__ = f"test_{name}_total"
    return test


test_accident_total = _property("accident")
test_count_total = _property("count")
test_compositional_total = _property("compositional")
test_intervention_total = _property("intervention")


@PROPERTY
@given(seeds)
@example(None)
def test_state_format_total(seed):
    batch = [(h, None) for h in HUGE] if seed is None else [(c, t) for c, _, t, _ in _Builder(*seed).rows()]
    out = get_reward("state_format")([c for c, _ in batch], times=[t for _, t in batch])
    assert len(out) == len(batch) and all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in out)


OPTIONS = ["Move the object.", "I do not know.", "cat", "dog"]


@PROPERTY
@given(seeds, st.sampled_from([0.5, 0.75, 1.0]))
@example(None, 0.5)
def test_proactive_suggestion_total(seed, r_p):
    if seed is None:
        batch = [(h, ["a", "b"], "b", None) for h in HUGE]
    else:
        b = _Builder(*seed)

        def options():
            return [b.pick(OPTIONS + [b.free, b.text()]) for _ in range(b.byte() % 8)]

        batch = [
            (c, options(), b.pick(["dog", "cat", 2, -1, 99, b.free]), b.pick([None, options(), OPTIONS[:1]]))
            for c, *_ in b.rows()
        ]
    reward = get_reward("proactive_suggestion", r_p=r_p)
    out = reward(
        [x[0] for x in batch],
        options=[x[1] for x in batch],
        answer=[x[2] for x in batch],
        valid_actions=[x[3] for x in batch],
    )
    assert len(out) == len(batch) and all(v in (0.0, r_p, 1.0) for v in out)


# --- PRS against an independent, slow reference (finite times only) -----------------------------------------

finite = st.floats(-50, 400, allow_nan=False)
# a target time below 0 is broken ground truth that earns nothing (tests/rewards/test_temporal.py): the reference
# is spec §4 for the targets a stream can have
target_time = st.floats(0, 400, allow_nan=False)
labels = st.sampled_from(["1", "2", "3"])


def reference_prs(responses, targets, mode, alpha=0.05, redundancy=True):
    """docs/spec.md §4 written out directly: a different loop structure from the library's."""
    targets = sorted(targets, key=lambda g: g.time)
    if not targets:
        return 0.0
    groups = {i: [] for i in range(len(targets))}
    for t, text in responses:
        if mode == "B":
            # nearest by distance, ties to the lower index: sort candidates by (distance, index)
            def d(g, t=t):
                if g.window is None:
                    return abs(t - g.time)
                return max(0.0, g.window[0] - t, t - g.window[1])

            i = sorted(range(len(targets)), key=lambda k: (d(targets[k]), k))[0]
            groups[i].append(math.exp(-alpha * d(targets[i])) * (text.strip() == targets[i].text))
        else:
            before = [k for k in range(len(targets)) if targets[k].time <= t]
            if not before:
                groups[0].append(0.0)
            else:
                i = before[-1]
                groups[i].append(math.exp(-alpha * abs(t - targets[i].time)) * (text.strip() == targets[i].text))
    total = 0.0
    for scores in groups.values():
        if scores:
            total += max(scores) / (len(scores) if redundancy else 1)
    return total / len(targets)


windowed = st.tuples(finite, st.floats(0, 20)).map(lambda p: (p[0], p[0] + p[1]))


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.tuples(finite, labels), max_size=12),
    st.lists(st.tuples(target_time, labels, st.one_of(st.none(), windowed)), max_size=5),
    st.sampled_from(["B", "U"]),
    st.booleans(),
)
def test_prs_matches_reference(responses, raw_targets, mode, redundancy):
    tg = [Target(t, y, w if mode == "B" else None) for t, y, w in raw_targets]
    got = prs_score(responses, tg, mode=mode, redundancy=redundancy).score
    assert math.isclose(got, reference_prs(responses, tg, mode, redundancy=redundancy), rel_tol=1e-9, abs_tol=1e-12)
    assert 0.0 <= got <= 1.0
