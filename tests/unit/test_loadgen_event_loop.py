"""The open loop's selector (loadgen/event_loop.py): a timed wait goes to select(2) with its microseconds, the
events are then collected without waiting, and a wait is never early."""

from __future__ import annotations

import asyncio
import select
import socket
import sys
import time

import pytest

from inferperf.loadgen import event_loop

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="epoll: Linux only")


def test_a_timed_wait_is_microseconds_and_never_early(monkeypatch: pytest.MonkeyPatch) -> None:
    sel = event_loop.PreciseEpollSelector()
    seen: list[float | None] = []
    real = select.select

    def spy(r, w, x, timeout=None):  # noqa: ANN001, ANN202
        seen.append(timeout)
        return real(r, w, x, timeout)

    monkeypatch.setattr(select, "select", spy)
    try:
        for wait_s in (0.0003, 0.0021):
            t = time.perf_counter()
            assert sel.select(wait_s) == []
            assert time.perf_counter() - t >= wait_s  # never early
        assert seen == [0.0003, 0.0021]
        assert sel.select(0) == [] and seen == [0.0003, 0.0021]  # a poll stays one epoll call
    finally:
        sel.close()


def test_ready_events_come_back_at_once_from_a_timed_wait() -> None:
    sel = event_loop.PreciseEpollSelector()
    a, b = socket.socketpair()
    try:
        sel.register(a, event_loop.selectors.EVENT_READ)
        b.send(b"x")
        t = time.perf_counter()
        events = sel.select(5.0)
        assert time.perf_counter() - t < 1.0
        assert [k.fileobj for k, _ in events] == [a]
    finally:
        sel.close()
        a.close()
        b.close()


def test_open_loop_runs_on_it_and_closed_loop_on_uvloop_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = event_loop.loop_factory(closed=False)()
    try:
        assert isinstance(loop._selector, event_loop.PreciseEpollSelector)  # type: ignore[attr-defined]
        assert event_loop.loop_name(loop) == "asyncio"
    finally:
        loop.close()
    pytest.importorskip("uvloop")
    loop = event_loop.loop_factory(closed=True)()
    try:
        assert event_loop.loop_name(loop) == "uvloop"
    finally:
        loop.close()
    monkeypatch.setenv("INFERPERF_EVENT_LOOP", "asyncio")
    loop = event_loop.loop_factory(closed=True)()
    try:
        assert event_loop.loop_name(loop) == "asyncio"
    finally:
        loop.close()


def test_asyncio_sleep_on_it_is_not_early() -> None:
    async def main() -> list[float]:
        out = []
        for _ in range(5):
            t = time.perf_counter()
            await asyncio.sleep(0.0004)
            out.append(time.perf_counter() - t)
        return out

    loop = event_loop.loop_factory(closed=False)()
    try:
        assert min(loop.run_until_complete(main())) >= 0.0004
    finally:
        loop.close()


def test_an_epoll_descriptor_past_fd_setsize_keeps_epolls_waits_and_no_wait_is_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """select(2) refuses a descriptor >= FD_SETSIZE (ValueError): such a loop (opened after a thousand others)
    keeps epoll's millisecond waits; an untimed wait is plain epoll and ends on the first event."""
    import threading

    calls: list[float | None] = []
    monkeypatch.setattr(select, "select", lambda *a: calls.append(a[-1]))  # type: ignore[func-returns-value]
    monkeypatch.setattr(event_loop, "FD_SETSIZE", 0)  # every descriptor is "too high"
    loop = event_loop.loop_factory(closed=False)()

    async def main() -> tuple[float, float]:
        t = time.perf_counter()
        await asyncio.sleep(0.0004)
        slept = time.perf_counter() - t
        woken = asyncio.Event()  # no timer at all: the loop waits untimed until another thread wakes it
        threading.Timer(0.05, lambda: loop.call_soon_threadsafe(woken.set)).start()
        t = time.perf_counter()
        await woken.wait()
        return slept, time.perf_counter() - t

    try:
        slept, waited = loop.run_until_complete(main())
    finally:
        loop.close()
    assert calls == [] and slept >= 0.0004 and waited >= 0.05
