"""Sequence batching's scheduler (serve/sequences.py, issue 42) on the fake clock: control inputs and implicit
state per request, the refusals in Triton's words, slots freed at END and by the idle timeout, a START waiting
for a slot, requests of one sequence in order, a client that goes away mid-sequence, and an accumulator's sums
over 100 interleaved sequences."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import numpy as np
import pytest

from inferperf.clock import FakeClock
from inferperf.serve.tensor_types import ProtocolError
from inferperf.serve.sequences import (Control, SequenceError, SequenceParams, SequenceScheduler, SequenceSettings,
                                       State, sequence_params)

CONTROLS = (Control("START", "START", "INT32"), Control("END", "END", "INT32"), Control("READY", "READY", "INT32"),
            Control("CORRID", "CORRID", "UINT64"))
ACC = SequenceSettings("oldest", 1_000_000, CONTROLS, (State("ACC_IN", "ACC_OUT", "INT32", (1,)),), 4)


class Accumulator:
    """The model: ACC_OUT = ACC_IN + INPUT, OUTPUT = ACC_OUT; records each feed; ``gate`` holds a call."""

    def __init__(self) -> None:
        self.feeds: list[dict[str, np.ndarray]] = []
        self.gate: asyncio.Event | None = None

    async def __call__(self, feed: dict[str, np.ndarray], rows: int, requested: Any, gone: Any,
                       **kw: Any) -> dict[str, np.ndarray]:
        self.feeds.append(feed)
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(0)
        acc = feed["ACC_IN"] + feed["INPUT"]
        return {"OUTPUT": acc, "ACC_OUT": acc}


def _x(v: int) -> dict[str, np.ndarray]:
    return {"INPUT": np.array([[v]], np.int32)}


def test_control_inputs_state_and_the_answer_without_the_state() -> None:
    model, clock = Accumulator(), FakeClock()
    s = SequenceScheduler(model, "acc", ACC, slots=2, clock=clock)

    async def go() -> list[Any]:
        out = [await s.infer(_x(5), 1, None, None, SequenceParams(42, start=True))]
        out.append(await s.infer(_x(7), 1, None, None, SequenceParams(42)))
        out.append(await s.infer(_x(1), 1, ["OUTPUT"], None, SequenceParams(42, end=True)))
        return out

    outs = asyncio.run(go())
    assert [int(o["OUTPUT"][0, 0]) for o in outs] == [5, 12, 13]
    assert all(set(o) == {"OUTPUT"} for o in outs)  # the state output stays in the server
    flags = [(int(f["START"][0, 0]), int(f["END"][0, 0]), int(f["READY"][0, 0]), int(f["CORRID"][0, 0]))
             for f in model.feeds]
    assert flags == [(1, 0, 1, 42), (0, 0, 1, 42), (0, 1, 1, 42)]
    assert model.feeds[0]["CORRID"].dtype == np.uint64 and model.feeds[0]["ACC_IN"].tolist() == [[0]]
    assert not s.live and len(s._free) == 2  # the slot came back at END


def test_refusals_name_the_rule() -> None:
    s = SequenceScheduler(Accumulator(), "acc", ACC, slots=2, clock=FakeClock())

    async def go() -> None:
        with pytest.raises(SequenceError, match="must specify a non-zero or non-empty correlation ID"):
            await s.infer(_x(1), 1, None, None, None)
        with pytest.raises(SequenceError, match="must specify the START flag"):
            await s.infer(_x(1), 1, None, None, SequenceParams(9))
        await s.infer(_x(5), 1, None, None, SequenceParams(9, start=True))
        # a START for a live id ends it and starts a new one (Triton's conflict rule): the sum starts again
        assert int((await s.infer(_x(1), 1, None, None, SequenceParams(9, start=True)))["OUTPUT"][0, 0]) == 1
        await s.infer(_x(1), 1, None, None, SequenceParams(9, end=True))
        with pytest.raises(SequenceError, match="must specify the START flag"):  # ended: not live any more
            await s.infer(_x(1), 1, None, None, SequenceParams(9))
        for bad in ("abc", " 8", 2**64):  # CORRID is UINT64
            with pytest.raises(SequenceError, match="send an integer id in that type's range"):
                await s.infer(_x(1), 1, None, None, SequenceParams(bad, start=True))
        with pytest.raises(SequenceError, match="must specify batch-size 1"):
            await s.infer({"INPUT": np.ones((2, 1), np.int32)}, 2, None, None, SequenceParams(10, start=True))
        assert not s.live and len(s._free) == 2  # nothing refused holds a slot

    asyncio.run(go())
    assert sequence_params({}) is None and sequence_params({"sequence_id": 0}) is None
    assert sequence_params({"sequence_id": "s-1", "sequence_start": True}) == SequenceParams("s-1", True, False)
    with pytest.raises(ProtocolError, match="must be a boolean"):
        sequence_params({"sequence_id": 3, "sequence_end": "yes"})
    with pytest.raises(ProtocolError, match="need a non-zero sequence_id"):
        sequence_params({"sequence_start": True})
    with pytest.raises(ProtocolError, match="unsigned 64-bit"):
        sequence_params({"sequence_id": -7})


def test_the_idle_timeout_frees_a_slot_and_the_sequence_is_then_unknown() -> None:
    clock = FakeClock()
    s = SequenceScheduler(Accumulator(), "acc", ACC, slots=1, clock=clock)

    async def go() -> None:
        await s.infer(_x(1), 1, None, None, SequenceParams(1, start=True))
        clock.advance_ns(999_999_000)  # just under max_sequence_idle_microseconds (1 s)
        assert s.expire_idle() == 0 and 1 in s.live
        await s.infer(_x(1), 1, None, None, SequenceParams(1))  # a request resets the idle time
        clock.advance_ns(1_000_000_000)
        await s.infer(_x(1), 1, None, None, SequenceParams(2, start=True))  # takes the slot sequence 1 held
        assert s.expired == 1 and list(s.live) == [2]
        with pytest.raises(SequenceError, match="idle past max_sequence_idle_microseconds"):
            await s.infer(_x(1), 1, None, None, SequenceParams(1))

    asyncio.run(go())


def test_a_start_waits_for_a_free_slot_and_a_slot_never_holds_two_sequences() -> None:
    """One slot: with a wait limit a START gives up (the caller answers 504); sequence 3's START waits until
    sequence 1 ends, and a request of sequence 3 sent before its START was answered waits behind it."""
    model = Accumulator()
    s = SequenceScheduler(model, "acc", ACC, slots=1, clock=FakeClock(), wait_s=0.2)

    async def go() -> None:
        await s.infer(_x(1), 1, None, None, SequenceParams(1, start=True))
        with pytest.raises(TimeoutError):
            await s.infer(_x(1), 1, None, None, SequenceParams(2, start=True))
        s.wait_s = None  # from here on a START waits as long as it takes (real loop time: a stall must not end it)
        waiting = asyncio.ensure_future(s.infer(_x(10), 1, None, None, SequenceParams(3, start=True)))
        behind = asyncio.ensure_future(s.infer(_x(5), 1, None, None, SequenceParams(3)))  # sent before the answer
        await asyncio.sleep(0.01)
        assert not waiting.done() and not behind.done() and s.live[3].slot == -1  # live, waiting for its slot
        await s.infer(_x(1), 1, None, None, SequenceParams(1, end=True))
        assert int((await waiting)["OUTPUT"][0, 0]) == 10 and list(s.live) == [3]
        assert int((await behind)["OUTPUT"][0, 0]) == 15  # after its START, in order

    asyncio.run(go())


def test_requests_of_one_sequence_run_one_at_a_time_in_order() -> None:
    model = Accumulator()
    s = SequenceScheduler(model, "acc", ACC, slots=2, clock=FakeClock())

    async def go() -> list[int]:
        await s.infer(_x(0), 1, None, None, SequenceParams(5, start=True))
        model.gate = asyncio.Event()
        calls = [asyncio.ensure_future(s.infer(_x(v), 1, None, None, SequenceParams(5))) for v in (1, 2, 3)]
        await asyncio.sleep(0.01)
        assert len(model.feeds) == 2  # the first waits on the gate; the others wait their turn
        model.gate.set()
        return [int((await c)["OUTPUT"][0, 0]) for c in calls]

    assert asyncio.run(go()) == [1, 3, 6]


def test_a_client_gone_mid_sequence_leaves_it_live_until_its_idle_timeout() -> None:
    clock, model = FakeClock(), Accumulator()
    s = SequenceScheduler(model, "acc", ACC, slots=1, clock=clock)

    async def go() -> None:
        await s.infer(_x(4), 1, None, None, SequenceParams(8, start=True))
        model.gate = asyncio.Event()
        call = asyncio.ensure_future(s.infer(_x(1), 1, None, None, SequenceParams(8)))
        await asyncio.sleep(0.01)
        call.cancel()  # the client went away while its request ran
        with pytest.raises(asyncio.CancelledError):
            await call
        model.gate = None
        assert 8 in s.live  # still live: its state is the one before the lost request
        assert int((await s.infer(_x(2), 1, None, None, SequenceParams(8)))["OUTPUT"][0, 0]) == 6
        clock.advance_ns(2_000_000_000)
        assert s.expire_idle() == 1 and not s.live

    asyncio.run(go())


def test_an_accumulator_over_100_interleaved_sequences_on_fewer_slots() -> None:
    """100 sequences of 1-9 requests each, sent interleaved (each client sends its next request when its last was
    answered) through 16 slots: every answer is its sequence's running sum, and every slot is free at the end."""
    rng = random.Random(0)
    plans = {sid: [rng.randint(-50, 50) for _ in range(rng.randint(1, 9))] for sid in range(1, 101)}
    s = SequenceScheduler(Accumulator(), "acc", ACC, slots=16, clock=FakeClock())
    got: dict[int, list[int]] = {}

    async def client(sid: int, values: list[int]) -> None:
        await asyncio.sleep(rng.random() / 100)
        for k, v in enumerate(values):
            p = SequenceParams(sid, start=k == 0, end=k == len(values) - 1)
            got.setdefault(sid, []).append(int((await s.infer(_x(v), 1, None, None, p))["OUTPUT"][0, 0]))
            await asyncio.sleep(0)

    async def go() -> None:
        await asyncio.gather(*(client(sid, v) for sid, v in plans.items()))

    asyncio.run(go())
    assert got == {sid: list(np.cumsum(v)) for sid, v in plans.items()}
    assert not s.live and sorted(s._free) == list(range(16))


