"""Evaluate a training run's checkpoints as they appear (`proactive-rl eval --watch OUTPUT_DIR`).

A checkpoint is evaluated once it is *complete*: ``trainer_state.json`` (the Trainer writes it last), a config
and weights are present, and no file in it (its ``eval/`` folder aside) changed size or mtime for `settle_s`
seconds. One whose newest file was modified longer than `settle_s` ago (a run that has finished, a checkpoint minutes
old) is complete when first seen, and evaluated without waiting. Progress is kept in ``<out>/state.json`` (written
atomically after every checkpoint), so a restarted watcher skips what is done, and resumes the checkpoint it was killed in (`proactive_rl.evaluation.resume`: the
items stored under ``<out>/checkpoint-N/`` for the same checkpoint files are not played again). A checkpoint that
cannot be loaded (truncated, corrupt) is reported with the reason and marked ``corrupt``; it is retried only if its
files change. A checkpoint deleted before its turn (checkpoint
rotation) is reported and marked ``missing``. After each checkpoint the leaderboard is rewritten:
``leaderboard.md`` (one row per step, and the blind schedule's row), ``leaderboard.json`` and ``leaderboard.png``
(each metric vs step, with its blind baseline and its value with swapped frames on the same panel).

Under ``accelerate launch`` every process runs the watcher: the main process decides what to evaluate and
broadcasts it, every rank loads the checkpoint and evaluates its shard (`evaluate_model`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proactive_eval.commands.report import pyplot, save_figure
from proactive_eval.predictions import atomic_write_text
from proactive_rl.errors import InputError
from proactive_rl.evaluation.base import Evaluator
from proactive_rl.evaluation.looks import blind_key, is_blind
from proactive_rl.evaluation.run import RESULTS_NAME, evaluate_model

logger = logging.getLogger(__name__)

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "adapter_model.safetensors")
STATE_NAME = "state.json"
DONE = ("ok", "incomplete")


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of every ``checkpoint-N`` folder, by step."""
    run = Path(run_dir)
    found = []
    for path in run.iterdir() if run.is_dir() else []:
        match = CHECKPOINT_RE.match(path.name)
        if match and path.is_dir():
            found.append((int(match.group(1)), path))
    return sorted(found)


def signature(path: Path) -> tuple | None:
    """``(relative path, size, mtime_ns)`` of every file of a checkpoint except its ``eval/`` folder; `None` if the
    folder vanished while being read."""
    try:
        items = []
        for f in sorted(path.rglob("*")):
            rel = f.relative_to(path)
            if rel.parts[0] == "eval" or not f.is_file():
                continue
            st = f.stat()
            items.append((str(rel), st.st_size, st.st_mtime_ns))
        return tuple(items)
    except FileNotFoundError:
        return None


def _digest(sig: tuple) -> str:
    return hashlib.sha256(json.dumps(sig).encode()).hexdigest()[:16]


def _looks_complete(path: Path) -> bool:
    return (
        (path / "trainer_state.json").is_file()
        and (path / "config.json").is_file()
        and any((path / w).is_file() for w in WEIGHTS)
    )


