"""The filtered ProactiveBench (§3.3 / App. A.8): the shipped id lists, the skip arguments, the two protocols.

The lists' sizes are checked against numbers the paper states independently: 7,557 samples in all, ImageNet-C
1,095, and Table 1's accuracies, which for the small datasets are multiples of 100 / n."""

import json

import pytest

from proactive_eval.benchmarks.proactivebench.environments import load_environments
from proactive_eval.benchmarks.proactivebench.metric import DATASETS
from proactive_eval.benchmarks.proactivebench.protocol import (
    load_filter,
    protocol_line,
    protocol_summary,
    select_benchmark,
)

# ProactiveBench Table 1, acc columns of ROD, VSOD and CIT (22 models).
TABLE1_ACC = {
    "ROD": [12.5, 0.0, 19.3, 44.3, 0.0, 0.0, 0.0, 31.8, 0.0, 0.0, 0.0, 0.0, 0.0, 61.4, 1.1, 0.0, 0.0, 0.0, 1.1, 0.0],
    "VSOD": [26.2, 0.0, 11.9, 9.5, 14.3, 19.0, 11.9, 19.0, 9.5, 9.5, 0.0, 4.8, 2.4, 21.4, 31.0, 11.9, 31.0, 16.7],
    "CIT": [44.2, 17.2, 36.6, 31.1, 10.4, 16.9, 25.5, 12.1, 24.5, 12.4, 9.8, 17.4, 9.3, 16.9, 28.5, 10.1, 27.0],
}


def test_the_shipped_lists_sum_to_the_papers_7557_and_match_its_stated_sizes():
    counts = load_filter().counts()
    assert list(counts) == list(DATASETS)  # all seven datasets
    assert sum(counts.values()) == 7557  # §3.3: "The final benchmark counts 7,557 samples"
    assert counts["IN-C"] == 1095  # App. A.8: "IN-C decreases from 4,856 to 1,095 samples"


@pytest.mark.parametrize("dataset", sorted(TABLE1_ACC))
def test_table1_accuracies_are_multiples_of_100_over_the_list_size(dataset):
    n = load_filter().counts()[dataset]
    for acc in TABLE1_ACC[dataset]:
        assert any(round(100 * k / n, 1) == acc for k in range(n + 1)), (dataset, n, acc)


def test_docs_table_states_the_counts_the_lists_imply():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "proactivebench.md").read_text()
    for key, n in load_filter().counts().items():
        assert f"| {key} | {DATASETS[key]} | {n:,} |" in text
    assert "| all | | 7,557 |" in text


def test_select_applies_ids_and_skip_arguments_like_the_authors_loader():
    records = [
        {"id": 6, "strong_occlusions": True},  # in the VSOD list
        {"id": 9, "strong_occlusions": False},  # in the list but a weak occlusion: skipped
        {"id": 14},  # in the list, no field: kept
        {"id": 7, "strong_occlusions": True},  # not in the list
    ]
    sel = select_benchmark(records, "OcclusionDataSet-MM20")
    assert [r["id"] for r in sel.records] == [6, 14] and (sel.in_file, sel.skipped, sel.filtered_out) == (4, 1, 1)
    assert [r["id"] for r in select_benchmark(records, "VSOD", "unfiltered").records] == [6, 14, 7]
    assert len(select_benchmark(records, "VSOD", "unfiltered", skip={}).records) == 4
    with pytest.raises(ValueError, match="protocol: expected one of filtered, unfiltered"):
        select_benchmark(records, "VSOD", "half")


def test_a_custom_filter_file_and_its_errors(tmp_path):
    path = tmp_path / "filter.json"
    path.write_text(json.dumps({"ids": {"QuickDraw": [1, 2]}, "source": "mine"}))
    lists = load_filter(path)
    assert lists.counts() == {"QD": 2}
    assert [
        r["id"] for r in select_benchmark([{"id": i} for i in range(4)], "QD", benchmark_filter=lists).records
    ] == [1, 2]
    with pytest.raises(ValueError, match="ROD: no id list"):
        select_benchmark([], "ROD", benchmark_filter=lists)
    path.write_text(json.dumps({"ids": {"Flowers": [1]}}))
    with pytest.raises(ValueError, match="unknown ProactiveBench dataset 'Flowers'"):
        load_filter(path)


def test_report_line_names_protocol_and_counts():
    line = protocol_line(protocol_summary("unfiltered", {"QD": 3}))
    assert line.startswith("ProactiveBench protocol: unfiltered,") and "QD 3 (3 in all)" in line


def test_load_environments_is_filtered_by_default(tmp_path):
    from tests.eval.test_environments import rod_record, write_images

    write_images(tmp_path, {f"rod/obj_{i}.png": 10 * i for i in range(6)})
    path = tmp_path / "ROD_preprocessed.jsonl"
    # ROD's list keeps ids 0..87: 88 and 90 are not in the filtered benchmark.
    path.write_text("".join(json.dumps(rod_record(id=i)) + "\n" for i in (0, 5, 88, 90)))
    assert [e.id for e in load_environments(path, "ROD")] == ["0", "5"]
    assert len(load_environments(path, "ROD", protocol="unfiltered")) == 4


def test_a_file_whose_ids_are_not_the_benchmarks_says_to_use_unfiltered(tmp_path):
    from proactive_eval.episodes import EpisodeError
    from tests.eval.test_environments import rod_record

    path = tmp_path / "synthetic.jsonl"
    path.write_text(json.dumps(rod_record(id="synthetic-0")) + "\n")
    with pytest.raises(EpisodeError, match="keeps none of its 1 records.*protocol='unfiltered'"):
        load_environments(path, "ROD", load_images=False)
