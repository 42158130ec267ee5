"""verl's custom reward entry point: ``compute_score(data_source, solution_str, ground_truth, extra_info)``.

Point verl at it (``custom_reward_function.path=<site-packages>/proactive_rewards/verl.py``,
``custom_reward_function.name=compute_score``; reward parameters in ``custom_reward_function.reward_kwargs``). A
dataset row carries what the TRL columns carry (docs/rewards.md "verl" has a full row):

- ``data_source``: the task (``accident``, ``atomic``, ``event_type``, ``compositional``, ``intervention``,
  ``proactive_suggestion``), unless ``extra_info["task"]`` names it;
- ``reward_model.ground_truth`` (verl passes it as `ground_truth`): the targets of the rollout window (a list of
  ``{"time", "text", "window"}``, or that list as a JSON string), or the correct category for
  ``proactive_suggestion``; ``extra_info["targets"]`` / ``extra_info["answer"]`` win when present;
- ``extra_info``: ``times`` (decision time of each assistant turn, optional), and ``options``,
  ``valid_actions`` for ``proactive_suggestion``.

`solution_str` is the decoded response: the assistant turns of a multi-turn rollout with the user (frame) turns
between them, as verl decodes it (`proactive_rewards.adapters.split_transcript`), or a plain completion.
"""

from __future__ import annotations

import json

from proactive_rewards.adapters import SampleError, score_sample


def compute_score(data_source, solution_str, ground_truth=None, extra_info=None, **params) -> float:
    """The TRL reward of one verl sample (see the module docstring); raises `SampleError` naming a bad field.

    Example:

    >>> compute_score("accident", "</Silence>\\nuser\\n<t=40.2s>\\nassistant\\n</Response> Warning",
    ...               [{"time": 18.867, "text": "Warning"}])
    0.3441...
    """
    extra = dict(extra_info or {})
    if not isinstance(extra_info, (dict, type(None))):
        raise SampleError("extra_info", f"expected a dict, got {type(extra_info).__name__}")
    task = extra.get("task") or data_source
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith(("[", "{")):
        try:
            ground_truth = json.loads(ground_truth)
        except json.JSONDecodeError as err:
            raise SampleError("ground_truth", f"not valid JSON ({err})") from None
    field = "answer" if task == "proactive_suggestion" else "targets"
    if ground_truth is not None:
        extra.setdefault(field, ground_truth)
    return score_sample(task, solution_str, extra, params)
