"""Malformed outputs (docs/spec.md §13): counted in every report, and a warning when most of a model's are.

A malformed output broke the state-token protocol: PRS counts it and credits it 0, PAUC never shows it to the
judge. A model whose outputs are mostly malformed therefore scores what a silent model scores (PAUC 25), which reads
like a number; the warning says it is not one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from proactive_rewards import as_response


def count_malformed(responses: Iterable) -> tuple[int, int]:
    """``(outputs, malformed outputs)`` of one episode's non-silent outputs."""
    items = [as_response(r) for r in responses]
    return len(items), sum(r.malformed for r in items)


def malformed_warning(row: dict[str, Any], what: str = "the model") -> str | None:
    """A one-line warning when most of the outputs a summary row counts (``outputs``, ``malformed_outputs``) are
    malformed, else `None`."""
    outputs, malformed = row.get("outputs") or 0, row.get("malformed_outputs") or 0
    if not outputs or 2 * malformed <= outputs:
        return None
    return (
        f"warning: {malformed} of {outputs} outputs of {what} are malformed (not </Silence> or </Response> + text, "
        "docs/spec.md §13), so its scores are those of a silent model; check its chat template and turn format"
    )
