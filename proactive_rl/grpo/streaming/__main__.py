"""``python -m proactive_rl.grpo.streaming --config RECIPE.yaml [--field value ...]``."""

import sys

from proactive_rl.grpo.streaming.main import train_main

sys.exit(train_main())
