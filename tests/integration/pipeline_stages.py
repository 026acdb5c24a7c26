"""Stage functions for the pipeline engine tests (importable by process workers: the pipeline file's folder)."""

from __future__ import annotations

import time

import numpy as np


def numbers(count: int = 16):
    """Items {"i": k, "x": float32 [4]} for k < count."""
    for k in range(count):
        yield {"i": k, "x": np.full(4, k, np.float32)}


def sleep_2ms(item):
    time.sleep(0.002)
    return item


def sleep_10ms(item):
    time.sleep(0.010)
    return item


def double(item):
    item["x"] = item["x"] * 2
    return item


def fail_on_odd(item):
    if item["i"] % 2:
        raise ValueError(f"odd item {item['i']}")
    return item


def spin_5ms(item):
    """Pure-Python CPU work (holds the GIL) for about 5 ms of CPU time."""
    t = time.thread_time() + 0.005
    n = 0
    while time.thread_time() < t:
        n += 1
    item["spins"] = n
    return item


def feeds(item):
    item["feed"] = np.full((1, 3, 32, 32), float(item["i"]) / 16, np.float32)
    return item


def check(item):
    return {"doubled": float(np.all(item["x"] == 2 * item["i"]))}


def file_size(item):
    """A file source item -> {"name", "size"}."""
    return {"name": item["name"], "size": len(item["bytes"])}


def fail_on_odd_size(item):
    if item["size"] % 2 == 0:
        raise ValueError(f"even size {item['size']}")
    return item


def add_lock(item):
    """Puts an object that cannot be copied into the item."""
    import threading

    item["lock"] = threading.Lock()
    return item


def sleep_20s(item):
    time.sleep(20)
    return item


def bad_check(item):
    raise ValueError("check broke")
