"""Data: dataset mixtures, SFT examples and their collator, MCQA environment rows, frames of an episode.

- `proactive_rl.data.mixture`: ``dataset_mixture`` sources (episode files, `datasets` sources, ``synthetic``, TRL
  entries), parsed and read.
- `proactive_rl.data.sources`: episodes from a ``save_to_disk`` folder, a folder of data files or a Hub dataset id.
- `proactive_rl.data.lazy`: the SFT data path: episode rows validated and measured without pixels (a cached
  ``Dataset.map``), frames decoded and encoded per batch (`LazyEpisodeCollator`).
- `proactive_rl.data.examples`: the eager path (every episode encoded before the first step); padding.
- `proactive_rl.data.mcqa`: MCQA environments → single-turn prompt rows (the suggestion trainer's and evaluator's).
- `proactive_rl.data.frames`: the frames of an episode (rendered for synthetic episodes, decoded otherwise).
- `proactive_rl.data.proactivebench`: MS-COCO environment records from COCO annotations, hard negatives, and the
  paper's QuickDraw + MS-COCO GRPO training set (``python -m proactive_rl.data.proactivebench.train_set``).
"""

from proactive_rl.data.examples import (
    EpisodeCollator,
    PreparedData,
    as_hf_dataset,
    check_record,
    prepare_examples,
)
from proactive_rl.data.mixture import (
    ON_ERROR,
    DatasetSource,
    apply_weight,
    check_data_arguments,
    load_mixture,
    parse_mixture,
)

__all__ = [
    "ON_ERROR",
    "DatasetSource",
    "EpisodeCollator",
    "PreparedData",
    "apply_weight",
    "as_hf_dataset",
    "check_data_arguments",
    "check_record",
    "load_mixture",
    "parse_mixture",
    "prepare_examples",
]
