"""Integration tests for inferperf.zoo: built-in names resolve, generated models build, load and run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from inferperf import zoo
from inferperf.errors import UsageError

LIGHT = ["resnet50", "densenet121", "squeezenet", "shufflenet", "inception_v1", "inception_v2", "vgg19",
         "alexnet", "zfnet512"]
PACKAGE = ["ppocr-det", "ppocr-rec", "ppocr-cls"]
GENERATED = ["tiny-cnn", "tiny-cnn-fixed", "tiny-bert"]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("INFERPERF_CACHE_DIR", str(cache))
    return cache


def _session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("name", LIGHT)
def test_onnx_light_entries_resolve(name: str) -> None:
    path = zoo.resolve(f"zoo:{name}")
    assert path.is_file() and path.suffix == ".onnx"
    assert path.name.startswith("light_")


@pytest.mark.parametrize("name", PACKAGE)
def test_package_entries_resolve(name: str) -> None:
    path = zoo.resolve(f"zoo:{name}")
    assert path.is_file() and "rapidocr_onnxruntime" in path.parts
    assert path.stat().st_size > 100_000


def test_package_entry_loads_in_onnxruntime() -> None:
    sess = _session(zoo.resolve("zoo:ppocr-cls"))
    assert len(sess.get_inputs()) == 1


def test_unknown_name_raises_usage_error() -> None:
    with pytest.raises(UsageError) as info:
        zoo.resolve("zoo:no-such-model")
    msg = str(info.value)
    assert "\n" not in msg
    assert "tiny-cnn" in msg and "resnet50" in msg and "inferperf zoo" in msg


def test_plain_path_is_returned_unchanged(tmp_path: Path) -> None:
    missing = tmp_path / "nope.onnx"
    assert zoo.resolve(str(missing)) == missing
    assert zoo.zoo_name(str(missing)) is None
    assert zoo.zoo_name("zoo:Tiny-CNN") == "tiny-cnn"


def test_list_models_does_not_build(_cache: Path) -> None:
    rows = zoo.list_models()
    names = [entry.name for entry, _, _ in rows]
    assert names == LIGHT + PACKAGE + GENERATED
    for entry, available, path in rows:
        assert available, entry.name
        if entry.kind == "generated":
            assert path is None
            assert entry.note == "generated, seeded weights"
        else:
            assert path is not None and Path(path).is_file()
        assert entry.extra.startswith("pip install")
    assert not _cache.exists()
    zoo.resolve("zoo:tiny-cnn")
    built = {e.name: p for e, _, p in zoo.list_models()}
    assert built["tiny-cnn"] is not None and Path(built["tiny-cnn"]).parent == _cache


@pytest.mark.parametrize("name", GENERATED)
def test_generated_model_checks_and_is_deterministic(name: str, _cache: Path) -> None:
    path = zoo.resolve(f"zoo:{name}")
    assert path.parent == _cache and zoo.GENERATOR_VERSION in path.name
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    first = path.read_bytes()
    assert zoo.resolve(f"zoo:{name}") == path
    path.unlink()  # rebuild from scratch: identical bytes
    again = zoo.resolve(f"zoo:{name}")
    assert again == path and again.read_bytes() == first
    assert [p.name for p in _cache.iterdir()] == [path.name]  # no temp files left behind


def test_tiny_cnn_runs_and_depends_on_input() -> None:
    sess = _session(zoo.resolve("zoo:tiny-cnn"))
    (inp,) = sess.get_inputs()
    assert inp.name == "x" and inp.type == "tensor(float)" and inp.shape == ["batch", 3, 32, 32]
    assert sess.get_outputs()[0].name == "logits"
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    b = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    (out_a,) = sess.run(None, {"x": a})
    (out_b,) = sess.run(None, {"x": b})
    assert out_a.shape == (2, 10) and out_a.dtype == np.float32
    assert np.isfinite(out_a).all()
    assert not np.allclose(out_a, out_b)
    assert not np.allclose(out_a[0], out_a[1])


def test_tiny_cnn_fixed_has_batch_one() -> None:
    sess = _session(zoo.resolve("zoo:tiny-cnn-fixed"))
    assert sess.get_inputs()[0].shape == [1, 3, 32, 32]
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    (out,) = sess.run(None, {"x": x})
    assert out.shape == (1, 10)
    (ref,) = _session(zoo.resolve("zoo:tiny-cnn")).run(None, {"x": x})
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_tiny_bert_runs_masks_and_depends_on_input() -> None:
    path = zoo.resolve("zoo:tiny-bert")
    model = onnx.load(str(path))
    gathers = [n for n in model.graph.node if n.op_type == "Gather"]
    inits = {t.name: t for t in model.graph.initializer}
    assert gathers and gathers[0].input[1] == "input_ids" and gathers[0].input[0] in inits
    assert list(inits[gathers[0].input[0]].dims) == [1000, 64]

    sess = _session(path)
    assert [(i.name, i.type, i.shape) for i in sess.get_inputs()] == [
        ("input_ids", "tensor(int64)", ["batch", "seq"]),
        ("attention_mask", "tensor(int64)", ["batch", "seq"]),
    ]
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, size=(2, 16), dtype=np.int64)
    mask = np.ones((2, 16), dtype=np.int64)
    mask[:, 12:] = 0
    (out,) = sess.run(None, {"input_ids": ids, "attention_mask": mask})
    assert out.shape == (2, 16, 64) and out.dtype == np.float32 and np.isfinite(out).all()

    other = rng.integers(0, 1000, size=(2, 16), dtype=np.int64)
    (out_other,) = sess.run(None, {"input_ids": other, "attention_mask": mask})
    assert not np.allclose(out, out_other)

    # Changing a masked position's id leaves unmasked positions (nearly) unchanged ...
    changed = ids.copy()
    changed[:, 14] = (changed[:, 14] + 1) % 1000
    (out_changed,) = sess.run(None, {"input_ids": changed, "attention_mask": mask})
    np.testing.assert_allclose(out_changed[:, :12], out[:, :12], atol=1e-4)
    # ... while changing an unmasked one moves the others through attention.
    changed = ids.copy()
    changed[:, 3] = (changed[:, 3] + 1) % 1000
    (out_changed,) = sess.run(None, {"input_ids": changed, "attention_mask": mask})
    assert not np.allclose(out_changed[:, 0], out[:, 0], atol=1e-4)

    # The mask itself matters.
    (out_full,) = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(mask)})
    assert not np.allclose(out_full[:, :12], out[:, :12], atol=1e-4)


def test_cache_dir_env_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERPERF_CACHE_DIR", str(tmp_path / "explicit"))
    assert zoo.cache_dir() == tmp_path / "explicit"
    assert zoo.resolve("zoo:tiny-cnn").parent == tmp_path / "explicit"
    monkeypatch.delenv("INFERPERF_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert zoo.cache_dir() == tmp_path / "xdg" / "inferperf" / "zoo"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert zoo.cache_dir() == tmp_path / "home" / ".cache" / "inferperf" / "zoo"
