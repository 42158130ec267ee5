"""Multi-turn streaming rollouts of a window through the KV-cache engine (docs/spec.md §8, §9; P³I Appendix C).

One rollout group = the G trajectories of one `RolloutWindow`. The shared part is prefilled once: the system turn,
the ground-truth prefix (user turns with their frames and the target assistant turns, docs/spec.md §2) and the window's
first user turn. The session is then forked into G rows; at every window step the same frame turn is appended to all
rows and each row decodes its own assistant turn. What comes out is, per row, exactly the token sequence the session
fed to the model:

- ``prompt_ids``: system + prefix + first window user turn + the assistant header (identical across the group);
- ``completion_ids``: the window, interleaved: policy turn, next frame turn (env), policy turn, ...;
- ``env_mask``: 1 on the policy's own tokens (its turn content and end-of-turn token), 0 on frame, timestamp and
  template tokens -- the only tokens the GRPO loss covers;
- ``logprobs``: per completion token, the log-probability the policy gave its token when it sampled it
  (``log_softmax(logits / T)``, what TRL recomputes), 0 on env tokens;
- ``images``: every frame of the trajectory in order, so the trainer's forward pass sees all of them.

Turn texts come from the processor's own chat template, rendered turn by turn like `proactive_rl.chat` (the tests
check the ids against `proactive_rl.chat.encode_dialogue`).

The window's frames are recorded, so the rollout uses the engine's speculative silence over blocks of frames
(`proactive_rl.streaming.speculation`): the window's frames are encoded in one vision call, the prompt and the first
block of frame turns are fed once with a silent-turn draft after each and then forked into the G rows, and each row
keeps or rejects each draft as its own sampling decides (the same distribution as decoding every turn; the
log-probabilities are those of the tokens kept). ``max_frames`` eviction is not used here: the trainer
scores a trajectory with one forward pass over every frame in it, so the rollout must have seen the same context.
"""

from __future__ import annotations

import bisect
import weakref
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from proactive_rewards.parsing import RESPONSE_TOKEN, SILENCE_TOKEN
from proactive_rl.chat import (
    DEFAULT_SYSTEM_PROMPT,
    TIMESTAMP_FORMAT,
    ground_truth_texts,
    render_text,
    turn_markers,
    user_content,
)
from proactive_rl.data.frames import frames_of
from proactive_rl.grpo.streaming.windows import RolloutWindow
from proactive_rl.streaming import SamplingParams, StreamingSession, TurnOutput
from proactive_rl.streaming.speculation import Lookahead, silent_draft

_EPS = 1e-6


@dataclass
class Trajectory:
    """One rollout of a window (see the module docstring for the fields).

    Args:
        window_id (`str`): the `RolloutWindow.id` it came from.
        prompt_ids (`list[int]`): the shared, not optimised context.
        completion_ids (`list[int]`): the window's tokens, policy and env interleaved.
        env_mask (`list[int]`): 1 on policy tokens, 0 on env tokens; aligned with `completion_ids`.
        logprobs (`list[float]`): sampling log-probabilities of the policy tokens, 0.0 on env tokens.
        images (`list[np.ndarray]`): every frame in prompt and completion, in order.
        texts (`list[str]`): the policy's turn at each window step (state token kept, end-of-turn dropped).
        times (`list[float]`): the time of each window step.
        truncated (`int`): turns that hit the per-turn token cap (their end-of-turn token was forced).
    """

    window_id: str
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    images: list[np.ndarray]
    texts: list[str]
    times: list[float]
    truncated: int = 0

    @property
    def num_responses(self) -> int:
        """Non-silent turns (the ``M`` of docs/spec.md §7)."""
        return sum(not t.strip().startswith(SILENCE_TOKEN) for t in self.texts)

    def responses(self) -> list[tuple[float, str]]:
        """``(time, text)`` of the well-formed ``</Response>`` turns, state token stripped (PRS input, docs/spec.md §4)."""
        out = []
        for time, text in zip(self.times, self.texts):
            text = text.strip()
            if text.startswith(RESPONSE_TOKEN):
                out.append((time, text[len(RESPONSE_TOKEN) :].strip()))
        return out


@dataclass
class _Step:
    time: float
    frame: np.ndarray
    instruction: str | None
    user_text: str
    answer: str = ""  # ground-truth assistant text (prefix steps only)


@dataclass
class WindowPlan:
    """The frame steps of a window: the ground-truth prefix and the steps the policy acts on."""

    prefix: list[_Step] = field(default_factory=list)
    steps: list[_Step] = field(default_factory=list)