def test_load_side_sequences_per_stream_in_order_with_lengths_and_ids_in_range() -> None:
    """``load``'s per-stream sequences (loadgen/sequence_load.py): each stream's requests are START, middle, END
    of one sequence, then the next; lengths within mean x (1 +- 20 %); ids from the range, wrapping."""
    from inferperf.loadgen.sequence_load import SequencePayloads, parse_id_range

    sent: list[tuple[int, int, bool, bool]] = []
    src = SequencePayloads(lambda k, sid, start, end: sent.append((k, sid, start, end)) or b"", 4, 10, 20.0,
                           parse_id_range("5:8"))
    per_stream: dict[int, list[tuple[int, bool, bool]]] = {0: [], 1: []}
    for i in range(200):
        src.next(i % 2)
        per_stream[i % 2].append(sent[-1][1:])
    for reqs in per_stream.values():
        seqs, cur = [], []
        for sid, start, end in reqs:
            assert start == (not cur)  # START exactly on a sequence's first request
            cur.append(sid)
            if end:
                seqs.append(cur)
                cur = []
        assert all(len(set(s)) == 1 and 8 <= len(s) <= 12 for s in seqs)  # one id each, lengths 10 +- 20 %
    ids = [s for _, s, start, _ in sent if start]
    assert set(ids) == {5, 6, 7, 8} and ids[:5] == [5, 6, 7, 8, 5]  # from the range, wrapping
    assert src.started == len(ids) and src.ended == sum(e for *_, e in sent)
    src.reset()
    src.next(0)
    assert sent[-1][2] and src.started == 1  # a new step starts new sequences
    with pytest.raises(Exception, match="ids are >= 1 and END >= START"):
        parse_id_range("9:3")


