"""The demo's "metrics by stage" chart: the blind row and every stage in colours of their own, and no bar (an "n/a"
mark) where a stage has no score, instead of a bar labelled 0."""

from __future__ import annotations

import pytest

from proactive_rl.demo import report

M = {"accident/prs_u": 10.0, "accident/prs_b": 20.0, "prs_u": 10.0, "prs_b": 20.0, "pauc": 30.0, "acc": 40.0}
STAGES = [
    {"key": "untrained", "name": "untrained", "metrics": {**M, "acc": None, "blind_prs_b": 5.0, "blind_pauc": 25.0}},
    # grounding scores captions only: no PAUC, no MCQA
    {"key": "grounding", "name": "grounding", "metrics": {**M, "pauc": None, "acc": None}},
    *({"key": f"s{k}", "name": f"stage {k}", "metrics": dict(M)} for k in range(5)),
]


def test_stages_have_distinct_colours_and_no_bar_where_unscored(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    drawn = []
    bar = Axes.bar

    def record(self, xs, heights, width, **kwargs):
        drawn.append((kwargs["label"], list(heights), kwargs["color"], kwargs.get("hatch")))
        return bar(self, xs, heights, width, **kwargs)

    monkeypatch.setattr(Axes, "bar", record)
    report.plot_stages(report.with_blind(STAGES), tmp_path / "chart.png")
    assert (tmp_path / "chart.png").stat().st_size > 0
    by_label = {label: (heights, color, hatch) for label, heights, color, hatch in drawn}
    assert len(drawn) == 1 + len(STAGES)
    colours = [color for _, _, color, _ in drawn]
    assert len(set(colours)) == len(colours)  # the blind row's grey is nobody else's, even with 7 stages
    assert by_label[report.BLIND_ROW][2] == "//"
    # groups: accident PRS-B, PRS-U, PRS-B, PAUC, acc; the grounding stage has no PAUC and no acc: 3 bars, not 5
    assert by_label["grounding"][0] == [20.0, 10.0, 20.0]
    assert by_label["untrained"][0] == [20.0, 10.0, 20.0, 30.0]
    assert 0.0 not in by_label["grounding"][0]


@pytest.mark.parametrize("n", [1, 12])
def test_any_number_of_stages_gets_colours(n, tmp_path):
    stages = [{"key": f"s{k}", "name": f"stage {k}", "metrics": dict(M)} for k in range(n)]
    assert report.plot_stages(stages, tmp_path / "chart.png").stat().st_size > 0
