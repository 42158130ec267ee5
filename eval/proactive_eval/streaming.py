"""The causal streaming evaluation loop (P³I Algorithm 1; docs/spec.md §1, §2) and scripted policies for tests.

For each episode the policy is reset, then stepped once per sampled frame, in time order, seeing only the
past: the frame(s) of this step, the instruction (first turn) and any scheduled user text whose time has
come (it joins the first frame turn at or after its time). Each assistant turn is classified by the one turn
classifier of `proactive_rewards` (docs/spec.md §13): silent turns are dropped, responses become ``(t_j, ŷ_j)``
and malformed turns are kept as outputs flagged ``malformed`` (PRS counts them and gives them nothing, as the
rewards do).

Predictions are written one line per finished episode (flushed and fsynced), so a run that is killed loses
at most the episode in progress; started again on the same file, it skips the episodes already written
(repairing a torn last line) and ends with the same file an uninterrupted run writes.

An episode whose video is missing, truncated or undecodable (`proactive_eval.video.VideoError`) is not an
error of the run: it is recorded in ``failed`` with its reason, logged, and skipped; the others are played
(``on_error="raise"`` stops at the first instead). A failed episode is not written, so a later run tries it
again (after the video is fixed).
"""

from __future__ import annotations

import logging
import time as _time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from proactive_eval.episodes import Episode
from proactive_eval.policy import Observation, StreamingPolicy
from proactive_eval.predictions import PredictionWriter, load_predictions, turn_output, warn_undeclared_silence
from proactive_eval.video import VideoError, iter_frames
from proactive_rewards import Response
from proactive_rewards.turns import RESPONSE, RESPONSE_TOKEN, SILENCE_TOKEN, classify_turn

logger = logging.getLogger(__name__)

FrameSource = Callable[[Episode], Iterable[tuple[float, Any]]]
# A user text scheduled at t joins the frame at t even when float sampling puts that frame a hair earlier.
_EPS = 1e-6


def _default_frames(episode: Episode) -> Iterator[tuple[float, Any]]:
    return iter_frames(episode)


def run_episode(
    policy: StreamingPolicy,
    episode: Episode,
    frame_source: FrameSource | None = None,
    silence_signals: Sequence[str] = (),
    max_frames: int | None = None,
    plain: bool = False,
    step_seconds: list[float] | None = None,
) -> list[Response]:
    """Stream one episode through `policy` and return its non-silent outputs (P³I Algorithm 1).

    Args:
        policy (`StreamingPolicy`): reset once, then stepped once per frame.
        episode (`Episode`): the episode.
        frame_source (`Callable`, *optional*): ``episode -> iterable of (time, frame)``, deduplicated and in
            time order; defaults to `proactive_eval.video.iter_frames` (sampling at the episode's fps).
        silence_signals (`Sequence[str]`, *optional*): the model's extra silence signals (docs/spec.md §13);
            ``</Silence>`` always is one.
        max_frames (`int`, *optional*): passed to the policy as ``observation.meta["max_frames"]``: keep only
            the latest K images in the history (text stays).
        plain (`bool`, *optional*, defaults to `False`): the model writes bare text, not state tokens
            (docs/spec.md §13): a bare turn is a response, an empty one silence.
        step_seconds (`list[float]`, *optional*): when given, the wall seconds of each frame's policy step are
            appended to it (a ``step_ahead`` call's seconds divided evenly among the frames it decided), for the
            report's speed columns (`proactive_eval.common.speed`).

    Returns:
        `list[Response]`: responses, and malformed turns flagged ``malformed=True``.

    Raises:
        `VideoError` (from the default frame source) when the video cannot be read to its end.

    A policy with a ``lookahead`` > 1 and a ``step_ahead(observations) -> outputs`` method (the HF engine) is given
    up to that many upcoming observations at once (the frames are recorded) and returns the outputs of the first
    n >= 1 of them; it must make each output depend only on its own frame's past, as `step` does.
    """
    frames = (frame_source or _default_frames)(episode)
    policy.reset(episode)
    observations = _observations(episode, frames, max_frames)
    lookahead = int(getattr(policy, "lookahead", 1)) if hasattr(policy, "step_ahead") else 1
    responses: list[Response] = []

    def record(observation: Observation, text: str) -> None:
        output = turn_output(observation.time, text, silence_signals, plain=plain)
        if output is not None:
            responses.append(output)

    if lookahead <= 1:
        for observation in observations:
            start = _time.perf_counter()
            text = policy.step(observation)
            if step_seconds is not None:
                step_seconds.append(_time.perf_counter() - start)
            record(observation, text)
        return responses
    # Recorded video: the policy may decide several frames per call; each output still depends on its frame's past.
    buffer: list[Observation] = []
    for observation in observations:
        buffer.append(observation)
        while len(buffer) >= lookahead:
            buffer = _step_ahead(policy, buffer, record, step_seconds)
    while buffer:
        buffer = _step_ahead(policy, buffer, record, step_seconds)
    return responses


