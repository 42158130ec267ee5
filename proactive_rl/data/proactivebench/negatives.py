"""Hard-negative category options for the MS-COCO environment (ProactiveBench App. A.7; docs/spec.md §6).

The paper scores the similarity of the ground-truth category with every other one with the CLIP text encoder
and offers the most similar as wrong options. `NegativeMiner` does that when it is given a CLIP model (a local
folder or a hub id that `transformers.CLIPModel` can load): cosine similarity of the text features of
``"a photo of a <name>."``.

Fallback when no CLIP model is given (``clip_model=None``): a lexical score, the Jaccard similarity of the
names' character trigrams plus 1 when both share a COCO supercategory (``cat`` / ``dog`` are both ``animal``).
It is cheaper and cruder than CLIP (it knows nothing of meaning outside the supercategory), so a training set
built with it says so in its manifest (``negatives: lexical``). A CLIP model that is named but cannot be loaded
is an error, not a silent fallback. Ties are broken by name, so both miners are deterministic.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

logger = logging.getLogger(__name__)


def trigrams(name: str) -> set[str]:
    text = f"  {name.lower()} "
    return {text[i : i + 3] for i in range(len(text) - 2)}


def lexical_similarity(names: Sequence[str], supercategories: Sequence[str] | None = None) -> np.ndarray:
    """``N×N``: trigram Jaccard of the names, plus 1 for a shared supercategory (the documented fallback).

    >>> s = lexical_similarity(["red circle", "red square", "blue square"], ["circle", "square", "square"])  # 4/18, 6/17 + 1
    >>> [round(float(x), 2) for x in s[1]]
    [0.22, 2.0, 1.35]
    """
    grams = [trigrams(n) for n in names]
    sims = np.array([[len(a & b) / len(a | b) for b in grams] for a in grams], dtype=np.float64)
    if supercategories is not None:
        sup = np.asarray(supercategories, dtype=object)
        sims += (sup[:, None] == sup[None, :]).astype(np.float64)
    return sims


def clip_similarity(names: Sequence[str], clip_model: str) -> np.ndarray:
    """``N×N`` cosine similarity of CLIP text features of ``"a photo of a <name>."``."""
    # deferred: keeps torch/transformers out of light import paths
    import torch
    from transformers import AutoTokenizer, CLIPModel

    try:
        model = CLIPModel.from_pretrained(clip_model).eval()
        tokenizer = AutoTokenizer.from_pretrained(clip_model)
    except OSError as err:
        raise ValueError(
            f"clip_model {clip_model!r} cannot be loaded ({err}); omit it for the lexical miner"
        ) from None
    inputs = tokenizer([f"a photo of a {n}." for n in names], padding=True, return_tensors="pt")
    with torch.no_grad():
        features = model.get_text_features(**inputs)
    features = getattr(features, "pooler_output", features)
    features = torch.nn.functional.normalize(features.float(), dim=-1)
    return (features @ features.T).numpy().astype(np.float64)


class NegativeMiner:
    """The most similar other categories of each category (see the module docstring).

    Args:
        names (`Sequence[str]`): every category name.
        supercategories (`Sequence[str]`, *optional*): their COCO supercategories (the lexical fallback uses them).
        clip_model (`str`, *optional*): a CLIP model for the paper's miner; `None` uses the lexical fallback.
    """

    def __init__(
        self, names: Sequence[str], supercategories: Sequence[str] | None = None, clip_model: str | None = None
    ):
        self.names = list(names)
        if len(set(self.names)) != len(self.names):
            raise ValueError("category names must be distinct")
        self.method = "clip" if clip_model else "lexical"
        if clip_model:
            self.similarity = clip_similarity(self.names, clip_model)
        else:
            self.similarity = lexical_similarity(self.names, supercategories)
        logger.info("hard negatives: %s miner over %d categories", self.method, len(self.names))

    def negatives(self, name: str, k: int = 3) -> list[str]:
        """The `k` other categories most similar to `name` (ties by name)."""
        if len(self.names) <= k:
            raise ValueError(f"need more than {k} categories for {k} negatives, got {len(self.names)}")
        row = self.similarity[self.names.index(name)]
        others = [(-row[j], other) for j, other in enumerate(self.names) if other != name]
        return [other for _, other in sorted(others)[:k]]
