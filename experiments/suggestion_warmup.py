"""Warm-start a suggestion recipe's model on its synthetic training environments, then save it (the sweep's shared
start). The same warm start as the trainer's (`recipe_warm_start`), without the recipe's replay; 100 steps when the
recipe sets ``warm_start_steps: 0``.

python -m experiments.suggestion_warmup --config recipes/tiny/grpo_suggestion.yaml --output_dir outputs/warm
"""

from __future__ import annotations

import logging
import sys

from proactive_rl.grpo.suggestion.main import load_policy, make_parser, recipe_warm_start

logger = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    """Warm-start the recipe's model on its training environments and save it to ``--output_dir``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    script_args, training_args, model_args = make_parser().parse_args_and_config(argv)
    model, processor = load_policy(model_args, seed=training_args.seed)
    script_args.warm_start_steps = script_args.warm_start_steps or 100
    recipe_warm_start(model, processor, script_args, seed=training_args.seed)
    model.save_pretrained(training_args.output_dir)
    processor.save_pretrained(training_args.output_dir)
    logger.info("warm-started model saved to %s", training_args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
