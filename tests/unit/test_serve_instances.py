"""Model instances and ServedModel loading: CPU split, threads, pinning, row split, warm-up, batching path, errors."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from inferperf.config import BenchConfig, SessionOptions, WorkloadOptions
from inferperf.errors import UsageError
from inferperf.serve.errors import ModelExecutionError, NotReady
from inferperf.serve.instances import (
    InstancePool,
    concat_rows,
    default_threads,
    oversubscription_note,
    pin_this_thread,
    split_cpus,
    split_rows,
)
from inferperf.serve.model import ServedModel
from inferperf.serve.options import ServeOptions
from tests.models import seeded_mlp_onnx

ONE_THREAD = BenchConfig(session=SessionOptions(intra_op_num_threads=1))


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seeded_mlp_onnx(tmp_path_factory.mktemp("inst") / "mlp.onnx")


def test_cpu_split_threads_and_oversubscription() -> None:
    assert split_cpus([0, 1, 2, 3, 4], 2) == [[0, 1, 2], [3, 4]]
    assert split_cpus([0, 1], 3) == [[0, 1]] * 3  # fewer CPUs than instances: each gets all
    assert split_cpus(None, 2) == [None, None]
    assert default_threads(8, 2) == 4 and default_threads(2, 3) == 1
    assert default_threads(8, 2, cpus=[0, 1, 2]) == 2
    assert oversubscription_note(2, 2, 4) is None
    note = oversubscription_note(2, 3, 4)
    assert note and note.startswith("oversubscribed: 2 instance(s) x 3 intra-op threads > 4 effective CPUs")


def test_rows_concatenate_and_split_back_by_offsets() -> None:
    a, b = np.arange(6.0).reshape(2, 3), np.arange(6.0, 9.0).reshape(1, 3)
    feed = concat_rows([{"x": a}, {"x": b}], ["x"])
    assert feed["x"].shape == (3, 3)
    assert concat_rows([{"x": a}], ["x"])["x"] is a  # one request: no copy
    per = split_rows([feed["x"] * 2], [2, 1], ["y"])
    np.testing.assert_array_equal(per[0][0], a * 2)
    np.testing.assert_array_equal(per[1][0], b * 2)
    with pytest.raises(ValueError, match="output 'y' has shape \\[4\\], not 3 rows first"):
        split_rows([np.zeros(4)], [2, 1], ["y"])


def test_pinning_sets_only_the_calling_threads_mask() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    seen: list[list[int]] = []
    t = threading.Thread(target=lambda: seen.append(pin_this_thread([allowed[-1]])))
    t.start()
    t.join(10)
    assert seen == [[allowed[-1]]]
    assert sorted(os.sched_getaffinity(0)) == allowed  # the process (this thread) is untouched
    with pytest.raises(UsageError, match="not available to this process"):
        pin_this_thread([65000])


def test_cpus_outside_the_allowed_set_are_refused_at_load(mlp: Path) -> None:
    with pytest.raises(UsageError, match=r"--cpus \[65000\] not available to this process"):
        ServedModel.load(str(mlp), ONE_THREAD, ServeOptions(cpus=[65000]))


@pytest.mark.parametrize("shared", [False, True])
def test_instances_answer_like_the_direct_session(mlp: Path, shared: bool) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    pool = InstancePool("onnxruntime", SessionOptions(), mlp, 2, shared=shared, cpus=allowed, effective_cpus=len(allowed))
    try:
        assert pool.effective["intra_op_num_threads"] == max(1, len(allowed) // 2)  # effective CPUs / instances
        masks = [pool._threads[i].submit(lambda: sorted(os.sched_getaffinity(threading.get_native_id()))).result()
                 for i in range(2)]
        assert masks == ([allowed, allowed] if shared else split_cpus(allowed, 2))  # each instance thread pinned
        assert sorted(os.sched_getaffinity(0)) == allowed  # the caller's thread is not
        direct = ort.InferenceSession(str(mlp), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(1)
        xs = [rng.standard_normal((r, 32)).astype(np.float32) for r in (1, 3, 2)]

        async def both() -> list:
            return await asyncio.gather(pool.run([{"x": x} for x in xs], [1, 3, 2]), pool.run([{"x": xs[0]}], [1]))

        batch, single = asyncio.run(both())
        for x, outs in zip(xs, batch.per_request, strict=True):
            for got, want in zip(outs, direct.run(None, {"x": x}), strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        assert {batch.instance, single.instance} == {0, 1}  # both instances busy at once
        assert min(batch.input_ns, batch.infer_ns, batch.output_ns) >= 0
    finally:
        pool.close()


def test_fixed_batch_of_1_goes_through_the_make_batchable_path(tmp_path: Path) -> None:
    path = seeded_mlp_onnx(tmp_path / "fixed.onnx", batch=1)
    served = ServedModel.load(str(path), ONE_THREAD, ServeOptions(max_batch_size=4, dynamic_batching=True))
    try:
        assert served.max_batch_size == 4
        assert served.metadata.inputs[0].shape == (-1, 32) and served.metadata.inputs[0].datatype == "FP32"
        assert any("fixed batch of 1; serving a verified batchable copy" in n for n in served.notes)
        x = np.ones((3, 32), np.float32)
        out = asyncio.run(served.infer({"x": x}, 3, ["s"]))
        np.testing.assert_allclose(out["s"], np.full((3, 1), 32.0))
        assert list(out) == ["s"]
    finally:
        asyncio.run(served.close())


def test_a_batch_baked_into_a_reshape_is_refused_with_bench_message(tmp_path: Path) -> None:
    from onnx import TensorProto, helper, numpy_helper, save

    g = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="flat")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[numpy_helper.from_array(np.array([1, 4], np.int64), "shape")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    save(m, str(tmp_path / "blocked.onnx"))
    with pytest.raises(UsageError, match="fixes its batch at 1 in Reshape node 'flat'"):
        ServedModel.load(str(tmp_path / "blocked.onnx"), ONE_THREAD, ServeOptions(max_batch_size=4))


def test_free_dims_skip_warm_up_with_a_note_and_shapes_fix_them(tmp_path: Path) -> None:
    from onnx import TensorProto, helper, save

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "w"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "w"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    save(m, str(tmp_path / "free.onnx"))
    free = ServedModel.load(str(tmp_path / "free.onnx"), ONE_THREAD, ServeOptions())
    fixed_cfg = BenchConfig(session=SessionOptions(intra_op_num_threads=1), workload=WorkloadOptions(dims={"w": 5}))
    fixed = ServedModel.load(str(tmp_path / "free.onnx"), fixed_cfg, ServeOptions())
    try:
        assert free.max_batch_size == 4  # Triton's auto-complete: leading dim free -> 4
        assert free.metadata.inputs[0].shape == (-1, -1)
        assert any(n.startswith("warm-up skipped: input(s) x[-1, -1] have free dims") for n in free.notes)
        assert fixed.metadata.inputs[0].shape == (-1, 5)
        assert not any("warm-up skipped" in n for n in fixed.notes)
    finally:
        asyncio.run(free.close())
        asyncio.run(fixed.close())


def test_oversubscribed_instances_get_a_warning(mlp: Path) -> None:
    cpus = len(os.sched_getaffinity(0))
    cfg = BenchConfig(session=SessionOptions(intra_op_num_threads=cpus))
    served = ServedModel.load(str(mlp), cfg, ServeOptions(instance_count=2))
    try:
        assert any(n.startswith(f"oversubscribed: 2 instance(s) x {cpus} intra-op threads") for n in served.notes)
    finally:
        asyncio.run(served.close())


def test_a_failing_batch_is_a_500_and_the_model_keeps_serving(mlp: Path) -> None:
    served = ServedModel.load(str(mlp), ONE_THREAD, ServeOptions(max_batch_size=4))
    real = served._pool._calls[0]
    calls = [0]

    def flaky(feed: dict) -> list:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("kernel exploded\nsecond line")
        return real(feed)

    served._pool._calls[0] = flaky
    x = np.ones((1, 32), np.float32)

    async def main() -> tuple[Exception | None, dict]:
        try:
            await served.infer({"x": x}, 1)
            err = None
        except ModelExecutionError as e:
            err = e
        ok = await served.infer({"x": x}, 1)
        await served.close()
        return err, ok

    err, ok = asyncio.run(main())
    assert isinstance(err, ModelExecutionError) and err.status == 500
    assert str(err) == "model 'mlp' failed to execute: RuntimeError: kernel exploded"
    assert ok["y"].shape == (1, 16)
    st = served.stats()["inference_stats"]
    assert st["fail"]["count"] == 1 and st["success"]["count"] == 1
    assert served.ready is False
    with pytest.raises(NotReady):
        asyncio.run(served.infer({"x": x}, 1))
