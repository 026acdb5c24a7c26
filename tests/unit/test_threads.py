"""Per-thread CPU and run-queue wait from /proc (issue 39 item 2): a named thread's own CPU time, its role, and
the difference between two reads."""

from __future__ import annotations

import os
import threading
import time

import pytest

from inferperf.measure.threads import (
    LOOP_CHILD_NAME,
    LOOP_NAME,
    ThreadTimes,
    by_role,
    name_this_thread,
    native_id,
    read_threads,
    rename_loop_children,
    role_of,
    thread_delta,
)


def _reads_around(work, name: str | None = None) -> tuple[int, dict, dict]:  # noqa: ANN001
    """Run ``work()`` on a new thread (named ``name``) between two reads of this process's threads; returns (its
    TID, the read before, the read after). The thread waits for the first read before working and stays alive until
    after the second, so both reads hold it."""
    tid: list[int] = []
    ready, go, done, leave = (threading.Event() for _ in range(4))

    def run() -> None:
        if name:
            name_this_thread(name)
        tid.append(native_id())
        ready.set()
        go.wait()
        work()
        done.set()
        leave.wait()

    t = threading.Thread(target=run)
    t.start()
    try:
        assert ready.wait(5)
        before = read_threads(os.getpid())
        go.set()
        assert done.wait(10)
        after = read_threads(os.getpid())
    finally:
        leave.set()
        t.join()
    return tid[0], before, after


def test_a_named_busy_thread_shows_its_cpu_time_under_its_role() -> None:
    """A thread named ip-pool-1 spins 150 ms of its own CPU time between two reads: the difference holds its
    name and about that CPU time, and it sums under its role."""
    def spin() -> None:
        t_end = time.thread_time() + 0.15
        while time.thread_time() < t_end:
            pass

    tid, before, after = _reads_around(spin, "ip-pool-1")
    d = thread_delta(before, after)[tid]
    assert d.name == "ip-pool-1" and 0.14e9 <= d.cpu_ns <= 0.5e9 and d.slices >= 1 and d.wait_ns >= 0
    roles = by_role({tid: d})
    assert roles == {"pool-1": {"threads": 1, "cpu_ns": d.cpu_ns, "wait_ns": d.wait_ns, "slices": d.slices,
                                "wakeups": d.wakeups}}


def test_a_thread_that_sleeps_20_times_shows_20_wakeups() -> None:
    """``wakeups`` counts a thread's voluntary context switches: one that sleeps 20 times between two reads (and
    nothing else runs Python meanwhile, so it never waits for the GIL) shows 20, give or take its waits on the
    events around them; the reading thread, blocked on an event all along, shows at most a few. (Not 0 and 20
    exactly: Linux counts every sleep, a wait for the GIL included.)"""
    def sleep_20() -> None:
        for _ in range(20):
            time.sleep(0.002)

    tid, before, after = _reads_around(sleep_20)
    d = thread_delta(before, after)
    # at most a few more: its waits on the events, and on the GIL should another thread of the test process run
    assert 20 <= d[tid].wakeups <= 30, d[tid]
    assert d[threading.main_thread().native_id].wakeups <= 8


@pytest.mark.parametrize(("name", "role"), [("inferperf-loop", "event-loop"), ("ip-inst-0", "instance-0"),
                                            ("ip-inst-12", "instance-12"), ("ip-pool-2", "pool-2"),
                                            ("python", "other"), ("ip-loop", "other"), ("inferperf", "other"),
                                            ("ip-inst-", "other")])
def test_roles(name: str, role: str) -> None:
    assert role_of(name) == role


def test_delta_counts_a_new_thread_from_zero_and_sums_by_role() -> None:
    b = {1: ThreadTimes(1, "inferperf-loop", 100, 10, 1)}
    a = {1: ThreadTimes(1, "inferperf-loop", 350, 30, 4), 2: ThreadTimes(2, "ip-inst-0", 500, 5, 2),
         3: ThreadTimes(3, "ip-inst-0", 100, 1, 1)}
    d = thread_delta(b, a)
    assert d[1] == ThreadTimes(1, "inferperf-loop", 250, 20, 3) and d[2] == a[2]
    assert by_role(d)["instance-0"] == {"threads": 2, "cpu_ns": 600, "wait_ns": 6, "slices": 3, "wakeups": 0}


def test_a_thread_started_from_the_loop_inherits_its_name_and_is_renamed_out_of_the_loop_role() -> None:
    """Linux gives a new thread its creator's name: a thread started from the thread named inferperf-loop reads as
    a second event loop until rename_loop_children renames it; the loop keeps its name, and by_role with the
    loop's TID counts one event loop either way."""
    tids: dict[str, int] = {}
    ready, leave = threading.Event(), threading.Event()

    def child() -> None:
        tids["child"] = native_id()
        ready.set()
        leave.wait(10)

    def loop() -> None:
        name_this_thread(LOOP_NAME)
        tids["loop"] = native_id()
        c = threading.Thread(target=child)
        c.start()
        c.join()

    t = threading.Thread(target=loop)
    t.start()
    try:
        assert ready.wait(5)
        now = read_threads(os.getpid())
        assert now[tids["child"]].name == LOOP_NAME  # inherited: the case this guards against
        assert by_role(now)["event-loop"]["threads"] == 2
        assert by_role(now, loop_tid=tids["loop"])["event-loop"]["threads"] == 1
        assert rename_loop_children(tids["loop"]) >= 1
        after = read_threads(os.getpid())
        assert after[tids["child"]].name == LOOP_CHILD_NAME and after[tids["loop"]].name == LOOP_NAME
        assert by_role(after)["event-loop"]["threads"] == 1 and role_of(LOOP_CHILD_NAME) == "other"
    finally:
        leave.set()
        t.join()
