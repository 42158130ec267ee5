"""Video I/O: frame sampling from videos and frame folders, dedup, seeking, and clear errors."""

import subprocess
import sys

import numpy as np
import pytest

from proactive_eval.episodes import Episode
from proactive_eval.video import (
    VideoError,
    iter_frames,
    load_image,
    read_folder_frames,
    read_video_frames,
    sample_times,
    write_video,
)

pytest.importorskip("av")
PIL = pytest.importorskip("PIL.Image")


def gray_frames(n, size=32, step=9):
    """Frame k is a uniform gray of level (k * step) % 250: its index can be read back from any pixel."""
    return [np.full((size, size, 3), (k * step) % 250, np.uint8) for k in range(n)]


def level(frame):
    return int(np.rint(frame.astype(float).mean()))


def test_sample_times_hand_computed():
    assert sample_times(3.0, 1.0) == [0.0, 1.0, 2.0]
    assert sample_times(3.5, 1.0) == [0.0, 1.0, 2.0, 3.0]
    assert sample_times(0.4, 1.0) == [0.0]
    assert sample_times(2.0, 2.0) == [0.0, 0.5, 1.0, 1.5]
    with pytest.raises(ValueError):
        sample_times(0.0, 1.0)
    with pytest.raises(ValueError):
        sample_times(5.0, float("nan"))


def test_one_fps_video_round_trip(tmp_path):
    path = tmp_path / "v.mp4"
    write_video(path, gray_frames(12), fps=1.0)
    out = list(read_video_frames(path, sample_times(12.0, 1.0)))
    assert [t for t, _ in out] == [float(k) for k in range(12)]
    for k, (_, frame) in enumerate(out):
        assert frame.shape == (32, 32, 3) and frame.dtype == np.uint8
        assert abs(level(frame) - (k * 9) % 250) <= 2


def test_sampling_a_faster_video_picks_the_frame_on_screen(tmp_path):
    path = tmp_path / "v.mp4"
    write_video(path, gray_frames(40), fps=4.0)  # frame k shows at k / 4 s
    out = list(read_video_frames(path, sample_times(10.0, 1.0)))
    assert [t for t, _ in out] == [float(s) for s in range(10)]
    assert [abs(level(f) - (4 * s * 9) % 250) <= 2 for s, (_, f) in enumerate(out)] == [True] * 10


def test_times_resolving_to_the_same_frame_are_deduplicated(tmp_path):
    path = tmp_path / "v.mp4"
    write_video(path, gray_frames(5), fps=0.5)  # frames at 0, 2, 4, 6, 8 s
    out = list(read_video_frames(path, sample_times(10.0, 1.0)))
    # 1 s shows the frame of 0 s, 3 s the frame of 2 s, ...: each frame once, at its first sample time.
    assert [t for t, _ in out] == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert [abs(level(f) - 9 * k) <= 2 for k, (_, f) in enumerate(out)] == [True] * 5


def test_times_past_the_end_resolve_to_the_last_frame_once(tmp_path):
    path = tmp_path / "v.mp4"
    write_video(path, gray_frames(3), fps=1.0)
    out = list(read_video_frames(path, [0.0, 1.0, 2.0, 3.0, 4.0]))
    assert [t for t, _ in out] == [0.0, 1.0, 2.0]


def test_sparse_sampling_seeks_and_still_finds_the_right_frames(tmp_path):
    path = tmp_path / "long.mp4"
    write_video(path, gray_frames(300, size=16, step=7), fps=10.0, keyframe_interval=10)
    times = [0.0, 7.3, 12.0, 19.95, 29.9]
    out = list(read_video_frames(path, times))
    expected = [(int(np.floor(t * 10 + 1e-6)) * 7) % 250 for t in times]
    assert [t for t, _ in out] == times
    assert all(abs(level(f) - e) <= 2 for (_, f), e in zip(out, expected))


def test_frames_folder_natural_order_fps_and_dedup(tmp_path):
    folder = tmp_path / "frames"
    folder.mkdir()
    for k, frame in enumerate(gray_frames(12)):
        PIL.fromarray(frame).save(folder / f"frame_{k}.png")  # frame_10 sorts after frame_9
    out = list(read_folder_frames(folder, sample_times(6.0, 1.0), folder_fps=2.0))
    assert [t for t, _ in out] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert [level(f) for _, f in out] == [(2 * k * 9) % 250 for k in range(6)]  # PNG is lossless
    slow = list(read_folder_frames(folder, sample_times(6.0, 4.0), folder_fps=2.0))
    assert [t for t, _ in slow] == [k / 2 for k in range(12)]  # 4 FPS over a 2 FPS folder: each image once


