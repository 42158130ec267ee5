"""A local model as the prompter of the item-by-item benchmarks' protocols (each benchmark's `Benchmark.run_item`,
`proactive_eval.benchmarks.stream_bench.run`): ``official`` calls on a fresh `proactive_rl.streaming.StreamingSession`,
and the ``streaming`` protocol's one pass per video, forked at every probe (`StreamingSession.fork(1)`: a copy of the
cache, dropped after the answer).

Both render one user turn through the processor's chat template: the frames, then the prompt, then the generation
prompt. The streaming prefix is the official prompt's prefix token for token, so with the same frames both
protocols give the same greedy answers (a test checks it).
"""

from __future__ import annotations

import time

from proactive_eval.benchmarks.stream_bench.run import Speed

_SENTINEL = "\x00PROMPT\x00"
ENCODE_FRAMES = 32  # frames per vision call when a recorded video is encoded ahead


class ClipPrompter:
    """The model answering "these frames, then this prompt" offline, or through a streaming session.

    Args:
        model (`PreTrainedModel`): a model `proactive_rl.streaming.StreamingSession` drives.
        processor (`ProcessorMixin`): its processor (its chat template renders the turn).
        max_new_tokens (`int`, *optional*, defaults to `16`): longest answer (greedy).
        params (`SamplingParams`, *optional*): how answers are decoded instead (e.g. suppressed tokens).
    """

    def __init__(self, model, processor, max_new_tokens: int = 16, params=None):
        # deferred: keeps torch out of light import paths
        from proactive_rl.streaming import SamplingParams

        self.model, self.processor = model, processor
        self.params = params or SamplingParams(max_new_tokens=max_new_tokens)
        heads = []
        for n in (0, 1):
            content = [{"type": "image"}] * n + [{"type": "text", "text": _SENTINEL}]
            text = processor.apply_chat_template(
                [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
            )
            heads.append(text.split(_SENTINEL))
        (self.head, self.tail), (head1, _) = heads
        self.frame_text = head1[len(self.head) :]  # one frame's placeholder block
        self.speed = Speed()
        self._encode_share = 0.0
        self.turns: list = []  # every decoded `TurnOutput`, in order (tokens and log-probabilities, for checks)

    def _session(self):
        # deferred: keeps torch out of light import paths
        from proactive_rl.streaming import StreamingSession

        return StreamingSession(self.model, self.processor)

    def _decode(self, session, prompt: str) -> str:
        start = time.perf_counter()
        session.append(prompt + self.tail)
        turn = session.generate(self.params)
        self.speed.call_s.append(time.perf_counter() - start)
        self.turns.append(turn)
        return turn.texts[0].strip()

    def official(self, frames: list, prompt: str) -> str:
        """One offline call: a fresh context, every frame encoded, then the prompt."""
        session = self._session()
        start = time.perf_counter()
        session.append(self.head + self.frame_text * len(frames), frames)
        self.speed.frames_encoded += len(frames)
        elapsed = time.perf_counter() - start
        text = self._decode(session, prompt)
        self.speed.call_s[-1] += elapsed
        return text

    def open(self):
        """A streaming session holding the turn's head; feed frames with `feed`, ask with `ask`."""
        session = self._session()
        session.append(self.head)
        return session

    def prepare(self, session, blocks: list[list]) -> list:
        """Each block of frames (those between two probes) as one chunk, all made in one processor call (a
        recorded video: the frames are known in advance), encoded by vision calls of up to `ENCODE_FRAMES` frames
        (a call has a fixed cost; one call over every frame would attend over all of their patches at once)."""
        blocks = [b for b in blocks if b]
        if not blocks:
            return []
        start = time.perf_counter()
        chunks = session.chunks([self.frame_text * len(b) for b in blocks], blocks)
        group: list = []
        for chunk in chunks + [None]:
            if chunk is None or (group and sum(c.n_images for c in group) + chunk.n_images > ENCODE_FRAMES):
                session.encode(group)
                group = []
            if chunk is not None:
                group.append(chunk)
        n = sum(len(b) for b in blocks)
        self.speed.frames_encoded += n
        self._encode_share = (time.perf_counter() - start) / n
        return chunks

    def feed(self, session, chunk) -> None:
        """Append one prepared block (one language-model forward); each of its frames is given an equal share."""
        start = time.perf_counter()
        session.append_chunk(chunk)
        n = chunk.n_images
        self.speed.frame_s += [(time.perf_counter() - start) / n + self._encode_share] * n

    def ask(self, session, prompt: str) -> str:
        """The answer to `prompt` after the frames fed so far; the session itself is left as it was."""
        return self._decode(session.fork(1), prompt)