def test_direct_runs_every_request_of_a_sequence_on_its_slots_instance() -> None:
    """direct with 2 instances x 2 rows: slots handed out round robin across the instances, and each request of
    a sequence names its slot's instance (the model's lane for it)."""
    seen: dict[int, set[int]] = {}
    model = Accumulator()

    async def run(feed: dict[str, np.ndarray], rows: int, requested: Any, gone: Any, **kw: Any) -> Any:
        seen.setdefault(int(feed["CORRID"][0, 0]), set()).add(kw["instance"])
        return await model(feed, rows, requested, gone)

    direct = SequenceSettings("direct", 1_000_000, CONTROLS, ACC.states)
    s = SequenceScheduler(run, "acc", direct, slots=4, clock=FakeClock(), per_instance=2)

    async def go() -> None:
        for sid in (1, 2, 3, 4):
            await s.infer(_x(1), 1, None, None, SequenceParams(sid, start=True))
        for _ in range(3):
            for sid in (1, 2, 3, 4):
                await s.infer(_x(1), 1, None, None, SequenceParams(sid))

    asyncio.run(go())
    assert all(len(v) == 1 for v in seen.values())  # one instance per sequence
    assert [next(iter(seen[sid])) for sid in (1, 2, 3, 4)] == [0, 1, 0, 1]  # round robin across instances


