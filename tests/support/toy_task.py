"""A user's streaming task, outside the library: what docs/architecture.md "A new streaming task" asks for.

A toy alarm task scored by the accident reward, whose targets are free text (token-F1 in PRS) and whose rollout
windows keep the whole history (as the count tasks do). `tests/test_toy_task.py` names it by import path.
"""

from proactive_rewards import TaskSpec

TOY = TaskSpec("toy_alarm", reward="accident", content="free_text", history_from_start=True, penalized=True)
