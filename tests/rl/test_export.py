"""Export to real files: mp4 round trip, episodes JSON, ProactiveBench JSONL, splits, reuse, CLI, determinism."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from proactive_eval.benchmarks.proactivebench.environments import (
    load_environments,
    proactivebench_summary,
    run_environment,
)
from proactive_eval.benchmarks.proactivebench.format import load_proactivebench
from proactive_eval.episodes import TASKS, load_episodes
from proactive_eval.streaming import run_episode
from proactive_eval.video import iter_frames, sample_times
from proactive_rewards import prs_score
from proactive_rl.cli import main
from proactive_rl.synthetic import KINDS, OraclePolicy, generate_episodes, make_environments, render_frames
from proactive_rl.synthetic.export import SPLITS, export_dataset, split_seed

PSNR_FLOOR_DB = 25.0  # measured floor ~26.7 dB at 64 px: yuv420p halves the chroma resolution of sharp colour edges


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    result = export_dataset(out, TASKS, 3, seed=4, env_kinds=KINDS, n_envs=3, fractions=(1, 1, 1), progress=False)
    return out, result


def test_layout_splits_and_validation(dataset):
    out, result = dataset
    ids = {}
    for split in SPLITS:
        episodes = load_episodes(out / split / "episodes.json")  # validates every record
        assert len(episodes) == len(TASKS)  # 3 episodes per task over 3 splits = 1 each
        for episode in episodes:
            assert episode.video == f"videos/{episode.id}.mp4" and episode.video_path().is_file()
            assert f"_s{split_seed(4, split)}_" in episode.id
        ids[split] = {e.id for e in episodes}
        for kind in KINDS:
            assert (out / split / "environments" / f"{kind}.jsonl").is_file()
    assert not (ids["train"] & ids["validation"]) and not (ids["train"] & ids["test"])
    assert result["written"] > 0 and result["reused"] == 0


def test_mp4_round_trip_matches_the_generator_and_targets_line_up(dataset):
    out, _ = dataset
    floor = float("inf")
    for split in SPLITS:
        for episode in load_episodes(out / split / "episodes.json"):
            generated = render_frames(episode)  # from meta["scene"], as in memory
            decoded = list(iter_frames(episode))  # from the mp4 at 1 FPS
            assert [t for t, _ in decoded] == [t for t, _ in generated] == sample_times(episode.duration, 1.0)
            scores = [psnr(a, b) for (_, a), (_, b) in zip(generated, decoded)]
            floor = min(floor, min(scores))
            # Each target's frame decodes closer to the generator's frame at that time than to its neighbours'.
            for target in episode.targets:
                k = int(round(target.time))
                for j in (k - 1, k + 1):
                    if 0 <= j < len(generated) and not np.array_equal(generated[j][1], generated[k][1]):
                        assert psnr(decoded[k][1], generated[k][1]) > psnr(decoded[k][1], generated[j][1])
            # The oracle streamed over the decoded video scores like it does in memory.
            responses = run_episode(OraclePolicy(), episode)  # default frame source: the video file
            assert prs_score(responses, episode.targets, mode="B").score >= 0.95
    print(f"mp4 round trip PSNR floor: {floor:.2f} dB")
    assert floor >= PSNR_FLOOR_DB


def test_environment_jsonl_is_read_by_the_public_loaders(dataset):
    out, _ = dataset
    for split in SPLITS:
        for kind in KINDS:
            path = out / split / "environments" / f"{kind}.jsonl"
            records = load_proactivebench(path)  # the format validator
            assert records and all(r.reference_image for r in records)
            rule = json.loads(path.read_text().splitlines()[0])["dataset_rule"]
            envs = load_environments(path, rule, protocol="unfiltered")
            memory = {e.id: e for e in make_environments(kind, 1, split_seed(4, split))}
            needed = {e.id: json.loads(line)["steps_needed"] for e, line in zip(envs, path.read_text().splitlines())}

            def oracle(obs, needed_steps):
                if obs.step < needed_steps:
                    return obs.valid_actions[0]
                return None

            outcomes = []
            for env in envs:
                steps = needed[env.id]
                answer = memory[env.id].answer
                outcomes.append(run_environment(env, lambda obs, s=steps, a=answer: oracle(obs, s) or a))
                # Images read back from PNG equal the in-memory ones (lossless).
                obs = env.reset()
                assert np.array_equal(obs.image, memory[env.id].images[memory[env.id].first_image])
            summary = proactivebench_summary(outcomes)
            assert summary["acc"] == 100.0 and summary["ps"] == pytest.approx(np.mean(list(needed.values())))
            abstain = [
                run_environment(env, lambda obs: next(o for o in obs.options if "not" in o or "cannot" in o))
                for env in envs
            ]
            assert proactivebench_summary(abstain)["acc"] == 0.0


@pytest.mark.parametrize("kind", KINDS)
def test_loaded_environments_behave_like_the_in_memory_ones(tmp_path, kind):
    from proactive_rl.synthetic.export import export_environments

    envs = make_environments(kind, 4, seed=1)
    export_environments(tmp_path, kind, envs)
    rule = json.loads((tmp_path / f"{kind}.jsonl").read_text().splitlines()[0])["dataset_rule"]
    loaded = load_environments(tmp_path / f"{kind}.jsonl", rule, protocol="unfiltered")
    rng = np.random.default_rng(0)
    for mem, disk in zip(envs, loaded):
        for _ in range(5):  # random answers: every outcome sequence must agree
            a, b = mem.reset(), disk.reset()
            while True:
                assert a.options == b.options and sorted(a.valid_actions) == sorted(b.valid_actions)
                assert np.array_equal(a.image, b.image)
                answer = (
                    a.options[int(rng.integers(len(a.options)))] if rng.random() < 0.7 else a.valid_actions[:1] or "x"
                )
                answer = answer if isinstance(answer, str) else answer[0]
                ra, rb = mem.step(answer), disk.step(answer)
                assert (ra.outcome, ra.done) == (rb.outcome, rb.done), (mem.id, answer)
                if ra.done:
                    break
                a, b = ra.observation, rb.observation


def test_rerun_reuses_files_and_other_arguments_are_refused(tmp_path):
    kwargs = dict(env_kinds=("sketch",), n_envs=3, progress=False)
    first = export_dataset(tmp_path, ("atomic",), 3, seed=1, **kwargs)
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    again = export_dataset(tmp_path, ("atomic",), 3, seed=1, **kwargs)
    assert again["reused_folder"] and again["written"] == 0 and again["reused"] == first["written"]
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file() and p.name != "manifest.json"} == {
        p: s for p, s in stamps.items() if p.name != "manifest.json"
    }
    with pytest.raises(ValueError, match="seed"):
        export_dataset(tmp_path, ("atomic",), 3, seed=2, **kwargs)
    forced = export_dataset(tmp_path, ("atomic",), 3, seed=2, overwrite=True, **kwargs)
    assert forced["written"] > 0 and forced["reused"] == 0


def test_exported_episodes_json_equals_generated_ones_plus_video(dataset):
    out, _ = dataset
    loaded = {e.id: e for e in load_episodes(out / "test" / "episodes.json")}
    for task in TASKS:
        (episode,) = generate_episodes(task, 1, split_seed(4, "test"))
        record = loaded[episode.id].to_dict()
        assert record.pop("video") == f"videos/{episode.id}.mp4"
        assert record == episode.to_dict()


def test_cli_synth_writes_then_reuses(tmp_path, capsys):
    args = [
        "synth",
        "--out",
        str(tmp_path),
        "--tasks",
        "object,pvqa",
        "--n",
        "3",
        "--envs",
        "zoom_out",
        "--no-progress",
    ]
    assert main(args) == 0
    assert "files written" in capsys.readouterr().out
    assert main(args) == 0
    assert "reusing existing files" in capsys.readouterr().out
    assert len(load_episodes(tmp_path / "train" / "episodes.json")) == 2
    assert main(["synth", "--out", str(tmp_path), "--tasks", "bogus"]) == 2  # one line naming the valid tasks
    assert "--tasks: unknown bogus;" in capsys.readouterr().err
    assert main(["synth", "--out", str(tmp_path), "--tasks", "object", "--no-progress"]) == 2  # other arguments
    assert "other arguments" in capsys.readouterr().err


@pytest.mark.parametrize(
    "sizes, expected",
    [
        (["--n", "1"], {"train": (1, 1), "validation": (0, 0), "test": (0, 0)}),
        (["--n", "2"], {"train": (2, 2), "validation": (0, 0), "test": (0, 0)}),
        (["--n", "3", "--n-envs", "1"], {"train": (1, 1), "validation": (1, 0), "test": (1, 0)}),
    ],
)
def test_cli_synth_tiny_worlds_write_loadable_splits(tmp_path, capsys, sizes, expected):
    """Every --n / --n-envs >= 1 works; splits too small to get an item are written empty and said so."""
    args = ["synth", "--out", str(tmp_path), "--tasks", "atomic,accident", "--envs", "occlusion,sketch"]
    assert main(args + sizes + ["--no-progress", "--size", "32", "--duration", "10,12"]) == 0
    printed = capsys.readouterr().out
    for split, (episodes_per_task, envs_per_kind) in expected.items():
        episodes = load_episodes(tmp_path / split / "episodes.json")
        assert len(episodes) == 2 * episodes_per_task and all(e.video_path().is_file() for e in episodes)
        for kind in ("occlusion", "sketch"):
            path = tmp_path / split / "environments" / f"{kind}.jsonl"
            rule = "ROD" if kind == "occlusion" else "QD"
            assert len(load_environments(path, rule, protocol="unfiltered")) == envs_per_kind
        empty = episodes_per_task == 0 or envs_per_kind == 0
        line = next(line for line in printed.splitlines() if line.strip().startswith(f"{split}:"))
        assert ("empty here" in line) == empty


def test_cli_synth_refuses_zero_items(tmp_path, capsys):
    assert main(["synth", "--out", str(tmp_path), "--n", "0", "--no-progress"]) == 2
    assert "n (--n) must be an integer >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["synth", "train", "eval", "demo"])
def test_cli_commands_show_their_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert "usage" in capsys.readouterr().out.lower()


def test_same_arguments_write_byte_identical_files_from_separate_processes(tmp_path):
    """docs/spec.md §10: same arguments and seed, same bytes (mp4s included), whatever the output folder and the
    process (hash randomisation differs per process, so each export runs in its own interpreter)."""
    root = Path(__file__).resolve().parents[2]
    args = ["--tasks", ",".join(TASKS), "--n", "3", "--envs", ",".join(KINDS), "--n-envs", "2"]
    args += ["--seed", "5", "--duration", "10,20", "--no-progress"]
    folders = {}
    for name, hash_seed in (("first", "1"), ("second_folder", "987")):
        out = tmp_path / name
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        cmd = [sys.executable, "-m", "proactive_rl.cli", "synth", "--out", str(out), *args]
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        folders[name] = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    first, second = folders.values()
    assert sorted(first) == sorted(second)
    assert sum(name.endswith(".mp4") for name in first) == 3 * len(TASKS)
    differing = sorted(name for name in first if first[name] != second[name])
    assert differing == [], f"{len(differing)} of {len(first)} files differ: {differing[:10]}"
