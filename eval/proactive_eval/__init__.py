"""proactive_eval: score proactive assistants (PAUC, PRS-U/PRS-B, ProactiveBench) without torch."""

from proactive_eval.episodes import TASKS, Episode, EpisodeError, EpisodeList, UserTurn, load_episodes, save_episodes
from proactive_eval.policy import Observation, StreamingPolicy

__all__ = [
    "TASKS",
    "Episode",
    "EpisodeError",
    "EpisodeList",
    "Observation",
    "StreamingPolicy",
    "UserTurn",
    "load_episodes",
    "save_episodes",
]
