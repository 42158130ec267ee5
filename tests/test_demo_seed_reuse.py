"""`proactive-rl demo --seeds N` reuses a seed folder that holds that seed's finished run (same settings, every stage
ok), so a killed multi-seed run resumes at the seed it was on; anything else is run again."""

import json
from dataclasses import replace

from proactive_rl.demo.pipeline import finished_seed
from proactive_rl.demo.plan import TRAINED
from proactive_rl.demo.settings import DemoSettings


def _write(folder, settings, statuses, wall_s=12.5):
    folder.mkdir(parents=True, exist_ok=True)
    stages = [{"key": key, "status": status} for key, status in zip(("untrained", *TRAINED), statuses)]
    summary = {"stages": stages, "settings": settings.as_dict(), "wall_s": wall_s}
    (folder / "demo_results.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")


def test_a_finished_seed_with_the_same_settings_is_reused(tmp_path):
    settings = DemoSettings(seed=1)
    _write(tmp_path / "seed1", settings, ["ok"] * (1 + len(TRAINED)))
    summary = finished_seed(tmp_path / "seed1", settings, TRAINED)
    assert summary is not None and summary["wall_s"] == 12.5


def test_other_settings_a_failed_stage_or_a_broken_file_run_again(tmp_path):
    settings = DemoSettings(seed=1)
    _write(tmp_path / "other", replace(settings, seed=2), ["ok"] * (1 + len(TRAINED)))
    assert finished_seed(tmp_path / "other", settings, TRAINED) is None
    _write(tmp_path / "failed", settings, ["ok", "failed: evaluation: boom"] + ["ok"] * (len(TRAINED) - 1))
    assert finished_seed(tmp_path / "failed", settings, TRAINED) is None
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "demo_results.json").write_text('{"stages": [')
    assert finished_seed(tmp_path / "broken", settings, TRAINED) is None
    assert finished_seed(tmp_path / "missing", settings, TRAINED) is None
    # a stage not selected this time need not have run before
    _write(tmp_path / "partial", settings, ["ok", "not run: not selected (--stages)"] + ["ok"] * (len(TRAINED) - 1))
    assert finished_seed(tmp_path / "partial", settings, TRAINED[1:]) is not None
    assert finished_seed(tmp_path / "partial", settings, TRAINED) is None
