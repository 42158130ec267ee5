"""`proactive-rl eval` shows progress on a terminal (a pseudo-terminal here) and none in a log (a pipe)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
EPISODES = {"source": "synthetic", "task": "atomic", "num_episodes": 2, "seed": 99, "knobs": {"duration": [10, 10]}}


def _command(tmp_path: Path) -> list[str]:
    config = tmp_path / "eval.yaml"
    config.write_text(json.dumps({"evaluators": [{"type": "prs", "episodes": [EPISODES], "max_new_tokens": 4}]}))
    out = tmp_path / "out"
    return [sys.executable, "-m", "proactive_rl.cli", "eval", "--config", str(config), "--model", "tiny:qwen2_5_vl:xs"] + [
        "--out", str(out), "--no-plots"
    ]  # fmt: skip


def _on_a_terminal(cmd: list[str], timeout: float = 600) -> list[tuple[float, str]]:
    """``(seconds since start, text)`` of everything the command wrote to its terminal, in order."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 0 columns: tqdm draws nothing
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    try:
        while time.monotonic() - start < timeout:
            try:
                data = os.read(leader, 4096)
            except OSError:  # the terminal closed: the command ended
                break
            if not data:
                break
            chunks.append((time.monotonic() - start, data.decode(errors="replace")))
        proc.wait(timeout=60)
    finally:
        proc.kill()
        os.close(leader)
    assert proc.returncode == 0, "".join(text for _, text in chunks)[-3000:]
    return chunks


def test_progress_on_a_terminal_before_the_evaluation_ends(tmp_path):
    chunks = _on_a_terminal(_command(tmp_path))
    text = "".join(t for _, t in chunks)
    # first words: what it loads and evaluates; then the evaluator's bar (0/2 episodes, then 2/2); then the table
    start = text.index("proactive-rl eval: starting")
    loading = text.index("proactive-rl eval: loading tiny:qwen2_5_vl:xs, then evaluating it with prs")
    bar = text.index("eval: prs:")
    assert "2/2" in text[bar:] and "episode" in text[bar:]
    assert start < loading < bar < text.index("results (every metric")
    seconds = next(s for s, t in chunks if "starting" in t)
    print(f"first line after {seconds:.1f} s")  # the interpreter's start-up on this machine


def test_no_progress_bars_in_a_log(tmp_path):
    proc = subprocess.run(_command(tmp_path), cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "proactive-rl eval:" not in proc.stderr and "eval: prs:" not in proc.stderr + proc.stdout
    assert "results (every metric" in proc.stdout