def test_iter_frames_resolves_video_and_folder_paths_against_base_dir(tmp_path):
    write_video(tmp_path / "clip.mp4", gray_frames(4), fps=1.0)
    (tmp_path / "frames").mkdir()
    for k, frame in enumerate(gray_frames(4)):
        PIL.fromarray(frame).save(tmp_path / "frames" / f"{k:03d}.jpg")
    video = Episode("a", "atomic", 4.0, "x", video="clip.mp4", base_dir=tmp_path)
    folder = Episode("b", "atomic", 4.0, "x", video={"frames_dir": "frames", "fps": 1.0}, base_dir=tmp_path)
    assert [t for t, _ in iter_frames(video)] == [0.0, 1.0, 2.0, 3.0]
    assert [t for t, _ in iter_frames(folder, fps=0.5)] == [0.0, 2.0]


# --- errors name the file -----------------------------------------------------------------------------------


def test_missing_empty_and_corrupt_videos_name_the_file(tmp_path):
    missing = tmp_path / "missing.mp4"
    with pytest.raises(VideoError, match="missing.mp4.*not found"):
        list(read_video_frames(missing, [0.0]))
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(VideoError, match="empty.mp4.*empty"):
        list(read_video_frames(empty, [0.0]))
    corrupt = tmp_path / "corrupt.mp4"
    corrupt.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(VideoError) as info:
        list(read_video_frames(corrupt, [0.0]))
    assert info.value.file == str(corrupt) and "corrupt.mp4" in str(info.value)


def test_truncated_video_is_a_clear_error(tmp_path):
    good = tmp_path / "good.mp4"
    write_video(good, gray_frames(30), fps=1.0)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 3])
    with pytest.raises(VideoError, match="cut.mp4"):
        list(read_video_frames(cut, sample_times(30.0, 1.0)))


def test_missing_and_empty_frame_folders_name_the_folder(tmp_path):
    with pytest.raises(VideoError, match="nowhere.*not found"):
        list(read_folder_frames(tmp_path / "nowhere", [0.0]))
    (tmp_path / "empty").mkdir()
    with pytest.raises(VideoError, match="empty.*no images"):
        list(read_folder_frames(tmp_path / "empty", [0.0]))
    episode = Episode("e", "atomic", 3.0, "x", video={"frames_dir": "gone", "fps": 1}, base_dir=tmp_path)
    with pytest.raises(VideoError, match="gone"):
        list(iter_frames(episode))


def test_an_image_that_fails_to_decode_names_the_image(tmp_path):
    folder = tmp_path / "frames"
    folder.mkdir()
    PIL.fromarray(gray_frames(1)[0]).save(folder / "0000.png")
    (folder / "0001.png").write_bytes(b"\x89PNG\r\n\x1a\n this is not really a png")
    out = read_folder_frames(folder, [0.0, 1.0])
    assert next(out)[0] == 0.0  # the good frame comes first
    with pytest.raises(VideoError) as info:
        next(out)
    assert info.value.file == str(folder / "0001.png") and "cannot decode image" in str(info.value)
    with pytest.raises(VideoError, match="0001.png"):
        load_image(folder / "0001.png")


def test_episode_without_video_is_a_clear_error():
    with pytest.raises(VideoError, match="no video"):
        list(iter_frames(Episode("e", "atomic", 3.0, "x")))


def test_odd_frame_sizes_are_refused_for_yuv420p(tmp_path):
    with pytest.raises(VideoError, match="even"):
        write_video(tmp_path / "odd.mp4", [np.zeros((15, 16, 3), np.uint8)])
    assert not list(tmp_path.iterdir())  # nothing half-written left behind


def test_importing_the_module_does_not_import_av_or_pil():
    code = "import sys, proactive_eval.video; print('av' in sys.modules, 'PIL' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_a_cut_video_that_still_opens_is_reported_truncated(tmp_path):
    """A head-indexed mp4 cut in half opens and decodes its first frames, then stops: not a silent short episode."""
    from tests.support.media import cut, write_head_indexed_video

    path = cut(write_head_indexed_video(tmp_path / "cut.mp4", 20))
    with pytest.raises(VideoError, match=r"cut.mp4: truncated video \(frames stop at .* lasts 20.00 s\)"):
        list(read_video_frames(path, sample_times(20.0, 1.0)))
    # the head alone is fine: a caller that only wants the first seconds gets them
    assert [t for t, _ in read_video_frames(path, [0.0, 1.0, 2.0])] == [0.0, 1.0, 2.0]
    whole = write_head_indexed_video(tmp_path / "whole.mp4", 20)
    assert len(list(read_video_frames(whole, sample_times(20.0, 1.0)))) == 20
