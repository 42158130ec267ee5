"""One generator per P³I task kind (docs/spec.md §10): ``make(rng, knobs, steps) -> Scenario``.

`GENERATORS` is keyed by the names of the task table (`proactive_rewards.task_table`), which says how each task's
episodes are validated, scored and trained; a generator for a task that is not in the table fails at import.
"""

from proactive_rewards.task_table import get_task
from proactive_rl.synthetic.tasks.common import Knobs, Scenario
from proactive_rl.synthetic.tasks.counting import make_atomic, make_event_type
from proactive_rl.synthetic.tasks.process import make_compositional, make_intervention
from proactive_rl.synthetic.tasks.safety import make_accident, make_crime
from proactive_rl.synthetic.tasks.tracking import make_object, make_pvqa

GENERATORS = {
    "accident": make_accident,
    "crime": make_crime,
    "atomic": make_atomic,
    "event_type": make_event_type,
    "compositional": make_compositional,
    "object": make_object,
    "intervention": make_intervention,
    "pvqa": make_pvqa,
}
for _task in GENERATORS:
    get_task(_task)

__all__ = ["GENERATORS", "Knobs", "Scenario"]