class CheckpointWatcher:
    """Find, evaluate and rank the checkpoints of one training run.

    Args:
        run_dir (`str` or `Path`): the training ``output_dir`` (holding ``checkpoint-N`` folders).
        out_dir (`str` or `Path`): where results, ``state.json`` and the leaderboard go (one folder per checkpoint).
        evaluators (`list[Evaluator]`): what to evaluate (from the recipe's ``eval_callback``).
        load (`Callable[[Path], tuple]`): ``checkpoint path -> (model, processor)`` on this rank's device.
        settle_s (`float`, *optional*, defaults to `10.0`): how long a checkpoint's files must stay unchanged.
        plots (`bool`, *optional*, defaults to `True`): report plots per checkpoint and the leaderboard plot.
        on_result (`Callable[[dict], None]`, *optional*): called on the main process with the results of every
            evaluated checkpoint (e.g. to log them to wandb at the checkpoint's step).
    """

    def __init__(
        self,
        run_dir: str | Path,
        out_dir: str | Path,
        evaluators: list[Evaluator],
        load: Callable[[Path], tuple],
        settle_s: float = 10.0,
        plots: bool = True,
        on_result: Callable[[dict], None] | None = None,
    ):
        self.run_dir, self.out_dir = Path(run_dir), Path(out_dir)
        self.evaluators, self.load = evaluators, load
        self.settle_s, self.plots, self.on_result = float(settle_s), plots, on_result
        self.state = self._read_state()
        self._seen: dict[str, tuple[tuple, float]] = {}  # name -> (signature, when first seen unchanged)

    # --- state ----------------------------------------------------------------------------------------------
    def _read_state(self) -> dict[str, Any]:
        path = self.out_dir / STATE_NAME
        if not path.exists():
            return {"run_dir": str(self.run_dir), "checkpoints": {}}
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise InputError(
                f"{path}: unreadable watcher state ({err}); delete it to re-evaluate everything"
            ) from None

    def _write_state(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.out_dir / STATE_NAME, json.dumps(self.state, indent=1) + "\n")

    # --- discovery (main process) ---------------------------------------------------------------------------
    def pending(self, now: float | None = None) -> list[tuple[int, str, str]]:
        """Checkpoints ready to evaluate now: ``(step, path, signature digest)``; reports vanished ones."""
        now = time.monotonic() if now is None else now
        ready = []
        present = set()
        for step, path in list_checkpoints(self.run_dir):
            present.add(path.name)
            entry = self.state["checkpoints"].get(path.name)
            if entry and entry["status"] in DONE:
                continue
            sig = signature(path)
            if sig is None or not _looks_complete(path):
                self._seen.pop(path.name, None)
                continue
            if entry and entry["status"] == "corrupt" and entry.get("signature") == _digest(sig):
                continue  # already reported; retried only when its files change
            previous = self._seen.get(path.name)
            if previous is None or previous[0] != sig:
                self._seen[path.name] = (sig, now)
                # settle only what was written within the window: a checkpoint whose newest file is older is whole
                newest = max((mtime for _, _, mtime in sig), default=0) / 1e9
                if self.settle_s > 0 and time.time() - newest < self.settle_s:
                    continue
                ready.append((step, str(path), _digest(sig)))
                continue
            if now - self._seen[path.name][1] >= self.settle_s:
                ready.append((step, str(path), _digest(sig)))
        for name in list(self._seen):
            if name not in present:
                del self._seen[name]
                if name not in self.state["checkpoints"]:
                    print(f"{self.run_dir / name}: disappeared before it was evaluated (rotation?)", file=sys.stderr)
                    self.state["checkpoints"][name] = {"step": int(name.split("-")[1]), "status": "missing"}
                    self._write_state()
        return ready

    def finished(self) -> bool:
        """The run has ended (its final ``trainer_state.json``) and every checkpoint has a final status."""
        final = self.run_dir / "trainer_state.json"
        if not final.is_file():
            return False
        try:
            last = json.loads(final.read_text()).get("global_step", 0)
        except (json.JSONDecodeError, OSError):
            return False
        steps = list_checkpoints(self.run_dir)
        if steps and steps[-1][0] > last:
            return False
        return all(p.name in self.state["checkpoints"] for _, p in steps)

    # --- evaluation (every rank) ----------------------------------------------------------------------------
    def evaluate(self, step: int, path: str, digest: str) -> dict[str, Any]:
        """Load and evaluate one checkpoint on every rank; the main process records it. Never raises on a bad
        checkpoint: returns its state entry."""
        # deferred: keeps torch/transformers out of light import paths
        from accelerate import PartialState
        from accelerate.utils import gather_object

        state = PartialState()
        name = Path(path).name
        error = None
        try:
            model, processor = self.load(Path(path))
        except Exception as err:  # a truncated / corrupt checkpoint must not stop the watcher
            error = f"{type(err).__name__}: {err}".strip()
            model = processor = None
        errors = gather_object([error]) if state.num_processes > 1 else [error]
        errors = [e for e in errors if e]
        entry: dict[str, Any] = {"step": step, "path": path, "signature": digest}
        previous = self.state["checkpoints"].get(name, {})
        entry["evaluations"] = previous.get("evaluations", 0)
        if errors:
            entry.update(status="corrupt", error=errors[0].splitlines()[0][:500])
            if state.is_main_process:
                print(
                    f"{path}: cannot be loaded ({entry['error']}); the checkpoint is truncated or corrupt. Skipped and "
                    f"marked corrupt in {self.out_dir / STATE_NAME}; it is retried if its files change.",
                    file=sys.stderr,
                )
        else:
            results = evaluate_model(
                model,
                processor,
                self.evaluators,
                out_dir=self.out_dir / name,  # every rank: each stores the items it finishes as they end
                step=step,
                plots=self.plots,
                meta={"checkpoint": path, "signature": digest},
                resume=True,  # a watcher killed mid-checkpoint plays only what that checkpoint had left
            )
            entry.update(
                status="ok" if results["complete"] else "incomplete",
                evaluations=entry["evaluations"] + 1,
                results=str(Path(name) / RESULTS_NAME),
                metrics=results["metrics"],
                incomplete=results["incomplete"],
                wall_time_s=results["wall_time_s"],
            )
            del model
        if state.is_main_process:
            self._seen.pop(name, None)
            self.state["checkpoints"][name] = entry
            self._write_state()
            self.write_leaderboard()
            if self.on_result is not None and not errors:
                self.on_result(results)
        return entry

    # --- leaderboard ----------------------------------------------------------------------------------------
    def rows(self) -> list[dict[str, Any]]:
        return sorted(self.state["checkpoints"].values(), key=lambda e: e["step"])

    def write_leaderboard(self) -> dict[str, Path]:
        """``leaderboard.md``, ``leaderboard.json`` and (with plots) ``leaderboard.png`` in the output folder."""
        rows = self.rows()
        every = list(dict.fromkeys(k for r in rows for k in r.get("metrics", {})))
        metrics = [k for k in every if not is_blind(k)]  # the blind values get a row of their own
        header = ["step", "status"] + metrics + ["eval s"]
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        for r in rows:
            cells = [str(r["step"]), r["status"]]
            cells += [f"{r['metrics'][m]:.2f}" if m in r.get("metrics", {}) else "–" for m in metrics]
            cells.append(f"{r['wall_time_s']:.1f}" if "wall_time_s" in r else "–")
            lines.append("| " + " | ".join(cells) + " |")
        blind = next((r["metrics"] for r in reversed(rows) if any(map(is_blind, r.get("metrics", {})))), None)
        if blind is not None:  # frame-independent: the same at every step (docs/spec.md §14)
            cells = [f"{blind[blind_key(m)]:.2f}" if blind_key(m) in blind else "–" for m in metrics]
            lines.append("| blind schedule | – | " + " | ".join(cells) + " | – |")
        notes = [f"- step {r['step']}: {r['status']}: {r.get('error', '')}" for r in rows if r["status"] == "corrupt"]
        notes += [
            f"- step {r['step']}: {i['evaluator']} failed ({i['stage']}): {i['error']}"
            for r in rows
            for i in r.get("incomplete", [])
        ]
        text = (
            f"# Leaderboard: {self.run_dir}\n\n"
            + "\n".join(lines)
            + "\n"
            + ("\n" + "\n".join(notes) + "\n" if notes else "")
        )
        written = {"markdown": self.out_dir / "leaderboard.md", "json": self.out_dir / "leaderboard.json"}
        atomic_write_text(written["markdown"], text)
        atomic_write_text(written["json"], json.dumps(rows, indent=1) + "\n")
        if self.plots and metrics:
            shown = [m for m in metrics if not m.endswith(("_swap", "_freeze"))]  # drawn on their metric's panel
            written["plot"] = plot_leaderboard(rows, shown, self.out_dir / "leaderboard.png")
        return written

    def waiting_for(self) -> str:
        """What the watcher waits for, in one line: the folder, the pattern and the checkpoints seen so far."""
        seen = {name: e["status"] for name, e in self.state["checkpoints"].items()}
        seen.update({name: "settling" for name in self._seen if name not in seen})
        shown = ", ".join(f"{n} ({status})" for n, status in sorted(seen.items(), key=lambda x: _step(x[0])))
        return (
            f"watching {self.run_dir} for checkpoint-N folders (trainer_state.json, config.json and weights, "
            f"unchanged for {self.settle_s:g} s); seen: {shown or 'none yet'}"
        )

    # --- loop -----------------------------------------------------------------------------------------------
    def run(
        self, poll_s: float = 30.0, once: bool = False, follow: bool = False, max_idle_s: float | None = None
    ) -> int:
        """Poll until the run is finished (or forever with `follow`); returns how many checkpoints were evaluated.

        Args:
            poll_s (`float`, *optional*, defaults to `30.0`): seconds between scans.
            once (`bool`, *optional*): evaluate what is ready now (waiting `settle_s` only for what was written
                within it) and return.
            follow (`bool`, *optional*): keep watching after the run has finished (stop with Ctrl-C).
            max_idle_s (`float`, *optional*): stop after this long without a new checkpoint to evaluate.
        """
        # deferred: keeps torch/transformers out of light import paths
        from accelerate import PartialState
        from accelerate.utils import broadcast_object_list

        state = PartialState()
        evaluated, last_activity, said = 0, time.monotonic(), None
        while True:
            decision = None
            if state.is_main_process:
                ready = self.pending()
                if not ready and self.waiting_for() != said:  # said again only when what it has seen changes
                    said = self.waiting_for()
                    print(said, file=sys.stderr, flush=True)
                waiting = bool(self._seen)  # a checkpoint seen complete, still settling
                stop = (once and not ready and not waiting) or (not follow and not ready and self.finished())
                if max_idle_s is not None and not ready and time.monotonic() - last_activity > max_idle_s:
                    stop = True
                decision = {"ready": ready, "stop": stop}
            if state.num_processes > 1:
                decision = broadcast_object_list([decision])[0]
            for step, path, digest in decision["ready"]:
                if state.is_main_process:
                    print(f"evaluating {path}", file=sys.stderr, flush=True)
                entry = self.evaluate(step, path, digest)
                evaluated += entry["status"] in DONE
                last_activity = time.monotonic()
            if decision["stop"]:
                return evaluated
            if not decision["ready"]:
                time.sleep(poll_s)


def _step(name: str) -> int:
    match = CHECKPOINT_RE.match(name)
    return int(match.group(1)) if match else -1


def plot_leaderboard(rows: list[dict[str, Any]], metrics: list[str], path: Path) -> Path:
    """One panel per metric: its value against the training step (atomically written PNG)."""
    plt = pyplot()
    n = len(metrics)
    cols = min(3, n)
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 2.8 * nrows), squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        # the metric, and on its panel its blind baseline and its value with swapped frames (docs/spec.md §14)
        for key, style, label in (
            (metric, "o-", None),
            (blind_key(metric), "--", "blind"),
            (f"{metric}_swap", "x:", "swap"),
        ):
            points = [(r["step"], r["metrics"][key]) for r in rows if key in r.get("metrics", {})]
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], style, label=label)
        if len(ax.lines) > 1:
            ax.legend(fontsize=7)
        ax.set_title(metric, fontsize=9)
        ax.set_xlabel("step")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    return save_figure(fig, path)
