"""A served replica names its threads by role (issue 39 item 2), so per-thread CPU time and run-queue waits from
/proc can be put on the event loop, each instance, and each instance's runtime pool."""

from __future__ import annotations

import os

import httpx
import numpy as np
import pytest

from inferperf.config import BenchConfig
from inferperf.measure.threads import by_role, read_threads, thread_delta
from inferperf.serve.options import ServeOptions
from inferperf.serve.server import serving
from tests.models import seeded_mlp_onnx


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):  # noqa: ANN001, ANN201
    return seeded_mlp_onnx(tmp_path_factory.mktemp("threads") / "mlp.onnx")


@pytest.mark.parametrize("intra", [1, 2])
def test_the_event_loop_and_each_instance_are_found_by_name_and_do_the_work(mlp, intra: int) -> None:  # noqa: ANN001
    """Two instances: one event-loop thread, one thread each instance (the runtime's caller) whose CPU time grows
    with the requests it served; with 2 intra-op threads ORT's pool threads carry their instance's pool name."""
    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": intra}, "warmup": {"iterations": 1}})
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 32], "data": np.ones(32).tolist()}]}
    # threads older than this server (an earlier test's ORT session not yet collected keeps its pool threads,
    # named after that test's instances) are not this server's: count only threads started with it
    older = set(read_threads(os.getpid()))
    with serving(str(mlp), cfg, ServeOptions(instance_count=2), name="mlp") as handle:
        before = read_threads(os.getpid())
        with httpx.Client(base_url=handle.url, timeout=30) as c:
            for _ in range(200):
                assert c.post("/v2/models/mlp/infer", json=body).status_code == 200
        after = read_threads(os.getpid())
        delta = {tid: t for tid, t in thread_delta(before, after).items() if tid not in older}
        roles = by_role(delta, loop_tid=handle.app.loop_tid)
    # one thread is the loop; threads a library started from it (grpc's) inherit its name and are renamed
    # within a second (serve/server.py's tick), so by name they are at most the loop plus those not yet renamed
    assert after[handle.app.loop_tid].name == "inferperf-loop"
    assert roles["event-loop"]["threads"] == 1 and roles["event-loop"]["cpu_ns"] > 0
    assert roles["instance-0"]["threads"] == 1 and roles["instance-1"]["threads"] == 1
    assert roles["instance-0"]["cpu_ns"] + roles["instance-1"]["cpu_ns"] > 0
    # ORT's intra-op pool: intra - 1 threads per session, started while the session was created (the first
    # session of the process also starts one process-wide thread of ORT's, named after that instance's pool)
    assert roles.get("pool-1", {}).get("threads", 0) == intra - 1
    assert roles.get("pool-0", {}).get("threads", 0) in (intra - 1, intra)
