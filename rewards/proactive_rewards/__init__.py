"""proactive_rewards: temporal-decay, PRS and task rewards for proactive assistants (stdlib only).

Plain functions score one trajectory (docs/spec.md §4, §7); :func:`get_reward` wraps them as named TRL reward
functions ``(completions, **dataset_columns) -> list[float | None]`` (column formats: `proactive_rewards.trl`).
The task table (:func:`register_task`, :func:`get_task`) says how each streaming task is validated, scored and
trained.
"""

from proactive_rewards.format import state_format_reward
from proactive_rewards.parsing import (
    RESPONSE_TOKEN,
    SILENCE_TOKEN,
    Turn,
    classify_turn,
    exact_match,
    normalize_text,
    outputs_of,
    parse_int,
    parse_mcqa_answer,
    parse_turns,
    responses_of,
    token_f1,
)
from proactive_rewards.registry import (
    get_reward,
    list_content_scorers,
    list_rewards,
    register_content_scorer,
    register_reward,
    task_rewards,
)
from proactive_rewards.suggestion import proactive_suggestion_reward
from proactive_rewards.task_table import (
    BUILTIN_TASKS,
    CONTENT_RULES,
    TaskSpec,
    get_task,
    list_tasks,
    load_tasks,
    register_task,
)
from proactive_rewards.tasks import (
    LAMBDA,
    accident_reward,
    compositional_reward,
    count_reward,
    intervention_reward,
)
from proactive_rewards.temporal import (
    ALPHA,
    PRSResult,
    TargetResult,
    distance,
    match_bidirectional,
    match_unidirectional,
    prs_score,
    temporal_score,
)
from proactive_rewards.trl import RewardFunction, RewardSpec
from proactive_rewards.types import Response, Target, as_response, as_target

__all__ = [
    "ALPHA",
    "BUILTIN_TASKS",
    "CONTENT_RULES",
    "LAMBDA",
    "RESPONSE_TOKEN",
    "SILENCE_TOKEN",
    "PRSResult",
    "Response",
    "RewardFunction",
    "RewardSpec",
    "Target",
    "TaskSpec",
    "TargetResult",
    "Turn",
    "accident_reward",
    "as_response",
    "as_target",
    "classify_turn",
    "compositional_reward",
    "count_reward",
    "distance",
    "exact_match",
    "get_reward",
    "get_task",
    "intervention_reward",
    "list_content_scorers",
    "list_rewards",
    "list_tasks",
    "load_tasks",
    "task_rewards",
    "match_bidirectional",
    "match_unidirectional",
    "normalize_text",
    "outputs_of",
    "parse_int",
    "parse_mcqa_answer",
    "parse_turns",
    "proactive_suggestion_reward",
    "prs_score",
    "register_content_scorer",
    "register_reward",
    "register_task",
    "responses_of",
    "state_format_reward",
    "temporal_score",
    "token_f1",
]