def _observations(episode: Episode, frames: Iterable, max_frames: int | None) -> Iterator[Observation]:
    """One observation per frame: the frame, the instruction, and the user texts whose time has come."""
    pending, next_turn = list(episode.user_turns), 0
    step = -1
    for step, (time, frame) in enumerate(frames):
        texts = []
        while next_turn < len(pending) and pending[next_turn].time <= time + _EPS:
            texts.append(pending[next_turn].text)
            next_turn += 1
        meta = dict(episode.meta)
        if max_frames is not None:
            meta["max_frames"] = int(max_frames)
        yield Observation(episode.id, step, float(time), [frame], episode.instruction, "\n".join(texts), meta)
    if next_turn < len(pending):
        logger.warning(
            "episode %r: %d user turn(s) after the last frame were never shown", episode.id, len(pending) - next_turn
        )
    if step < 0:
        logger.warning("episode %r: no frames", episode.id)


def _step_ahead(policy, buffer: list[Observation], record, step_seconds=None) -> list[Observation]:
    """Let `policy` decide the first frames of `buffer`; the observations still undecided."""
    start = _time.perf_counter()
    outputs = policy.step_ahead(buffer)
    seconds = _time.perf_counter() - start
    if not 1 <= len(outputs) <= len(buffer):
        raise RuntimeError(
            f"{type(policy).__name__}.step_ahead returned {len(outputs)} outputs for {len(buffer)} frames"
        )
    if step_seconds is not None:
        step_seconds += [seconds / len(outputs)] * len(outputs)
    for observation, output in zip(buffer, outputs):
        record(observation, output)
    return buffer[len(outputs) :]


class StreamingRun(dict):
    """What `run_streaming` returns: episode id → outputs (finished episodes, resumed ones included, in episode
    order), plus ``failed``: episode id → the reason it could not be played (docs/spec.md §1), and
    ``step_seconds``: episode id → the seconds of each frame's policy step (episodes played in this run only)."""

    def __init__(self, outputs=(), failed: dict[str, str] | None = None, resumed: int = 0, step_seconds=None):
        super().__init__(outputs)
        self.failed: dict[str, str] = dict(failed or {})
        self.resumed = resumed
        self.step_seconds: dict[str, list[float]] = dict(step_seconds or {})


