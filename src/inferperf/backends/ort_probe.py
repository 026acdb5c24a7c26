"""Machine peaks measured through ONNX Runtime itself, for the roofline hint (issue 16).

Two generated models (onnx.helper): a large fp32 MatMul (compute-bound; 2*N^3 FLOPs) and an elementwise
Add of a large tensor with a scalar (copy-bound; reads and writes each element once, 8 bytes per element).
Best of a few runs each (peaks, not typical). Cached per machine (CPU model, cores, ORT version, threads)
as JSON under the user cache (``$XDG_CACHE_HOME/inferperf`` or ``~/.cache/inferperf``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np


def _cache_file(threads: int) -> Path:
    import onnxruntime as ort

    cpu = ""
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name")), "")
    except OSError:
        cpu = platform.processor()
    key = hashlib.sha256(f"{cpu}|{os.cpu_count()}|{ort.__version__}|{threads}".encode()).hexdigest()[:16]
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inferperf"
    return root / f"ort-probe-{key}.json"


def _best_s(sess: Any, feed: dict[str, np.ndarray], reps: int) -> float:
    sess.run(None, feed)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        sess.run(None, feed)
        best = min(best, (time.perf_counter_ns() - t0) / 1e9)
    return best


def _session(model: Any, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 4
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def probe_peaks(threads: int, n: int = 1024, copy_elems: int = 16 * 2**20, reps: int = 5,
                refresh: bool = False) -> dict[str, Any]:
    """Peak fp32 FLOP/s and memory bytes/s on this machine through ORT (cached).

    Args:
        threads: intra-op threads (use the profiled session's).
        n: MatMul size (N x N times N x N). copy_elems: elements of the copy-bound tensor (16 Mi: 64 MiB).
        reps: timed runs, best taken. refresh: ignore the cache.

    Returns:
        ``{"peak_flops_per_s", "peak_bytes_per_s", "matmul_n", "copy_bytes", "threads", "cached", "path"}``.
    """
    from onnx import TensorProto, helper

    path = _cache_file(threads)
    if path.is_file() and not refresh:
        try:
            return {**json.loads(path.read_text()), "cached": True, "path": str(path)}
        except (OSError, ValueError):
            pass
    rng = np.random.default_rng(0)
    mm = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "probe_matmul",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])]), opset_imports=[helper.make_opsetid("", 17)])
    a = rng.random((n, n), dtype=np.float32)
    t_mm = _best_s(_session(mm, threads), {"a": a, "b": a}, reps)
    cp = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"])], "probe_copy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [copy_elems])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [copy_elems])],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])]), opset_imports=[helper.make_opsetid("", 17)])
    t_cp = _best_s(_session(cp, threads), {"x": rng.random(copy_elems, dtype=np.float32)}, reps)
    out = {"peak_flops_per_s": 2.0 * n**3 / t_mm, "peak_bytes_per_s": 8.0 * copy_elems / t_cp,
           "matmul_n": n, "copy_bytes": 8 * copy_elems, "threads": threads}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out))
    except OSError:
        pass
    return {**out, "cached": False, "path": str(path)}
