"""``python -m proactive_rl.sft --config RECIPE.yaml [--field value ...]`` (the same as ``proactive-rl train``)."""

import sys

from proactive_rl.sft.main import train_main

sys.exit(train_main())
