"""`exit_launched`: how every entry point ends (`proactive_rl.evaluation.shutdown`).

In a plain process it only returns the code. Under ``accelerate launch`` (2 CPU processes, gloo, a DDP model as the
SFT trainer has) it must end the process with the code, after the ``atexit`` handlers ran and with buffered output
flushed, and never return. The same run records which gloo threads are still alive at that point: the reason for
the exit without interpreter teardown. If a torch upgrade frees the group on ``destroy_process_group``, that check
fails and says so (the hard exit may then go).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from proactive_rl.evaluation.shutdown import exit_launched
from tests.support.launching import launch

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SCRIPT = r"""
import atexit, json, os, sys
from pathlib import Path
import torch
from accelerate import PartialState
from proactive_rl.evaluation.shutdown import exit_launched

out = Path(sys.argv[1])
state = PartialState(cpu=True)  # gloo on CPU, as the tiny recipes (use_cpu: true)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))
model(torch.ones(2, 4)).sum().backward()

def at_exit():  # runs inside exit_launched, after the group is closed
    threads = [Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in os.listdir("/proc/self/task")]
    (out / f"rank{state.process_index}.json").write_text(json.dumps({"threads": sorted(threads)}))

atexit.register(at_exit)
print(f"rank {state.process_index} buffered, no newline", end="")  # stdout is a pipe: block-buffered
code = exit_launched(3)
print("exit_launched returned", code, flush=True)
"""


def test_plain_process_only_returns_the_code():
    assert exit_launched(0) == 0
    assert exit_launched(5) == 5


@pytest.mark.distributed
def test_launched_process_exits_with_its_code_after_atexit_and_flush(tmp_path):
    script = tmp_path / "end.py"
    script.write_text(SCRIPT)
    cmd = [str(BIN / "accelerate"), "launch", "--config_file", "launch/ddp.yaml", "--num_processes", "2"]
    cmd += ["--main_process_port", "29531", str(script), str(tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = launch(cmd, cwd=ROOT, env=env, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log[-3000:]  # the launcher reports the ranks' code 3 as a failure
    assert "exit_launched returned" not in log  # it never returns under a launch
    assert log.count("exitcode  : 3") == 2, log[-3000:]  # torchrun's report: both ranks left with code 3
    for rank in (0, 1):
        assert f"rank {rank} buffered, no newline" in proc.stdout, log[-3000:]
        threads = json.loads((tmp_path / f"rank{rank}.json").read_text())["threads"]
        assert "pt_gloo_runloop" in threads, (
            f"rank {rank}: no gloo worker thread is alive after destroy_process_group ({threads}); torch now frees "
            "the DDP run's group, so the exit without interpreter teardown in exit_launched may no longer be needed"
        )
