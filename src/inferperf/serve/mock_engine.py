"""The mock token server's engine: a latency model of continuous batching on an injected clock (a MOCK, for
tests and demos; inferperf does not serve LLMs).

Model (the constants are :class:`MockProfile`'s, ``--mock-profile FILE``):

- **prefill** of one sequence takes ``a + b x input_tokens`` (``prefill_base_ms``, ``prefill_per_token_ms``)
  and ends with its first token;
- each **decode step** takes ``c + d x active`` (``decode_base_ms``, ``decode_per_seq_ms``) and gives every
  active sequence one more token (continuous batching: a sequence joins or leaves between steps);
- at most ``S`` (``max_active``) sequences are active; the rest wait in FIFO order;
- between decode steps, waiting sequences are admitted while fewer than ``S`` are active, each prefilled alone,
  one after another (vLLM without chunked prefill: a prefill stalls the batch's decode).

So with one sequence alone: TTFT = a + b x n_in, and every inter-token gap = c + d. Time advances by
``asyncio.sleep`` on the running loop, whose clock must be the engine's (the fake-time loop in tests), so the
model's timing is exact there. Generated text is seeded: request ``k`` draws its words from
``random.Random(seed * 1_000_003 + k)`` over :data:`VOCABULARY`; one token is one whitespace word (a
WordLevel tokenizer's count survives re-joining the text).
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..clock import SYSTEM_CLOCK, Clock
from ..config import load_mapping
from ..errors import UsageError, first_error

#: the mock's words (one token each).
VOCABULARY = ("alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike november oscar papa"
              " quebec romeo sierra tango uniform victor whiskey xray yankee zulu one two three four five six seven"
              " eight nine zero red green blue black white gray amber coral ivory olive plum rose ruby sand teal"
              " north south east west up down left right near far").split()  # fmt: skip


class MockProfile(BaseModel):
    """The mock's latency model and limits (times in ms, lengths in tokens); ``--mock-profile FILE`` (YAML/JSON).

    Raises (on construction):
        pydantic.ValidationError: a negative time, ``max_active`` < 1, or an unknown key.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefill_base_ms: float = Field(20.0, ge=0)  # a
    prefill_per_token_ms: float = Field(0.02, ge=0)  # b
    decode_base_ms: float = Field(20.0, ge=0)  # c
    decode_per_seq_ms: float = Field(0.25, ge=0)  # d
    max_active: int = Field(32, ge=1)  # S
    default_max_tokens: int = Field(16, ge=1)  # output length when a request gives no max_tokens
    max_output_tokens: int = Field(4096, ge=1)  # the most a request may ask for
    seed: int = 0
    abort_every: int = Field(0, ge=0)  # tests: cut every N-th streamed request half-way (0 = never)
    model_name: str = "mock-model"

    def prefill_ns(self, input_tokens: int) -> int:
        """Prefill time of one sequence of ``input_tokens``, ns."""
        return round((self.prefill_base_ms + self.prefill_per_token_ms * input_tokens) * 1e6)

    def decode_ns(self, active: int) -> int:
        """One decode step with ``active`` sequences, ns."""
        return round((self.decode_base_ms + self.decode_per_seq_ms * active) * 1e6)


def load_profile(path: Path | None, **overrides: Any) -> MockProfile:
    """The profile in ``path`` (YAML or JSON mapping; None: the defaults) with ``overrides`` (None values skipped).

    Raises:
        UsageError: unreadable file, not a mapping, an unknown key or a bad value (one line naming the file).
    """
    doc: dict[str, Any] = {}
    if path is not None:
        doc = load_mapping(path, f"--mock-profile {path}", "a YAML/JSON mapping of MockProfile keys", empty_ok=True)
    doc.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return MockProfile.model_validate(doc)
    except Exception as e:  # pydantic.ValidationError
        _, where, msg, _ = first_error(e)
        raise UsageError(f"--mock-profile {path}: '{where}': {msg}") from None


