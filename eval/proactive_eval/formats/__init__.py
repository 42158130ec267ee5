"""Converters from the public formats to episodes (docs/spec.md §1): ProactiveVideoQA, P³I-style JSON, ProactiveBench."""

from proactive_eval.formats.p3i import convert_p3i
from proactive_eval.formats.paths import missing_media, rebase_episodes, rebase_proactivebench
from proactive_eval.formats.proactivebench import ProactiveBenchRecord, load_proactivebench, save_proactivebench
from proactive_eval.formats.pvqa import convert_pvqa

__all__ = [
    "ProactiveBenchRecord",
    "convert_p3i",
    "convert_pvqa",
    "load_proactivebench",
    "missing_media",
    "rebase_episodes",
    "rebase_proactivebench",
    "save_proactivebench",
]
