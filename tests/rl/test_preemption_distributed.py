"""SIGTERM to one rank of a 2-process streaming GRPO run under DDP (CPU, gloo): both ranks save the step it reached
and exit with the requeue status, and the same launch with ``resume_from_checkpoint="true"`` ends with the
uninterrupted run's weights (`proactive_rl.preemption`: the ranks agree at the end of every step).

The launches are `tests/rl/test_grpo_resume_distributed.py`'s (its script's ``signal`` and ``resume-true``
modes; DDP here, that test runs the script under ZeRO-3). Rank 1 alone is signalled, during step 3 (saves are every
2 steps, so ``checkpoint-3`` can only be the pre-emption's). The launcher reports the workers' status 75 as its own failure; what each rank stopped at is read
from its marker file.
"""

from __future__ import annotations

import pytest
from safetensors.torch import load_file
from test_grpo_resume import TOL, same_logs
from test_grpo_resume_distributed import SCRIPT, run, step_logs

from proactive_rl.checkpoints import missing_parts
from proactive_rl.grpo.resume_state import STATE_FILE


@pytest.mark.distributed
@pytest.mark.slow
def test_ddp_sigterm_on_one_rank_saves_on_both_and_true_resumes_exactly(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    straight = run(script, "streaming", tmp_path / "a", "straight", 29561, None, "ddp.yaml")
    assert straight.returncode == 0, straight.stderr[-6000:]
    stopped = run(script, "streaming", tmp_path / "b", "signal", 29562, None, "ddp.yaml")
    assert stopped.returncode != 0, stopped.stderr[-3000:]  # the launcher's failure for the workers' 75
    # both ranks stopped after step 3 and saved it together (rank 0 was never signalled)
    markers = [tmp_path / "b" / f"preempted_{r}.txt" for r in (0, 1)]
    assert [m.read_text() if m.is_file() else None for m in markers] == ["3", "3"], stopped.stderr[-6000:]
    checkpoint = tmp_path / "b" / "checkpoint-3"
    assert missing_parts(checkpoint, (STATE_FILE,)) is None
    assert (checkpoint / STATE_FILE.format(rank=1)).is_file()
    assert not (tmp_path / "b" / "final").exists() and not list((tmp_path / "b").glob("tmp-*"))
    resumed = run(script, "streaming", tmp_path / "b", "resume-true", 29563, None, "ddp.yaml")
    assert resumed.returncode == 0, resumed.stderr[-6000:]
    assert f"resuming from {checkpoint}" in resumed.stderr

    a = load_file(tmp_path / "a" / "final" / "model.safetensors")
    b = load_file(tmp_path / "b" / "final" / "model.safetensors")
    assert a.keys() == b.keys()
    dw = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    print(f"max |dw| resumed after SIGTERM vs uninterrupted (2 processes, DDP): {dw:.3g}")
    assert dw <= TOL
    same_logs(step_logs(tmp_path / "b", {4}), step_logs(tmp_path / "a", {4}))
    saved = load_file(checkpoint / "model.safetensors")
    moved = max((saved[k].float() - b[k].float()).abs().max().item() for k in saved.keys() & b.keys())
    assert moved > 1e-5, "the weights did not change after the checkpoint: the comparison could not fail"