def episode_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that fail one episode rather than the run: an unreadable video or frames folder."""
    return (VideoError,)


def run_streaming(
    policy: StreamingPolicy,
    episodes: Iterable[Episode],
    predictions_path: str | Path,
    frame_source: FrameSource | None = None,
    silence_signals: Sequence[str] = (),
    max_frames: int | None = None,
    progress: bool = True,
    plain: bool = False,
    on_error: str = "skip",
) -> StreamingRun:
    """Run `policy` over `episodes`, appending predictions to `predictions_path`; resumable.

    Args:
        policy (`StreamingPolicy`): the model.
        episodes (`Iterable[Episode]`): the episodes, in the order to run them.
        predictions_path (`str` or `Path`): JSONL ``{"id", "responses": [{"time", "text"}]}``; episodes already
            in it are skipped (a torn last line from a killed run is dropped and that episode redone).
        frame_source, silence_signals, max_frames, plain: as in :func:`run_episode`.
        progress (`bool`, *optional*, defaults to `True`): show a progress bar.
        on_error (`str`, *optional*, defaults to `"skip"`): an episode whose video cannot be read: ``"skip"``
            records it in ``failed`` and goes on; ``"raise"`` stops the run with the `VideoError`.

    Returns:
        `StreamingRun`: the outputs of every finished episode, in episode order, and the failed ones.
    """
    # deferred: tqdm.auto costs ~0.5 s to import; keeps `proactive-eval --help` fast
    from tqdm.auto import tqdm

    if on_error not in ("skip", "raise"):
        raise ValueError(f"on_error must be 'skip' or 'raise', got {on_error!r}")
    episodes = list(episodes)
    results: dict[str, list[Response]] = {}
    failed: dict[str, str] = {}
    timings: dict[str, list[float]] = {}
    skippable = episode_errors()
    with PredictionWriter(predictions_path) as writer:
        done = set(writer.done_ids)
        previous = load_predictions(predictions_path, silence_signals) if done else {}
        todo = [e for e in episodes if e.id not in done]
        if done:
            logger.info(
                "%s: resuming, %d of %d episodes already done",
                predictions_path,
                len(episodes) - len(todo),
                len(episodes),
            )
        for episode in tqdm(todo, disable=not progress, desc="streaming", unit="episode"):
            try:
                timings[episode.id] = []
                results[episode.id] = run_episode(
                    policy, episode, frame_source, silence_signals, max_frames, plain, timings[episode.id]
                )
            except skippable as err:
                if on_error == "raise":
                    raise
                failed[episode.id] = str(err)
                del timings[episode.id]
                logger.warning("episode %r not played: %s", episode.id, err)
                continue
            writer.write(episode.id, results[episode.id])
    warn_undeclared_silence((r for rs in results.values() for r in rs), str(predictions_path))
    outputs = {e.id: results[e.id] if e.id in results else previous[e.id] for e in episodes if e.id not in failed}
    return StreamingRun(outputs, failed, resumed=len(episodes) - len(todo), step_seconds=timings)


class SilentPolicy:
    """Never speaks. Records how many steps it took per episode in `steps`."""

    def __init__(self):
        self.steps: dict[str, int] = {}
        self._episode = None

    def reset(self, episode) -> None:
        self._episode = episode.id
        self.steps[episode.id] = 0

    def step(self, observation: Observation) -> str:
        self.steps[self._episode] += 1
        return SILENCE_TOKEN


class ScriptedPolicy:
    """Says scripted texts at scripted times: at each step, every line now due (time ≤ step time) is said.

    A policy speaks at most once per frame step, so lines due at the same step (e.g. a predictions file
    replayed on a coarser frame grid: 1.2 s and 1.7 s both fall due at the 2 s frame) are said together in
    that one turn: their contents (leading ``</Response>`` removed, silent lines dropped, repeats of the same
    text said once) joined by a space, the join PAUC uses for cumulative predictions (docs/spec.md §5). Each line thus
    comes out at the first frame at or after its time, which is as close as the frame grid allows; lines due
    after the last frame are never said.

    Args:
        responses_by_episode (`dict`): episode id → list of ``(time, text)`` or `Response`; `text` is sent as
            ``</Response> text`` unless it already starts with a state token; a `Response` flagged ``malformed``
            (a replayed predictions file) is sent as its bare text, which is malformed again (docs/spec.md §13).
        silence (`str`, *optional*, defaults to ``"</Silence>"``): the output of a step with nothing due.
        raw (`bool`, *optional*, defaults to `False`): send scripted texts exactly as given (to script other
            models' outputs, e.g. ``"NO REPLY"``); several raw lines due at one step are still joined as above.

    Every observation is logged (without its frames) in `log` as ``(episode_id, step, time, user_text)``.
    """

    def __init__(
        self,
        responses_by_episode: dict[str, Iterable[tuple[float, str]]],
        silence: str = SILENCE_TOKEN,
        raw: bool = False,
    ):
        self.script = {
            eid: sorted((_script_line(item) for item in items), key=lambda x: x[0])
            for eid, items in responses_by_episode.items()
        }
        self.silence, self.raw = silence, raw
        self.log: list[tuple[str, int, float, str]] = []
        self._queue: list[tuple[float, str, bool]] = []

    def reset(self, episode) -> None:
        self._queue = list(self.script.get(episode.id, []))

    def step(self, observation: Observation) -> str:
        self.log.append((observation.episode_id, observation.step, observation.time, observation.user_text))
        due = 0
        while due < len(self._queue) and self._queue[due][0] <= observation.time + _EPS:
            due += 1
        lines = self._queue[:due]
        del self._queue[:due]
        if not lines:
            return self.silence
        if len(lines) == 1:
            _, text, malformed = lines[0]
            if self.raw or malformed or text.lstrip().startswith("</"):
                return text
            return f"{RESPONSE_TOKEN} {text}"
        turns = [classify_turn(text, (self.silence,), plain=True) for _, text, malformed in lines if not malformed]
        joined = " ".join(dict.fromkeys(c for state, c in turns if state == RESPONSE))  # dict: drop repeats
        if not joined and any(malformed for *_, malformed in lines):
            return next(text for _, text, malformed in lines if malformed)
        return f"{RESPONSE_TOKEN} {joined}" if joined else self.silence


def _script_line(item) -> tuple[float, str, bool]:
    if isinstance(item, Response):
        return item.time, item.text, item.malformed
    time, text = item
    return time, text, False