class Sequence:
    """One request in the engine: ``tokens`` (words, drawn at submit), ``token_ns`` (engine time of each token
    so far), ``queue`` (token index per token made, ``None`` once finished), ``arrived_ns``, ``cancelled``."""

    __slots__ = ("index", "input_tokens", "tokens", "token_ns", "queue", "arrived_ns", "cancelled")

    def __init__(self, index: int, input_tokens: int, tokens: list[str], arrived_ns: int) -> None:
        self.index = index
        self.input_tokens = input_tokens
        self.tokens = tokens
        self.token_ns: list[int] = []
        self.queue: asyncio.Queue[int | None] = asyncio.Queue()
        self.arrived_ns = arrived_ns
        self.cancelled = False

    @property
    def done(self) -> bool:
        """Every token made (or the client went away)."""
        return self.cancelled or len(self.token_ns) >= len(self.tokens)

    def cancel(self) -> None:
        """The client went away: no more tokens, and the handler waiting on ``queue`` gets its end (None) now; a
        disconnected stream had waited on its queue forever, and shutdown with it (SIGTERM ignored)."""
        if not self.cancelled:
            self.cancelled = True
            self.queue.put_nowait(None)


class MockEngine:
    """Continuous batching per :class:`MockProfile` (module docstring), on ``clock`` (the running loop's clock).

    ``submit`` returns a :class:`Sequence` whose ``queue`` yields each token's index as it is made, then None.
    """

    def __init__(self, profile: MockProfile, clock: Clock = SYSTEM_CLOCK) -> None:
        self.profile = profile
        self.clock = clock
        self.waiting: deque[Sequence] = deque()
        self.active: list[Sequence] = []
        self.submitted = 0
        self.steps = 0  # decode steps run
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def submit(self, input_tokens: int, output_tokens: int) -> Sequence:
        """Queue one request of ``input_tokens`` that generates ``output_tokens`` (>= 1) words."""
        k = self.submitted
        self.submitted += 1
        rng = random.Random(self.profile.seed * 1_000_003 + k)
        seq = Sequence(k, input_tokens, [rng.choice(VOCABULARY) for _ in range(max(1, output_tokens))],
                       self.clock.now_ns())  # fmt: skip
        self.waiting.append(seq)
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
        return seq

    async def close(self) -> None:
        """Stop the engine task (waiting and active sequences are finished with None)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for seq in [*self.waiting, *self.active]:
            seq.queue.put_nowait(None)

    async def _sleep_ns(self, ns: int) -> None:
        if ns <= 0:  # a zero-delay profile still lets the handlers run between steps
            await asyncio.sleep(0)
            return
        end = self.clock.now_ns() + ns
        while (left := end - self.clock.now_ns()) > 0:
            await asyncio.sleep(left / 1e9)

    def _emit(self, seq: Sequence) -> None:
        if seq.cancelled:
            return
        seq.token_ns.append(self.clock.now_ns())
        seq.queue.put_nowait(len(seq.token_ns) - 1)
        if seq.done:
            seq.queue.put_nowait(None)

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            self.active = [s for s in self.active if not s.done]
            if not self.waiting and not self.active:
                self._wake.clear()
                await self._wake.wait()
                continue
            while self.waiting and len(self.active) < self.profile.max_active:
                seq = self.waiting.popleft()
                if seq.cancelled:
                    continue
                await self._sleep_ns(self.profile.prefill_ns(seq.input_tokens))
                self._emit(seq)
                if not seq.done:
                    self.active.append(seq)
            live = [s for s in self.active if not s.done]
            if live:
                await self._sleep_ns(self.profile.decode_ns(len(live)))
                self.steps += 1
                for seq in live:
                    self._emit(seq)


__all__ = ["VOCABULARY", "MockEngine", "MockProfile", "Sequence", "load_profile"]
