"""Episodes as state-token dialogue messages (docs/spec.md §2): ground-truth placement, user-turn content, system prompt."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from proactive_eval.episodes import Episode, EpisodeError
from proactive_rewards import as_response
from proactive_rewards.parsing import RESPONSE_TOKEN, SILENCE_TOKEN

DEFAULT_SYSTEM_PROMPT = (
    "You are a proactive assistant watching a live video stream, one frame at a time. "
    f"After each frame, answer with {SILENCE_TOKEN} when nothing needs to be said, or with {RESPONSE_TOKEN} "
    "followed by your answer as soon as the user's request calls for it. Stay silent otherwise."
)
TIMESTAMP_FORMAT = "<t={:.1f}s>"
# Several targets that land on one frame step are answered in one turn (docs/spec.md §2 leaves the separator open).
RESPONSE_JOIN = "; "
IGNORE_INDEX = -100
TRUNCATION = ("drop_frames", "error")
# A target (or user text) at time τ is due at the first frame with time >= τ; this absorbs float noise
# in sampled frame times (e.g. 0.1 * 3 = 0.30000000000000004).
_TIME_EPS = 1e-6


def timestamp_text(time: float, timestamp_format: str = TIMESTAMP_FORMAT) -> str:
    """The timestamp a user turn starts with (docs/spec.md §2, default ``<t=12.0s>``).

    >>> timestamp_text(12)
    '<t=12.0s>'
    """
    return timestamp_format.format(float(time))


def user_content(
    time: float,
    frames: Sequence[np.ndarray | None],
    instruction: str | None = None,
    user_text: str = "",
    timestamp_format: str = TIMESTAMP_FORMAT,
) -> list[dict]:
    """The content of one user turn: [instruction], timestamp, frame(s), [scheduled user text] (docs/spec.md §2).

    The instruction item carries ``"instruction": True`` so truncation can move it to a later turn.
    """
    content = []
    if instruction:
        content.append({"type": "text", "text": instruction + "\n", "instruction": True})
    content.append({"type": "text", "text": timestamp_text(time, timestamp_format)})
    content.extend({"type": "image", "image": frame} for frame in frames)
    if user_text:
        content.append({"type": "text", "text": "\n" + user_text})
    return content


def ground_truth_texts(episode: Episode, times: Sequence[float]) -> list[str]:
    """The assistant text of each frame step: ``</Silence>``, or ``</Response> <content>`` at the first step whose
    time is >= the target's time (targets landing on one step are joined with `RESPONSE_JOIN`).

    Raises `EpisodeError` (naming the episode) for a target after the last frame.
    """
    due = _assign(episode, times, [(t.time, t.text) for t in episode.targets], "targets")
    return [f"{RESPONSE_TOKEN} {RESPONSE_JOIN.join(texts)}" if texts else SILENCE_TOKEN for texts in due]


def build_messages(
    episode: Episode,
    frames: Sequence[tuple[float, np.ndarray]],
    responses: Sequence | None = None,
    *,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    timestamp_format: str = TIMESTAMP_FORMAT,
    max_frames: int | None = None,
) -> list[dict]:
    """Render an episode and its sampled frames as a state-token dialogue (HF multimodal chat messages, docs/spec.md §2).

    Args:
        episode (`Episode`): instruction, targets and scheduled user texts.
        frames (`list[tuple[float, np.ndarray]]`): the sampled frames, ``(time, H×W×3 uint8)``, times increasing
            (e.g. `proactive_eval.video.iter_frames` or `proactive_rl.synthetic.render_frames`). One step each.
        responses (`list`, *optional*): the assistant turns. Default: the ground truth (`ground_truth_texts`).
            Either one raw assistant text per frame step (a policy's outputs, kept verbatim), or timed responses
            (`Response` / ``(time, text)``), placed like targets and prefixed with ``</Response>``.
        system_prompt (`str`, *optional*): the role and when to stay silent.
        timestamp_format (`str`, *optional*, defaults to ``"<t={:.1f}s>"``): how a user turn shows its time.
        max_frames (`int`, *optional*): keep only the latest K frames' images; older turns keep their text.

    Returns:
        `list[dict]`: ``[system, user, assistant, user, assistant, ...]``; images are ``{"type": "image",
        "image": array}`` items, user and assistant messages carry their step ``"time"``, and the system
        message the ``"episode_id"`` (both ignored by chat templates, used for errors and reward parsing).
    """
    times = _frame_times(episode, frames)
    if responses is None:
        texts = ground_truth_texts(episode, times)
    else:
        texts = _response_texts(episode, times, responses)
    user_texts = [
        "\n".join(t) for t in _assign(episode, times, [(u.time, u.text) for u in episode.user_turns], "user_turns")
    ]
    keep_from = 0 if max_frames is None else max(0, len(frames) - max_frames)
    messages = [{"role": "system", "content": [{"type": "text", "text": system_prompt}], "episode_id": episode.id}]
    for k, (time, frame) in enumerate(frames):
        content = user_content(
            time,
            [frame] if k >= keep_from else [],
            instruction=episode.instruction if k == 0 else None,
            user_text=user_texts[k],
            timestamp_format=timestamp_format,
        )
        messages.append({"role": "user", "content": content, "time": float(time)})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": texts[k]}], "time": float(time)})
    return messages


def _frame_times(episode: Episode, frames) -> list[float]:
    times = []
    for k, item in enumerate(frames):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise EpisodeError(f"frames[{k}] must be a (time, image) pair", record=episode.id, field="frames")
        times.append(float(item[0]))
    if not times:
        raise EpisodeError("no frames to render", record=episode.id, field="frames")
    for k in range(1, len(times)):
        if not times[k] > times[k - 1]:
            raise EpisodeError(
                f"frame times must increase: frames[{k}] at {times[k]} after {times[k - 1]}",
                record=episode.id,
                field="frames",
            )
    return times


def _assign(episode: Episode, times: list[float], items: list[tuple[float, str]], what: str) -> list[list[str]]:
    """Place each ``(time, text)`` at the first frame step with time >= its time."""
    due: list[list[str]] = [[] for _ in times]
    for time, text in items:
        k = bisect.bisect_left(times, float(time) - _TIME_EPS)
        if k == len(times):
            raise EpisodeError(
                f"{what} entry at {time}s comes after the last frame ({times[-1]}s); it can never be answered",
                record=episode.id,
                field=what,
            )
        due[k].append(text)
    return due


def _response_texts(episode: Episode, times: list[float], responses: Sequence) -> list[str]:
    if all(isinstance(r, str) for r in responses):
        if len(responses) != len(times):
            raise EpisodeError(
                f"got {len(responses)} per-step responses for {len(times)} frame steps",
                record=episode.id,
                field="responses",
            )
        return list(responses)

    timed = [as_response(r) for r in responses]
    due = _assign(episode, times, [(r.time, r.text) for r in timed], "responses")
    out = []
    for texts in due:
        texts = [t if t.startswith((SILENCE_TOKEN, RESPONSE_TOKEN)) else f"{RESPONSE_TOKEN} {t}" for t in texts]
        out.append(RESPONSE_JOIN.join(texts) if texts else SILENCE_TOKEN)
    return out