def plan_window(window: RolloutWindow, frames: list[tuple[float, np.ndarray]] | None = None) -> WindowPlan:
    """Split a window's frames into the prefix (with ground-truth answers) and the policy's steps.

    The instruction, and any user text scheduled before the first rendered step, go into the first rendered user
    turn (docs/spec.md §2: the first user turn carries the instruction).
    """
    episode = window.episode
    frames = frames_of(episode) if frames is None else frames
    times = [float(t) for t, _ in frames]
    answers = ground_truth_texts(episode, times)
    user_texts: list[list[str]] = [[] for _ in times]
    first = bisect.bisect_left(times, window.prefix_start - _EPS)
    last = bisect.bisect_right(times, window.end + _EPS) - 1
    if first > last or first == len(times):
        raise ValueError(f"window {window.id!r}: no frame between {window.prefix_start}s and {window.end}s")
    for turn in episode.user_turns:
        k = max(first, bisect.bisect_left(times, turn.time - _EPS))
        if k <= last:
            user_texts[k].append(turn.text)
    plan = WindowPlan()
    for k in range(first, last + 1):
        step = _Step(
            times[k], frames[k][1], episode.instruction if k == first else None, "\n".join(user_texts[k]), answers[k]
        )
        (plan.prefix if times[k] < window.start - _EPS else plan.steps).append(step)
    if not plan.steps:
        raise ValueError(f"window {window.id!r}: no frame step inside [{window.start}, {window.end}]")
    return plan


class DialogueText:
    """Turn texts of a dialogue, as `proactive_rl.chat` renders them (TRL's prompts and completions are text).

    Args:
        processor (`ProcessorMixin`): a Qwen-VL processor with a chat template.
        timestamp_format (`str`, *optional*, defaults to ``"<t={:.1f}s>"``): how a user turn shows its time.
    """

    def __init__(self, processor, timestamp_format: str = TIMESTAMP_FORMAT):
        self.processor = processor
        self.template = processor.chat_template
        self.timestamp_format = timestamp_format
        #: the text that opens an assistant turn (``<|im_start|>assistant\n``): the decoding prompt
        self.header, self.end_of_turn = turn_markers(processor)
        probe = self.assistant("X")
        if not probe.startswith(self.header + "X"):
            raise ValueError("the chat template does not open assistant turns with its generation prompt")
        #: the stop token ends a decoded turn; this is what the template puts after it (Qwen: a newline)
        self.after_stop = probe[len(self.header) + 1 :].split(self.end_of_turn, 1)[-1]
        self.user = lru_cache(maxsize=4096)(self._user)

    def _text(self, role: str, content: list[dict]) -> str:
        return render_text(self.processor, {"role": role, "content": content})

    def system(self, prompt: str = DEFAULT_SYSTEM_PROMPT) -> str:
        return self._text("system", [{"type": "text", "text": prompt}])

    def _user(self, time: float, n_frames: int, instruction: str | None, user_text: str) -> str:
        content = user_content(time, [None] * n_frames, instruction, user_text, self.timestamp_format)
        return self._text("user", [{"type": "image"} if item.get("type") == "image" else item for item in content])

    def assistant(self, text: str) -> str:
        return self._text("assistant", [{"type": "text", "text": text}])


_TEXTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def dialogue_text(processor, timestamp_format: str = TIMESTAMP_FORMAT) -> DialogueText:
    """The (cached) `DialogueText` of a processor."""
    per_format = _TEXTS.setdefault(processor, {})
    texts = per_format.get(timestamp_format)
    if texts is None or texts.template != processor.chat_template:
        texts = per_format[timestamp_format] = DialogueText(processor, timestamp_format)
    return texts


