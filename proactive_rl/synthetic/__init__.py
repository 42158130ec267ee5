"""The embedded default world: procedural streaming episodes and ask-for-help MCQA environments.

Streaming tasks (docs/spec.md §10): `generate_episodes(task, n, seed, **knobs)` builds in-memory episodes for every
P³I task kind; `render_frames(episode)` draws their frames from ``meta["scene"]``; `OraclePolicy` answers from
the ground truth. MCQA environments (docs/spec.md §11): `make_environments(kind, n, seed)` for ``occlusion``,
``corruption``, ``sketch`` and ``zoom_out``. `proactive_rl.synthetic.export` writes them as mp4 + episodes JSON
and ProactiveBench JSONL + images (the `proactive-rl synth` command).
"""

from proactive_rl.synthetic import environments
from proactive_rl.synthetic.generate import episode_seed, generate_episodes, render_frames
from proactive_rl.synthetic.oracle import OraclePolicy, SilentPolicy
from proactive_rl.synthetic.tasks import GENERATORS, Knobs

TASK_KINDS = tuple(GENERATORS)
_LAZY = {"KINDS", "SequenceEnvironment", "abstain_policy", "make_environments", "oracle_policy"}


def __getattr__(name):
    # The environments need proactive_eval.benchmarks.proactivebench.environments; import them only when asked for.
    if name in _LAZY:
        return getattr(environments, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GENERATORS",
    "KINDS",
    "TASK_KINDS",
    "Knobs",
    "OraclePolicy",
    "SequenceEnvironment",
    "SilentPolicy",
    "abstain_policy",
    "episode_seed",
    "generate_episodes",
    "make_environments",
    "oracle_policy",
    "render_frames",
]
