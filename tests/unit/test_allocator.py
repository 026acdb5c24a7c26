"""The allocator knob (issue 31 item 3): found at run time, one line naming the package when missing, LD_PRELOAD
for the worker only, the loaded allocator read back from /proc/self/maps."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferperf.config import BenchConfig
from inferperf.errors import UsageError
from inferperf.measure.allocator import allocator_env, find_allocator, loaded_allocator
from inferperf.measure.assemble import case_key_doc
from inferperf.results.model import CaseConfig


def test_a_library_is_found_in_the_given_dirs_or_named_by_its_package(tmp_path: Path) -> None:
    (tmp_path / "libjemalloc.so.2").write_bytes(b"")
    assert find_allocator("jemalloc", [tmp_path]) == tmp_path / "libjemalloc.so.2"
    assert allocator_env("jemalloc", [tmp_path]) == {"LD_PRELOAD": str(tmp_path / "libjemalloc.so.2")}
    assert allocator_env("system", [tmp_path]) == {}
    with pytest.raises(UsageError, match=r"libtcmalloc_minimal.so.4 not found: install it \(apt-get install"
                                         r" libtcmalloc-minimal4\)"):
        find_allocator("tcmalloc", [tmp_path])
    with pytest.raises(UsageError, match="use one of system, jemalloc, tcmalloc"):
        find_allocator("mimalloc", [tmp_path])


def test_the_loaded_allocator_is_read_from_the_maps() -> None:
    jem = "7f00-7f10 r-xp 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n"
    tc = "7f00-7f10 r-xp 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4.5.10\n"
    libc = "7f00-7f10 r-xp 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    assert loaded_allocator(jem + libc) == "jemalloc" and loaded_allocator(tc + libc) == "tcmalloc"
    assert loaded_allocator(libc) == "system"
    assert loaded_allocator() == "system"  # this test process: nothing preloaded


def test_the_default_allocator_leaves_case_keys_as_they_were() -> None:
    base = CaseConfig(backend="onnxruntime", session={"requested": {}, "effective": {}},
                      workload={"shapes": {}, "batch_size": 1, "input_pool_size": 1, "data_source": "x", "seed": 0},
                      scenario="single-stream", concurrency=1, warmup={"iterations": 1, "duration_s": 0},
                      stop={"min_iterations": 1, "min_duration_s": 0, "max_duration_s": 1})
    assert "allocator" not in case_key_doc(base)
    assert case_key_doc(base.model_copy(update={"allocator": "jemalloc"}))["allocator"] == "jemalloc"
    with pytest.raises(ValueError):
        BenchConfig(allocator="mimalloc")