def test_a_start_that_fails_frees_its_slot_and_a_stale_request_never_runs_on_a_restarted_id() -> None:
    """A START whose run fails leaves nothing live; a request queued behind a sequence that a new START of the
    same id replaced is refused, never run on the new sequence's state; a START cancelled as a slot is handed
    to it passes the slot on to the next waiting START."""
    model = Accumulator()
    s = SequenceScheduler(model, "acc", ACC, slots=1, clock=FakeClock())

    async def fail(*a: Any, **k: Any) -> Any:
        raise RuntimeError("the model failed")

    async def go() -> None:
        s._run = fail
        with pytest.raises(RuntimeError):
            await s.infer(_x(1), 1, None, None, SequenceParams(1, start=True))
        assert not s.live and list(s._free) == [0]
        s._run = model
        await s.infer(_x(100), 1, None, None, SequenceParams(2, start=True))
        model.gate = asyncio.Event()
        running = asyncio.ensure_future(s.infer(_x(1), 1, None, None, SequenceParams(2)))
        stale = asyncio.ensure_future(s.infer(_x(1000), 1, None, None, SequenceParams(2)))  # queued behind it
        await asyncio.sleep(0.01)
        model.gate.set()
        model.gate = None
        restart = await s.infer(_x(7), 1, None, None, SequenceParams(2, start=True))  # replaces sequence 2
        assert int(restart["OUTPUT"][0, 0]) == 7
        assert int((await running)["OUTPUT"][0, 0]) == 101
        with pytest.raises(SequenceError, match="must specify the START flag"):
            await stale
        assert int((await s.infer(_x(1), 1, None, None, SequenceParams(2, end=True)))["OUTPUT"][0, 0]) == 8
        # a START cancelled in the same pass as its slot comes hands the slot on
        await s.infer(_x(1), 1, None, None, SequenceParams(3, start=True))
        b = asyncio.ensure_future(s.infer(_x(1), 1, None, None, SequenceParams(4, start=True)))
        c = asyncio.ensure_future(s.infer(_x(5), 1, None, None, SequenceParams(5, start=True)))
        await asyncio.sleep(0.01)
        s._release(s.live[3])  # sequence 3 ends: its slot goes to b's waiter ...
        b.cancel()  # ... and b is cancelled in the same pass
        assert int((await c)["OUTPUT"][0, 0]) == 5 and list(s.live) == [5]
        with pytest.raises(asyncio.CancelledError):
            await b

    asyncio.run(go())
