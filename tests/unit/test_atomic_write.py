"""fsutil: a failed write leaves the old file intact and no temporary files; writers go through it."""

from __future__ import annotations

import csv
import os
import stat

import numpy as np
import pytest

from inferperf import fsutil
from inferperf.results import io as rio


class Boom(RuntimeError):
    pass


def _only(folder):
    return sorted(p.name for p in folder.iterdir())


def test_text_and_bytes_replace_and_leave_no_temp(tmp_path):
    p = tmp_path / "a.json"
    assert fsutil.atomic_write_text(p, "old") == p
    fsutil.atomic_write_text(p, "new é")
    assert p.read_text(encoding="utf-8") == "new é"
    fsutil.atomic_write_bytes(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert _only(tmp_path) == ["a.json", "b.bin"]


@pytest.mark.parametrize("mode", ["w", "wb"])
def test_writer_that_raises_keeps_old_file_and_no_temp(tmp_path, mode):
    p = tmp_path / "index.json"
    p.write_text("old content")
    with pytest.raises(Boom):
        with fsutil.atomic_open(p, mode) as f:
            f.write("half" if mode == "w" else b"half")
            f.flush()
            raise Boom
    assert p.read_text() == "old content"
    assert _only(tmp_path) == ["index.json"]


def test_missing_destination_stays_missing_on_failure(tmp_path):
    p = tmp_path / "new.csv"
    with pytest.raises(Boom):
        with fsutil.atomic_open(p, "w", newline="") as f:
            csv.writer(f).writerow(["a", "b"])
            raise Boom
    assert _only(tmp_path) == []


def test_npz_through_open_file_keeps_its_name(tmp_path):
    # np.savez appends ".npz" to a name without it: writing through the open file avoids that.
    p = tmp_path / "r.samples.npz"
    with fsutil.atomic_open(p, "wb") as f:
        np.savez_compressed(f, x=np.arange(5))
    with np.load(p) as z:
        assert z["x"].tolist() == [0, 1, 2, 3, 4]
    assert _only(tmp_path) == ["r.samples.npz"]


def test_atomic_path_for_name_taking_writers(tmp_path):
    p = tmp_path / "m.onnx"
    p.write_bytes(b"old")
    with pytest.raises(Boom):
        with fsutil.atomic_path(p) as tmp:
            tmp.write_bytes(b"partial")
            raise Boom
    assert p.read_bytes() == b"old" and _only(tmp_path) == ["m.onnx"]
    with fsutil.atomic_path(p, fsync=True) as tmp:
        assert tmp.parent == p.parent and tmp.name.endswith(".tmp")
        tmp.write_bytes(b"new")
    assert p.read_bytes() == b"new" and _only(tmp_path) == ["m.onnx"]


def test_fsync_and_permissions_follow_umask(tmp_path):
    p = fsutil.atomic_write_text(tmp_path / "x.txt", "x", fsync=True)
    old = os.umask(0o022)
    os.umask(old)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~old  # not mkstemp's 0o600


def test_bad_mode_and_missing_folder(tmp_path):
    with pytest.raises(ValueError, match="'w' or 'wb'"):
        with fsutil.atomic_open(tmp_path / "x", "a"):
            pass
    with pytest.raises(OSError):
        fsutil.atomic_write_text(tmp_path / "nope" / "x", "x")


def test_result_save_failure_keeps_old_result_and_sidecar(tmp_path, monkeypatch):
    from inferperf.clock import FakeClock
    from inferperf.config import BenchConfig, StopOptions, WarmupOptions
    from inferperf.measure.bench import bench

    cfg = BenchConfig(backend="null", null_latency_ms=[1.0, 2.0], warmup=WarmupOptions(iterations=1),
                      stop=StopOptions(min_iterations=120, min_duration_s=0, max_duration_s=1e6))
    r = bench("null", cfg, clock=FakeClock(), command=["inferperf", "bench"])
    p = rio.save(r, tmp_path / "r.json", sidecar_threshold=100)
    side = rio.sidecar_path(p)
    old_json, old_npz = p.read_bytes(), side.read_bytes()
    real = np.savez_compressed

    def half_then_fail(f, **arrays):
        real(f, **{k: v[:5] for k, v in arrays.items()})  # some bytes are written, then the disk fills up
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rio.np, "savez_compressed", half_then_fail)
    with pytest.raises(Exception, match="No space left"):
        rio.save(r, p, sidecar_threshold=100)
    assert p.read_bytes() == old_json and side.read_bytes() == old_npz
    assert _only(tmp_path) == ["r.json", "r.samples.npz"]
    monkeypatch.setattr(rio.np, "savez_compressed", real)
    assert rio.load(p).samples.latency_ns == r.samples.latency_ns
