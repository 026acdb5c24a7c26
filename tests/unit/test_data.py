import numpy as np
import pytest

from inferperf.errors import UsageError
from inferperf.results.model import TensorInfo
from inferperf.workload.data import build_workload

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_generated_with_shape(dtype):
    w = build_workload([TensorInfo(name="x", dtype=dtype, shape=["n", 4])], dims={"n": 3}, pool_size=4, seed=7)
    assert len(w.feeds) == 4
    for feed in w.feeds:
        assert feed["x"].dtype == np.dtype(dtype) and feed["x"].shape == (3, 4)
    if dtype in ("uint8",):
        assert all(0 <= f["x"].min() and f["x"].max() <= 255 for f in w.feeds)


def test_pool_is_distinct_and_seeded():
    spec = [TensorInfo(name="x", dtype="float32", shape=[1, 8])]
    a = build_workload(spec, pool_size=5, seed=3)
    b = build_workload(spec, pool_size=5, seed=3)
    c = build_workload(spec, pool_size=5, seed=4)
    assert all(np.array_equal(x["x"], y["x"]) for x, y in zip(a.feeds, b.feeds))
    assert not np.array_equal(a.feeds[0]["x"], c.feeds[0]["x"])
    distinct = {a.feeds[i]["x"].tobytes() for i in range(5)}
    assert len(distinct) == 5


def test_integer_ranges_index_tables_masks_and_overrides():
    spec = [
        TensorInfo(name="input_ids", dtype="int64", shape=["batch", "seq"]),
        TensorInfo(name="attention_mask", dtype="int64", shape=["batch", "seq"]),
        TensorInfo(name="other", dtype="int32", shape=[2]),
    ]
    w = build_workload(spec, dims={"seq": 64}, batch_size=2, pool_size=8, index_ranges={"input_ids": (0, 999)})
    ids = np.stack([f["input_ids"] for f in w.feeds])
    assert ids.min() >= 0 and ids.max() <= 999 and ids.max() > 100  # spread over the vocabulary
    assert all((f["attention_mask"] == 1).all() for f in w.feeds)
    assert w.int_ranges["input_ids"] == (0, 999)
    w2 = build_workload(spec, dims={"seq": 4}, int_ranges={"other": (5, 6)}, values={"attention_mask": 0})
    assert all(set(np.unique(f["other"])) <= {5, 6} for f in w2.feeds)
    assert all((f["attention_mask"] == 0).all() for f in w2.feeds)
    with pytest.raises(UsageError, match="--value names unknown"):
        build_workload(spec, dims={"seq": 4}, values={"nope": 1})


def test_memory_guard_and_force():
    spec = [TensorInfo(name="x", dtype="float32", shape=[1024, 1024])]  # 4 MiB per feed
    with pytest.raises(UsageError, match="--force"):
        build_workload(spec, pool_size=16, memory_bytes=100 * 2**20)  # 64 MiB > 25 MiB
    w = build_workload(spec, pool_size=2, memory_bytes=100 * 2**20, force=True)
    assert w.bytes_per_feed == 4 * 2**20


def test_string_inputs_refused_clearly():
    with pytest.raises(UsageError, match="string tensor.*--input-data"):
        build_workload([TensorInfo(name="text", dtype="str", shape=[1])])


def test_user_data_npz_checked(tmp_path):
    spec = [TensorInfo(name="x", dtype="float32", shape=["n", 3])]
    good = tmp_path / "good.npz"
    np.savez(good, x=np.arange(12, dtype=np.float32).reshape(4, 1, 3))  # a stack of 4 feeds of [1, 3]
    w = build_workload(spec, input_data=good, batch_size=1)
    assert len(w.feeds) == 4 and w.data_source.startswith("file:")
    assert np.array_equal(w.feeds[1]["x"], [[3, 4, 5]])
    single = tmp_path / "one.npy"
    np.save(single, np.ones((2, 3), np.float32))
    w = build_workload(spec, input_data=single)
    assert w.shapes == {"x": [2, 3]} and len(w.feeds) == 1  # the data's shape resolves the open dim
    bad_dtype = tmp_path / "d.npz"
    np.savez(bad_dtype, x=np.ones((1, 3), np.float64))
    with pytest.raises(UsageError, match="float64 but the input is float32"):
        build_workload(spec, input_data=bad_dtype, batch_size=1)
    bad_shape = tmp_path / "s.npz"
    np.savez(bad_shape, x=np.ones((1, 5), np.float32))
    with pytest.raises(UsageError, match="has shape"):
        build_workload(spec, input_data=bad_shape, batch_size=1)
    stray = tmp_path / "k.npz"
    np.savez(stray, y=np.ones((1, 3), np.float32))
    with pytest.raises(UsageError, match="not model inputs"):
        build_workload(spec, input_data=stray, batch_size=1)
    with pytest.raises(UsageError, match="not found"):
        build_workload(spec, input_data=tmp_path / "missing.npz")


def test_empty_dims_and_bad_values_refused(tmp_path):
    spec = [TensorInfo(name="x", dtype="float32", shape=["n", 3])]
    empty = tmp_path / "e.npy"
    np.save(empty, np.ones((0, 3), np.float32))
    with pytest.raises(UsageError, match="empty dim"):
        build_workload(spec, input_data=empty)
    zero_bytes = tmp_path / "z.npy"
    zero_bytes.write_bytes(b"")
    with pytest.raises(UsageError, match="not a readable numpy file"):
        build_workload(spec, input_data=zero_bytes)
    ints = [TensorInfo(name="ids", dtype="int64", shape=[1, 4])]
    for bad in (3.5, float("nan"), float("inf"), 1e30):
        with pytest.raises(UsageError, match="--value"):
            build_workload(ints, values={"ids": bad})
    with pytest.raises(UsageError, match="not an integer input"):
        build_workload(spec, batch_size=1, int_ranges={"x": (0, 5)})


def test_data_source_carries_the_data_hash(tmp_path):
    spec = [TensorInfo(name="x", dtype="float32", shape=[1, 3])]
    a = tmp_path / "a.npy"
    np.save(a, np.ones((1, 3), np.float32))
    w = build_workload(spec, input_data=a)
    assert w.data_source.startswith(f"file:{a.resolve()}#sha256=") and w.int_ranges == {}


def test_empty_npz_and_zero_feed_stack_refused(tmp_path):
    spec = [TensorInfo(name="x", dtype="float32", shape=["n", 3])]
    empty = tmp_path / "empty.npz"
    np.savez(empty)
    with pytest.raises(UsageError, match="holds no arrays"):
        build_workload(spec, input_data=empty)
    zero = tmp_path / "zero.npz"
    np.savez(zero, x=np.ones((0, 1, 3), np.float32))
    with pytest.raises(UsageError, match="0 feeds"):
        build_workload(spec, input_data=zero, batch_size=1)
