"""What an MCQA environment shows and returns (docs/spec.md §6): shared by `proactive_eval.benchmarks.proactivebench.environments` and
`proactive_eval.benchmarks.proactivebench.coco` (the former re-exports both)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class MCQAObservation:
    """What the policy sees at one MCQA step.

    Args:
        image (`np.ndarray`): the current image, ``H×W×3`` uint8.
        prompt (`str`): the question (with the dataset's pre-prompt and optional hint).
        options (`list[str]`): the lettered options: the actions shown, then the categories.
        valid_actions (`list[str]`): the actions that are valid proactive suggestions now (for rewards / oracles).
        step (`int`): 0-based turn index.
        image_path (`str`, *optional*): where the image came from.
    """

    image: np.ndarray
    prompt: str
    options: list[str]
    valid_actions: list[str]
    step: int
    image_path: str | None = None


@dataclass
class StepResult:
    """The result of one answer: the next observation (`None` when done), the outcome, and whether it ended."""

    observation: MCQAObservation | None
    outcome: str
    done: bool