def rollout_window(
    model,
    processor,
    window: RolloutWindow,
    num_generations: int,
    params: SamplingParams,
    *,
    frames: list[tuple[float, np.ndarray]] | None = None,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    timestamp_format: str = TIMESTAMP_FORMAT,
    speculate: bool = True,
    lookahead: int = 16,
    batcher=None,
) -> list[Trajectory]:
    """Roll the policy through one window, `num_generations` times from the same prefix (docs/spec.md §8).

    Args:
        model (`PreTrainedModel`): the policy (a Qwen-VL model, possibly PEFT-wrapped; whole parameters -- under
            ZeRO-3 call this inside TRL's ``unwrap_model_for_generation``).
        processor (`ProcessorMixin`): its processor.
        window (`RolloutWindow`): where the policy acts.
        num_generations (`int`): G, the rollouts sharing the window's frames.
        params (`SamplingParams`): per-turn decoding (temperature, top-p/k, per-turn token cap, seed).
        frames (`list[tuple[float, np.ndarray]]`, *optional*): the episode's frames; drawn/decoded when omitted.
        system_prompt (`str`, *optional*): the system turn.
        timestamp_format (`str`, *optional*): how user turns show their time.
        speculate (`bool`, *optional*, defaults to `True`): speculative silence over blocks of frames (see the
            module docstring); off, every frame turn is appended and decoded on its own.
        lookahead (`int`, *optional*, defaults to `16`): the most frames per speculative block.
        batcher (`Batcher`, *optional*): roll out on a session of this `proactive_rl.streaming.batch.Batcher` (called
            from one of its `map` workers: this group's model calls join the other groups' rounds; same rollouts).

    Returns:
        `list[Trajectory]`: G trajectories, in row order.
    """
    if num_generations < 1:
        raise ValueError(f"num_generations must be >= 1, got {num_generations}")
    plan = plan_window(window, frames)
    texts = dialogue_text(processor, timestamp_format)
    prompt_text, prompt_images = texts.system(system_prompt), []
    for step in plan.prefix:
        prompt_text += texts.user(step.time, 1, step.instruction, step.user_text) + texts.assistant(step.answer)
        prompt_images.append(step.frame)
    first = plan.steps[0]
    prompt_text += texts.user(first.time, 1, first.instruction, first.user_text) + texts.header
    prompt_images.append(first.frame)

    session = StreamingSession(model, processor) if batcher is None else batcher.session()
    turn_texts = [prompt_text] + [
        texts.after_stop + texts.user(step.time, 1, step.instruction, step.user_text) + texts.header
        for step in plan.steps[1:]
    ]
    chunks = session.chunks(turn_texts, [prompt_images] + [[step.frame] for step in plan.steps[1:]])
    G = num_generations
    if speculate:
        session, turns = _speculative_turns(session, chunks, G, params, silent_draft(processor), lookahead)
    else:
        session, turns = _turn_by_turn(session, chunks, G, params)

    images = [s.frame for s in plan.prefix] + [s.frame for s in plan.steps]
    prompt_ids = [int(t) for t in chunks[0].input_ids]
    trajectories = []
    for b in range(G):
        completion, mask, logprobs = [], [], []
        for k, turn in enumerate(turns):
            if k:  # the frame turn: environment tokens
                completion += [int(t) for t in chunks[k].input_ids]
                mask += [0] * len(chunks[k].input_ids)
                logprobs += [0.0] * len(chunks[k].input_ids)
            completion += turn.token_ids[b]
            mask += [1] * len(turn.token_ids[b])
            logprobs += turn.logprobs[b]
        if prompt_ids + completion != session.token_ids(b):
            raise RuntimeError(f"window {window.id!r}: row {b}'s trajectory differs from the tokens the engine fed")
        trajectories.append(
            Trajectory(
                window_id=window.id,
                prompt_ids=list(prompt_ids),
                completion_ids=completion,
                env_mask=mask,
                logprobs=logprobs,
                images=images,
                texts=[turn.texts[b] for turn in turns],
                times=[s.time for s in plan.steps],
                truncated=sum(int(turn.truncated[b]) for turn in turns),
            )
        )
    return trajectories


def _turn_by_turn(session: StreamingSession, chunks: list, G: int, params: SamplingParams):
    """The G rows' session and every chunk's turn: the prompt prefilled once and forked, then each frame turn
    appended and decoded."""
    session.append_chunk(chunks[0])
    session = session.fork(G)
    turns = [session.generate(params)]
    for chunk in chunks[1:]:
        session.append_chunk(chunk)
        turns.append(session.generate(params))
    return session, turns


def _speculative_turns(session: StreamingSession, chunks: list, G: int, params: SamplingParams, draft, lookahead):
    """The G rows' session and every chunk's turn: the window's frames encoded in one call; the prompt and the first
    block fed once, then forked; block by block, each row keeps or rejects the drafts (`StreamingSession.resolve`)."""
    session.encode(chunks)
    size = Lookahead(lookahead)
    fed = session.speculate(chunks[: size.size], draft)
    session = session.fork(G)
    turns: list[TurnOutput] = []
    while True:
        kept = session.n_drafts_kept
        turns += session.resolve(params)
        size.update(fed, session.n_drafts_kept - kept == fed)
        if len(turns) == len(chunks):
            return session, turns
        fed = session.speculate(chunks[len(turns) : len(turns) + size.size], draft)
