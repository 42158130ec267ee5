"""``python -m proactive_rl.grpo.suggestion --config RECIPE.yaml [--field value ...]``."""

import sys

from proactive_rl.grpo.suggestion.main import train_main

sys.exit(train_main())
