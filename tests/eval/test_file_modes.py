"""Results files are as readable as the user's other files: the atomic writers give ``0o666`` less the umask
(`proactive_eval.file_modes`), not ``tempfile.mkstemp``'s ``0o600``."""

from __future__ import annotations

import os
import stat

import pytest

from proactive_eval import file_modes
from proactive_eval.predictions import atomic_write_text


@pytest.fixture(params=[0o022, 0o077, 0o027], ids=["022", "077", "027"])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_text_files_follow_the_umask(tmp_path, umask):
    want = {0o022: 0o644, 0o077: 0o600, 0o027: 0o640}[umask]
    path = tmp_path / "results.json"
    atomic_write_text(path, "{}\n")
    assert mode(path) == want
    atomic_write_text(path, "[]\n")  # a rewrite too (the temporary file replaces the old one)
    assert (mode(path), path.read_text()) == (want, "[]\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_png_figures_follow_the_umask(tmp_path, umask):
    pytest.importorskip("matplotlib")
    from proactive_eval.commands.report import pyplot, save_figure

    plt = pyplot()
    fig = plt.figure(figsize=(1, 1))
    path = save_figure(fig, tmp_path / "curve.png")
    assert mode(path) == 0o666 & ~umask
    assert path.read_bytes().startswith(b"\x89PNG")


def test_the_umask_is_read_without_proc_too(monkeypatch, umask):
    assert file_modes.current_umask() == umask
    monkeypatch.setattr(file_modes, "_PROC_STATUS", "/nonexistent/status")
    assert file_modes.current_umask() == umask
    assert file_modes.default_file_mode() == 0o666 & ~umask
    assert os.umask(umask) == umask  # the probe put the umask back
