"""The task table (`proactive_rewards.task_table`): the built-in rows, duplicates, and the recipe import paths.

The reference for the built-in rows is what the library hard-coded per task before the table (free text:
intervention; history from the video's start: atomic, event_type; the invalid-output penalty: accident and
compositional), written out here by hand.
"""

from __future__ import annotations

import pytest

from proactive_rewards import BUILTIN_TASKS, TaskSpec, get_reward, get_task, list_tasks, load_tasks, register_task
from proactive_rewards.registry import task_rewards

OLD_TASKS = ("accident", "crime", "atomic", "event_type", "compositional", "object", "intervention", "pvqa")


def test_builtin_rows_are_the_former_hard_coded_rules():
    assert BUILTIN_TASKS == OLD_TASKS and list_tasks()[: len(OLD_TASKS)] == list(OLD_TASKS)
    assert [t for t in OLD_TASKS if get_task(t).content == "free_text"] == ["intervention"]
    assert [t for t in OLD_TASKS if get_task(t).history_from_start] == ["atomic", "event_type"]
    assert [t for t in OLD_TASKS if get_task(t).penalized] == ["accident", "compositional"]
    rewards = {t: r for t, r in task_rewards().items() if t in OLD_TASKS}
    assert rewards == {
        "accident": "accident",
        "atomic": "count",
        "event_type": "count",
        "compositional": "compositional",
        "intervention": "intervention",
    }
    # each trajectory reward scores its own tasks' rows only; the others score every row
    assert get_reward("count").tasks >= {"atomic", "event_type"} and "accident" not in get_reward("count").tasks
    assert get_reward("state_format").tasks is None


def test_duplicates_and_bad_specs_are_rejected():
    with pytest.raises(ValueError, match="a task named 'accident' is already registered"):
        register_task(TaskSpec("accident"))
    with pytest.raises(ValueError, match="content: expected one of exact, integer, free_text, got 'fuzzy'"):
        TaskSpec("t_fuzzy", content="fuzzy")
    with pytest.raises(ValueError, match="penalized: a task without a reward"):
        TaskSpec("t_free", penalized=True)
    with pytest.raises(ValueError, match="task 'accident' with the same reward 'accident' has penalized=True"):
        register_task(TaskSpec("t_unpenalized", reward="accident"))
    assert "t_unpenalized" not in list_tasks()
    with pytest.raises(ValueError, match=r"unknown task 'cooking'; expected one of accident, crime, .*register_task"):
        get_task("cooking")


def test_load_tasks_errors_name_the_recipe_key_and_path():
    with pytest.raises(ValueError, match=r"register_tasks: cannot import 'no_such_pkg_xyz\.tasks:SPEC'"):
        load_tasks(["no_such_pkg_xyz.tasks:SPEC"])
    with pytest.raises(
        ValueError, match="eval_callback.register_tasks: 'proactive_rewards:get_task' must name a TaskSpec"
    ):
        load_tasks(["proactive_rewards:get_task"], "eval_callback.register_tasks")
    with pytest.raises(ValueError, match="register_tasks: expected a list of import paths"):
        load_tasks("tests.support.toy_task:TOY")
    assert load_tasks(None) == [] and load_tasks(["proactive_rewards.task_table"]) == []  # already imported
