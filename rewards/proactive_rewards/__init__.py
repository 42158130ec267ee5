"""proactive_rewards: temporal-decay, PRS and task rewards for proactive assistants (stdlib only)."""

from proactive_rewards.types import Response, Target, as_response, as_target

__all__ = ["Response", "Target", "as_response", "as_target"]
