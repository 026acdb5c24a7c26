import pytest

from inferperf.errors import UsageError
from inferperf.results.model import TensorInfo
from inferperf.workload.shapes import parse_dims, parse_int_range, parse_shape, parse_value, resolve_shapes


def T(name, shape, dtype="float32"):
    return TensorInfo(name=name, dtype=dtype, shape=shape)


def test_parse_shape():
    assert parse_shape("x:1x3x640x640") == ("x", [1, 3, 640, 640])
    assert parse_shape("1x3x224x224") == ("", [1, 3, 224, 224])
    assert parse_shape("input:0:1x3") == ("input:0", [1, 3])
    for bad in ("x:1x3xabc", "x:", "x:1,3", "x:0x3"):
        with pytest.raises(UsageError):
            parse_shape(bad)


def test_parse_dims_ranges_values():
    assert parse_dims("batch=4,seq=128") == {"batch": 4, "seq": 128}
    for bad in ("batch", "batch=0", "=3", "seq=x"):
        with pytest.raises(UsageError):
            parse_dims(bad)
    assert parse_int_range("ids=0:30521") == ("ids", (0, 30521))
    assert parse_int_range("x=-5:5") == ("x", (-5, 5))
    with pytest.raises(UsageError):
        parse_int_range("ids=5:1")
    with pytest.raises(UsageError):
        parse_int_range("ids=5")
    assert parse_value("scale=0.5") == ("scale", 0.5)
    with pytest.raises(UsageError):
        parse_value("scale=abc")


def test_resolve_fixed_shape_dims_batch():
    inputs = [T("ids", ["batch", "seq"], "int64"), T("mask", ["batch", "seq"], "int64")]
    assert resolve_shapes(inputs, dims={"batch": 2, "seq": 16}) == {"ids": [2, 16], "mask": [2, 16]}
    assert resolve_shapes(inputs, dims={"seq": 8}, batch_size=4) == {"ids": [4, 8], "mask": [4, 8]}
    # leading dim defaults to batch 1, like perf_analyzer's -b
    assert resolve_shapes(inputs, dims={"seq": 8}) == {"ids": [1, 8], "mask": [1, 8]}
    img = [T("x", [None, 3, "h", "w"])]
    assert resolve_shapes(img, shapes={"": [1, 3, 640, 640]}) == {"x": [1, 3, 640, 640]}
    assert resolve_shapes(img, shapes={"x": [2, 3, 64, 32]}) == {"x": [2, 3, 64, 32]}
    assert resolve_shapes([T("x", [1, 3, 224, 224])]) == {"x": [1, 3, 224, 224]}
    # user data fills what remains, explicit batch wins over data
    assert resolve_shapes(img, data_shapes={"x": (5, 3, 8, 8)}) == {"x": [5, 3, 8, 8]}


def test_unresolved_dims_name_each_input_and_flag():
    inputs = [T("x", [None, 3, "h", "w"]), T("y", [1, "?"])]
    with pytest.raises(UsageError) as e:
        resolve_shapes(inputs)
    msg = str(e.value)
    assert "\n" not in msg
    assert "input 'x'" in msg and "h (axis 2)" in msg and "w (axis 3)" in msg and "--shape x:1x3xD2xD3" in msg
    assert "--dim h=N,w=N" in msg and "input 'y'" in msg


def test_shape_errors():
    img = [T("x", [1, 3, 224, 224])]
    with pytest.raises(UsageError, match="contradicts fixed dim 2"):
        resolve_shapes(img, shapes={"x": [1, 3, 640, 640]})
    with pytest.raises(UsageError, match="rank 3"):
        resolve_shapes(img, shapes={"x": [1, 3, 224]})
    with pytest.raises(UsageError, match="unknown input"):
        resolve_shapes(img, shapes={"nope": [1]})
    with pytest.raises(UsageError, match="unknown symbol"):
        resolve_shapes(img, dims={"seq": 3})
    two = [T("a", [1]), T("b", [1])]
    with pytest.raises(UsageError, match="one input"):
        resolve_shapes(two, shapes={"": [1]})


def test_shared_dims_follow_explicit_shapes_and_conflicts_refused():
    inputs = [T("ids", ["batch", "seq"], "int64"), T("mask", ["batch", "seq"], "int64")]
    assert resolve_shapes(inputs, shapes={"ids": [2, 16]}) == {"ids": [2, 16], "mask": [2, 16]}
    with pytest.raises(UsageError, match="dim 'seq'"):
        resolve_shapes(inputs, shapes={"ids": [1, 16], "mask": [1, 32]})
    with pytest.raises(UsageError, match="dim 'seq' is 16"):
        resolve_shapes(inputs, shapes={"ids": [1, 16]}, dims={"seq": 32})
    with pytest.raises(UsageError, match="--batch-size 4 contradicts --shape"):
        resolve_shapes(inputs, shapes={"ids": [2, 16]}, batch_size=4)
    with pytest.raises(UsageError, match="--batch-size 5 contradicts --dim batch=3"):
        resolve_shapes(inputs, dims={"batch": 3, "seq": 4}, batch_size=5)


def test_unnamed_question_mark_dims_are_not_offered_to_dim():
    with pytest.raises(UsageError) as e:
        resolve_shapes([T("x", [None, 3, "?", "?"])])
    assert "--dim" not in str(e.value) and "--shape x:1x3xD2xD3" in str(e.value)
