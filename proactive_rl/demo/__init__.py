"""`proactive-rl demo` (``make demo``): the whole product on the embedded default, on a CPU, without downloads.

1. build the tiny model (reused from ``<out>/model`` when built before with the same settings);
2. write the synthetic world to files (``<out>/data``: mp4 + episodes JSON + environment JSONL; reused);
3. evaluate the untrained model: streaming PRS-U / PRS-B per task, PAUC (rule judge), MCQA acc / ps;
4. focal SFT (``recipes/tiny/sft.yaml``) on the multi-task mixture (accident, atomic, compositional, pvqa), evaluate;
5. multi-turn streaming GRPO from the SFT model (``recipes/tiny/grpo_streaming.yaml``) on the three streaming
   tasks, evaluate;
6. proactive-suggestion GRPO on the ask-for-help environments (``recipes/tiny/grpo_suggestion.yaml``) with the
   streaming training episodes replayed (`proactive_rl.grpo.replay`), evaluate: the final model;

then prints the before/after table and which of the expected directions hold (`proactive_rl.demo.checks`), and
writes ``<out>/report/`` (the table in markdown, a metric-by-stage chart,
episode timelines). A stage whose code is missing or that fails is reported in the table as ``not run: <reason>`` /
``failed: <error>`` and the demo goes on with the stages that do not need it. ``--quick`` is a smoke run: it says
so and checks only that every stage ran.

The stages are records (`proactive_rl.demo.plan.STAGES`), the pipeline a loop over them
(`proactive_rl.demo.pipeline`); this package re-exports its entry points.
"""

from proactive_rl.demo.pipeline import add_arguments, run, run_demo
from proactive_rl.demo.plan import STAGES, Stage
from proactive_rl.demo.settings import DemoSettings, quick

__all__ = ["STAGES", "DemoSettings", "Stage", "add_arguments", "quick", "run", "run_demo"]
