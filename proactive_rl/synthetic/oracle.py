"""Scripted streaming policies: the oracle (reads the generator's ground truth) and the silent baseline.

The oracle answers ``</Response> <text>`` on the first decision step at or after each target time and
``</Silence>`` otherwise; it is how the tests prove targets sit where the evidence is (it must score
PRS ≈ 100, the silent policy 0; docs/spec.md §4).
"""

from __future__ import annotations

from proactive_eval.policy import Observation

SILENCE = "</Silence>"
RESPONSE = "</Response>"
# Decision times are k / fps; a target "at" a step may carry rounding from the JSON round trip.
_EPS = 1e-6


class OraclePolicy:
    """A `StreamingPolicy` that replies with each target's text at the first step at or after its time.

    Two targets falling before the same step are answered on consecutive steps (one reply per step).
    """

    def __init__(self):
        self._pending: list = []

    def reset(self, episode) -> None:
        self._pending = sorted(episode.targets, key=lambda t: t.time)

    def step(self, observation: Observation) -> str:
        if self._pending and self._pending[0].time <= observation.time + _EPS:
            return f"{RESPONSE} {self._pending.pop(0).text}"
        return SILENCE


class SilentPolicy:
    """A `StreamingPolicy` that never speaks."""

    def reset(self, episode) -> None:
        pass

    def step(self, observation: Observation) -> str:
        return SILENCE
