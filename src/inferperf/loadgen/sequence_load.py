"""Load on a sequence model (issue 42 item 3): each closed-loop stream sends whole sequences, one after another:
START, the middle requests and END, in order, with Triton's ``sequence_id`` / ``sequence_start`` /
``sequence_end`` request parameters; the streams' sequences interleave at the server.

perf_analyzer's meaning of its flags: ``--sequence-length N`` is the mean length (default 20),
``--sequence-length-variation P`` the spread in percent (default 20: lengths uniform in N x [1 - P/100, 1 + P/100],
at least 1, seeded), ``--sequence-id-range START:END`` the ids used (default 1 upwards; a new sequence takes the
next id, wrapping at END). A target is driven this way when its model configuration holds ``sequence_batching``
(perf_analyzer reads it the same way).

Each step starts new sequences (the ids go on from the last step's): a sequence a step left unfinished stays live
at the server until its ``max_sequence_idle_microseconds`` (perf_analyzer sends END for them; not done here), so
with few slots a next step's STARTs may wait for those to expire; a START that reuses a live id ends that
sequence (Triton's rule). The id range must hold at least one id per stream.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from ..errors import UsageError

#: perf_analyzer's defaults
DEFAULT_SEQUENCE_LENGTH, DEFAULT_VARIATION = 20, 20.0


#: the largest id both protocols carry (gRPC's int64_param; Triton's HTTP reads an unsigned 64-bit integer)
MAX_ID = 2**63 - 1


def parse_id_range(value: str | None) -> tuple[int, int]:
    """``START:END`` (or ``START``) -> (start, end) of the sequence ids (end inclusive; default :data:`MAX_ID`).

    Raises:
        UsageError: not integers, start < 1, end < start or end > :data:`MAX_ID`.
    """
    if not value:
        return 1, MAX_ID
    head, _, tail = value.partition(":")
    try:
        start, end = int(head), int(tail) if tail else 2**63 - 1
    except ValueError:
        raise UsageError(f"--sequence-id-range {value!r}: give START:END, integers (e.g. 1:1000)") from None
    if start < 1 or end < start or end > MAX_ID:
        raise UsageError(f"--sequence-id-range {value!r}: ids are >= 1 and END >= START, at most {MAX_ID} (the int64"
                         " a gRPC request carries)")
    return start, end


class SequencePayloads:
    """The requests of sequences, per stream (the driver asks :meth:`next` with its stream's index).

    Args:
        build: ``(pool_index, sequence_id, start, end) -> bytes``: one whole request (HTTP) or serialized
            ``ModelInferRequest`` (gRPC) of payload ``pool_index`` with the sequence parameters.
        pool_size: distinct payloads (a sequence's requests cycle through them).
        length, variation_percent: mean length and its spread.
        id_range: (first, last) ids.
        seed: lengths and payload choice.
    """

    per_stream = True

    def __init__(self, build: Callable[[int, int, bool, bool], bytes], pool_size: int, length: int,
                 variation_percent: float, id_range: tuple[int, int], seed: int = 0) -> None:
        self.build, self.pool_size, self.length, self.variation = build, max(1, pool_size), length, variation_percent
        self.first, self.last = id_range
        self._next_id = self.first
        self._rng = random.Random(seed)
        self._streams: dict[int, list[int]] = {}  # stream -> [sequence id, its length, requests sent]
        self.started = self.ended = 0

    def __len__(self) -> int:
        return self.pool_size

    def _new(self) -> list[int]:
        sid = self._next_id
        self._next_id = self.first if sid >= self.last else sid + 1
        spread = self.length * self.variation / 100
        n = max(1, round(self._rng.uniform(self.length - spread, self.length + spread)))
        self.started += 1
        return [sid, n, 0]

    def next(self, stream: int) -> bytes:
        """Stream ``stream``'s next request: the next of its sequence, or the START of a new one."""
        st = self._streams.get(stream)
        if st is None or st[2] >= st[1]:
            st = self._streams[stream] = self._new()
        sid, n, k = st
        st[2] = k + 1
        end = k + 1 == n
        self.ended += end
        return self.build((sid + k) % self.pool_size, sid, k == 0, end)

    def reset(self) -> None:
        """A new step: every stream starts a new sequence; the counts restart."""
        self._streams.clear()
        self.started = self.ended = 0

    def counts(self) -> dict[str, float]:
        """``{"started", "ended", "mean_length"}`` of this step's sequences (sent START / sent END)."""
        return {"started": self.started, "ended": self.ended, "mean_length": self.length}


def sequence_payloads(info: Any, cfg: Any, build: Callable[[int, int, bool, bool], bytes],
                      pool_size: int) -> SequencePayloads | None:
    """The sequence payloads of ``cfg`` when ``info``'s model configuration has ``sequence_batching`` (None
    otherwise).

    Raises:
        UsageError: ``--sequence-*`` flags for a model that is not a sequence model; a sequence model driven in
            the open loop, by several workers, or through shared memory (not built).
    """
    flags = cfg.sequence_length is not None or cfg.sequence_id_range is not None
    if "sequence_batching" not in (info.config or {}):
        if flags:
            raise UsageError(f"--sequence-length / --sequence-id-range: model '{info.model}' is not a sequence model "
                             "(its configuration has no sequence_batching): drop them")
        return None
    if cfg.mode == "open" or cfg.workers > 1 or cfg.shared_memory != "none":
        raise UsageError(f"model '{info.model}' is a sequence model: its sequences are driven by the closed loop "
                         "(--concurrency N: N streams of sequences), one worker, tensors on the wire: drop "
                         "--request-rate / --workers / --shared-memory")
    first, last = parse_id_range(cfg.sequence_id_range)
    streams = max(cfg.concurrency or [1])
    if last - first + 1 < streams:
        raise UsageError(f"--sequence-id-range {cfg.sequence_id_range}: {last - first + 1} id(s) for {streams} streams "
                         "of sequences: give at least one id per stream (two live sequences may not share an id)")
    return SequencePayloads(build, pool_size, cfg.sequence_length or DEFAULT_SEQUENCE_LENGTH,
                            cfg.sequence_length_variation, (first, last), cfg.seed)


__all__ = ["DEFAULT_SEQUENCE_LENGTH", "DEFAULT_VARIATION", "SequencePayloads", "parse_id_range", "sequence_payloads"]
