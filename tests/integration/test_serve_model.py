"""ServedModel under concurrency, no HTTP: 32 clients, >= 2,000 distinct requests, 0 mismatches.

The model is a seeded MLP (tests/models.py ``seeded_mlp_onnx``: outputs depend on
inputs), so a response routed to the wrong request, or rows split at the wrong
offsets, cannot match the direct session output for that request's own input.
A counter wrapped around the instances' runtime call proves the model ran every
row of every request.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from inferperf.config import BenchConfig, SessionOptions
from inferperf.serve.model import ServedModel
from inferperf.serve.options import ServeOptions
from tests.models import seeded_mlp_onnx

CLIENTS = 32
PER_CLIENT = 63  # 32 x 63 = 2,016 requests
RTOL, ATOL = 1e-4, 1e-5  # float32 GEMM blocking may change with the batch (as bench's batching check)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seeded_mlp_onnx(tmp_path_factory.mktemp("serve") / "mlp.onnx")


def test_32_concurrent_clients_get_exactly_their_own_rows(mlp: Path) -> None:
    rng = np.random.default_rng(2024)
    n = CLIENTS * PER_CLIENT
    xs = [rng.standard_normal((1 + i % 3, 32)).astype(np.float32) for i in range(n)]  # 1-3 rows, all distinct
    options = ServeOptions(max_batch_size=8, max_queue_delay_us=2000, instance_count=2)
    served = ServedModel.load(str(mlp), BenchConfig(session=SessionOptions(intra_op_num_threads=1)), options)
    seen_rows = [0] * len(served._pool._calls)  # one slot per instance: each is written by its own thread only
    for i, call in enumerate(served._pool._calls):
        def counted(feed: dict[str, np.ndarray], _call=call, _i=i) -> list[np.ndarray]:
            out = _call(feed)
            seen_rows[_i] += int(feed["x"].shape[0])
            return out

        served._pool._calls[i] = counted
    got: list[dict[str, np.ndarray] | None] = [None] * n

    async def client(c: int) -> None:
        for k in range(PER_CLIENT):
            i = c * PER_CLIENT + k
            out = await served.infer({"x": xs[i]}, xs[i].shape[0], ["y", "s"] if i % 2 else None)
            got[i] = {name: np.array(v) for name, v in out.items()}

    async def main() -> None:
        await asyncio.wait_for(asyncio.gather(*[client(c) for c in range(CLIENTS)]), timeout=120)
        await served.close(drain=True)

    asyncio.run(main())
    direct = ort.InferenceSession(str(mlp), providers=["CPUExecutionProvider"])
    mismatches = 0
    for x, out in zip(xs, got, strict=True):
        assert out is not None
        y, s = direct.run(None, {"x": x})
        ok = out["y"].shape == y.shape and np.allclose(out["y"], y, rtol=RTOL, atol=ATOL)
        ok = ok and out["s"].shape == s.shape and np.allclose(out["s"], s, rtol=RTOL, atol=ATOL)
        mismatches += not ok
    assert mismatches == 0
    stats = served.stats()
    total_rows = sum(x.shape[0] for x in xs)
    assert stats["inference_stats"]["success"]["count"] == n and stats["inference_stats"]["fail"]["count"] == 0
    assert stats["inference_count"] == total_rows == sum(seen_rows)  # the runtime saw every row once
    assert max(b["batch_size"] for b in stats["batch_stats"]) > 1  # batches really formed
    assert max(b["batch_size"] for b in stats["batch_stats"]) <= 8
    assert stats["execution_count"] < n


def test_a_request_whose_client_left_never_reaches_the_runtime(mlp: Path) -> None:
    from inferperf.serve.errors import Cancelled

    served = ServedModel.load(str(mlp), BenchConfig(session=SessionOptions(intra_op_num_threads=1)),
                              ServeOptions(max_batch_size=8, max_queue_delay_us=20_000))
    seen: list[int] = []
    call = served._pool._calls[0]
    served._pool._calls[0] = lambda feed: (seen.append(int(feed["x"].shape[0])), call(feed))[1]

    async def gone() -> bool:
        return True

    async def main() -> tuple[object, dict[str, np.ndarray]]:
        x = np.ones((2, 32), np.float32)
        left, stays = await asyncio.wait_for(asyncio.gather(
            served.infer({"x": x}, 2, None, gone), served.infer({"x": x[:1]}, 1), return_exceptions=True), 30)
        await served.close()
        return left, stays

    left, stays = asyncio.run(main())
    assert isinstance(left, Cancelled) and stays["y"].shape == (1, 16)
    assert seen == [1]  # only the staying request's row was run
    assert served.batcher.depth == 0


def test_ids_past_the_embedding_table_are_a_400_naming_the_input_and_spare_batch_peers(tmp_path) -> None:
    """tiny-bert's input_ids index a 1,000-row table: an id past it is refused (InvalidInput, 400) before
    the batch runs, so a valid request queued with it still gets its answer."""
    import asyncio

    import numpy as np

    from inferperf import zoo
    from inferperf.config import BenchConfig
    from inferperf.serve.errors import InvalidInput
    from inferperf.serve.model import ServedModel
    from inferperf.serve.options import ServeOptions

    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}, "workload": {"dims": {"seq": 8}},
                                      "warmup": {"iterations": 1}})
    m = ServedModel.load(str(zoo.resolve("zoo:tiny-bert")), cfg,
                         ServeOptions(max_batch_size=4, dynamic_batching=True, max_queue_delay_us=20000))
    assert m.index_ranges["input_ids"][1] == 999

    def feed(ids: int) -> dict[str, np.ndarray]:
        return {"input_ids": np.full((1, 8), ids, np.int64), "attention_mask": np.ones((1, 8), np.int64)}

    async def main() -> tuple[object, object]:
        good = asyncio.ensure_future(m.infer(feed(5), 1))
        bad = asyncio.ensure_future(m.infer(feed(1_000_000), 1))
        results = await asyncio.gather(good, bad, return_exceptions=True)
        await m.close()
        return results[0], results[1]

    good, bad = asyncio.run(main())
    assert isinstance(bad, InvalidInput) and bad.status == 400
    assert "input 'input_ids': value 1000000 is outside [-1000, 999]" in str(bad)
    assert isinstance(good, dict) and all(np.isfinite(v).all() for v in good.values())
