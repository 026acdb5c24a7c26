"""A real leak for soak tests: this process's resident memory grows while the block runs.

Soak tests that measure this process (``bench --soak-s`` in-process, ``inferperf serve`` in a thread) use
it as the must-say-yes case on real RSS readings. Each MiB is its own anonymous mapping with every page
written, so it is resident at once and returned at the end: heap memory freed by an earlier test in the
process (which the allocator keeps and hands out again) cannot hide the growth.
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def growing_memory(every_s: float, most_mib: int) -> Iterator[list[mmap.mmap]]:
    """Hold 1 MiB more every ``every_s`` seconds (a thread; ``most_mib`` MiB at most) until the block ends,
    then let it all go."""
    held: list[mmap.mmap] = []
    stop = threading.Event()

    def grow() -> None:
        while not stop.is_set() and len(held) < most_mib:
            m = mmap.mmap(-1, 1 << 20)
            for i in range(0, 1 << 20, mmap.PAGESIZE):
                m[i] = 1
            held.append(m)
            stop.wait(every_s)

    t = threading.Thread(target=grow, daemon=True, name="growing-memory")
    t.start()
    try:
        yield held
    finally:
        stop.set()
        t.join(timeout=5)
        for m in held:
            m.close()
        held.clear()
