"""Reports: markdown tables, results JSON, atomic writes and plots."""

import json

import pytest

from proactive_eval import Episode
from proactive_eval.benchmarks.p3i.metric import score_prs
from proactive_eval.benchmarks.pvqa.metric import score_pauc
from proactive_eval.commands.report import build_results, markdown_report, prs_table, write_report
from proactive_eval.predictions import atomic_write_text
from proactive_rewards import Target


def _data():
    pvqa = Episode(
        id="v",
        task="pvqa",
        duration=30.0,
        instruction="What?",
        targets=[Target(0.0, "gold", (0.0, 10.0), (0.0, 5.0))],
        meta={"question": "What?", "subset": "TV"},
    )
    count = Episode(id="c", task="event_type", duration=30.0, instruction="count", targets=[Target(5.0, "1")])
    preds = {"v": [(2.0, "gold"), (8.0, "noise")], "c": [(5.0, "1"), (6.0, "1")]}
    levels = {"gold": 3, "gold noise": 2}
    pauc = score_pauc([pvqa], {"v": preds["v"]}, lambda q, g, t: levels[t], progress=False)
    prs = score_prs([count], {"c": preds["c"]})
    return [pvqa, count], preds, pauc, prs


def test_markdown_tables_hold_the_numbers():
    episodes, preds, pauc, prs = _data()
    results = build_results(pauc, prs, {"judge": "table"})
    md = markdown_report(results)
    # PAUC: the 8 s point (1) falls after the related end (5 s) below 2 -> dropped: (2*0.5 + 8*2)/20 = 85
    assert "| pvqa:TV | 1/1 | 1 | 1 | 1 | 85.00 |" in md
    # PRS: target 5 gets two responses (none missed, one repeated), best 1.0 -> 50 with the penalty, 100 without;
    # timing only: 50 (words right)
    assert (
        "| event_type | 1/1 | 1 | 50.00 | 50.00 | 100.00 | 100.00 | 50.00 | 2.00 | 2.00 | 0 | 1 | 0.00 | 0 | exact_match |"
        in md
    )
    assert "- judge: `table`" in md
    assert prs_table(results["prs"]).count("\n") == 3  # header, rule, one task, overall


def test_write_report_files(tmp_path):
    episodes, preds, pauc, prs = _data()
    results = build_results(pauc, prs, {})
    written = write_report(tmp_path / "r", results, pauc=pauc, prs=prs, episodes=episodes, predictions=preds)
    assert set(written) == {
        "results",
        "report",
        "pauc_turns",
        "prs_episodes",
        "pauc_curves",
        "timelines",
        "responses_per_target",
    }
    assert json.loads(written["results"].read_text())["pauc"]["overall"]["omega=0"] == pytest.approx(85.0)
    (turn,) = [json.loads(x) for x in written["pauc_turns"].read_text().splitlines()]
    assert turn["points"] == [[2.0, 2]] and turn["dropped_related"] == 1
    for key in ("pauc_curves", "timelines", "responses_per_target"):
        assert written[key].read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in (tmp_path / "r").iterdir() if p.name.startswith(".")) == []


def test_no_plots(tmp_path):
    episodes, preds, pauc, prs = _data()
    written = write_report(tmp_path, build_results(pauc, None), pauc=pauc, plots=False)
    assert set(written) == {"results", "report", "pauc_turns"}


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    path = tmp_path / "results.json"
    atomic_write_text(path, "old")

    with pytest.raises(TypeError):
        atomic_write_text(path, 12345)  # not text: fails while writing the temp file
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_responses_histogram_bins_a_flood_of_responses(tmp_path):
    """A target that drew a million responses is one bar ("20+"), not a million (issue 55: no input hangs a command)."""
    import time

    from proactive_eval.commands.report import HISTOGRAM_BINS, plot_responses_histogram

    start = time.monotonic()
    path = plot_responses_histogram({"PRS-B matching": [0, 1, 1, 10**6]}, tmp_path / "h.png")
    assert path.stat().st_size > 0 and time.monotonic() - start < 20 and HISTOGRAM_BINS == 20
