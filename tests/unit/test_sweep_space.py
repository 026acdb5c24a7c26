from pathlib import Path

import pytest

from inferperf.errors import UsageError
from inferperf.results.model import SystemInfo
from inferperf.sweep.space import Axes, Matrix, ModelEntry, expand, load_matrix, thread_ladder


def info(logical=8, physical=4, smt=True, quota=None, affinity=None):
    aff = affinity if affinity is not None else list(range(logical))
    eff = min(len(aff), -(-quota // 1) if quota else len(aff))
    return SystemInfo(logical_cores=logical, physical_cores=physical, smt_active=smt, cgroup_cpu_limit=quota,
                      cpu_affinity=aff, effective_cpus=int(eff), os="x", python="3.11")


def test_ladder_smt():
    ladder = thread_ladder(info(8, 4, True))
    assert [n for n, _ in ladder] == [1, 2, 4, 6, 8]
    assert dict(ladder)[6] == ["SMT"] and dict(ladder)[8] == ["SMT"] and dict(ladder)[4] == []


def test_ladder_fractional_quota():
    ladder = thread_ladder(info(64, 64, False, quota=1.5))
    assert [n for n, _ in ladder] == [1, 2]
    assert "over quota" in dict(ladder)[2] and dict(ladder)[1] == []


def test_ladder_no_smt_non_power_of_two_and_unknown_physical():
    assert [n for n, _ in thread_ladder(info(6, 6, False))] == [1, 2, 4, 6]
    assert [n for n, _ in thread_ladder(info(2, None, None))] == [1, 2]
    beyond = thread_ladder(info(2, 2, False), beyond=True)
    assert [n for n, _ in beyond] == [1, 2, 4] and "oversubscribed" in dict(beyond)[4]


def test_expand_counts_marks_and_collapses():
    m = Matrix(
        models=[ModelEntry(path="zoo:tiny-cnn", shapes=[{"x": [1, 3, 32, 32]}, {"x": [1, 3, 64, 64]}])],
        axes=Axes(intra_op_num_threads=[1, 2], concurrency=[1, 2], session_mode=["shared", "per-stream"],
                  inter_op_num_threads=[1, 2], execution_mode=["sequential"]),
    )
    cases, warnings = expand(m, info(2, 2, False))
    # 2 shapes x 2 threads x (1 stream + 2 streams x 2 session modes) = 12; inter-op collapsed in sequential mode
    assert len(cases) == 12
    assert any("inter-op" in w for w in warnings) and any("collapsed" in w for w in warnings)
    over = [c for c in cases if c.config.concurrency == 2 and c.config.session.intra_op_num_threads == 2]
    assert over and all("oversubscribed" in c.marks for c in over)
    assert all(not c.marks for c in cases if c.config.concurrency == 1)
    assert len({c.label for c in cases}) == 12


def test_parallel_mode_keeps_inter_op_axis():
    m = Matrix(models=[ModelEntry(path="m.onnx")],
               axes=Axes(intra_op_num_threads=[1], execution_mode=["sequential", "parallel"], inter_op_num_threads=[1, 2]))
    cases, _ = expand(m, info(2, 2, False))
    # sequential once (inter-op irrelevant) + parallel x 2 inter-op values
    assert len(cases) == 3


def test_default_ladder_used_when_no_threads_given():
    cases, warnings = expand(Matrix(models=[ModelEntry(path="m.onnx")]), info(8, 4, True))
    assert sorted(c.config.session.intra_op_num_threads for c in cases) == [1, 2, 4, 6, 8]
    assert any("ladder" in w for w in warnings)
    assert "SMT" in next(c for c in cases if c.config.session.intra_op_num_threads == 8).marks


def test_invalid_combination_named():
    m = Matrix(models=[ModelEntry(path="m.onnx")], axes=Axes(intra_op_num_threads=[1], concurrency=[0]))
    with pytest.raises(UsageError, match="concurrency"):
        expand(m, info())


def test_yaml_matrix(tmp_path):
    p = tmp_path / "sweep.yaml"
    p.write_text(
        "models:\n  - path: zoo:ppocr-det\n    shapes: [{x: [1, 3, 224, 224]}, {x: [1, 3, 640, 640]}]\n"
        "  - path: zoo:tiny-bert\n    dims: [{seq: 64}, {seq: 128}]\n"
        "axes:\n  intra_op_num_threads: [1, 2]\n  env: [{OMP_WAIT_POLICY: PASSIVE}]\n"
        "settings:\n  stop: {min_duration_s: 0.5}\nrepeat: 2\n"
    )
    m = load_matrix(p)
    cases, _ = expand(m, info(2, 2, False))
    assert len(cases) == 8 and m.repeat == 2
    assert all(c.config.stop.min_duration_s == 0.5 and c.config.env == {"OMP_WAIT_POLICY": "PASSIVE"} for c in cases)
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [{path: a.onnx}]\naxes: {threads: [1]}\n")
    with pytest.raises(UsageError, match="threads"):
        load_matrix(bad)
    bad.write_text("models: [\n")
    with pytest.raises(UsageError, match="YAML"):
        load_matrix(bad)


@pytest.mark.parametrize("doc, key, fix", [
    ("models: zoo:x\n", "models:", "path: zoo:ppocr-det"),
    ("models: [{file: a.onnx}]\n", "unknown key 'file' in models[0]", "path, shapes, dims"),
    ("models: [{path: a.onnx, shapes: {x: [1, 3]}}]\n", "models[0].shapes:", "shapes: [{x: [1, 3, 224, 224]}"),
    ("models: [a.onnx]\nintra_op_num_threads: [1]\n", "unknown key 'intra_op_num_threads'", "put it under axes:"),
    ("models: [a.onnx]\naxes: {concurrency: 2}\n", "axes.concurrency:", "concurrency: [1, 2]"),
    ("- a.onnx\n", "must be a mapping with a models: key", "path: zoo:ppocr-det"),
    ("axes: {}\n", "models: missing", "path: zoo:ppocr-det"),
])
def test_matrix_errors_name_the_key_and_the_fix(tmp_path, doc, key, fix):
    """Issue 10 item 8: a raw pydantic message that never said what to write instead."""
    p = tmp_path / "m.yaml"
    p.write_text(doc)
    with pytest.raises(UsageError) as e:
        load_matrix(p)
    msg = str(e.value)
    assert "\n" not in msg and key in msg and fix in msg and "docs/sweep-matrix.md" in msg, msg


def test_bare_model_names_are_paths(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("models: [zoo:tiny-cnn, {path: m.onnx, shapes: [{x: [1, 3, 32, 32]}]}]\n")
    m = load_matrix(p)
    assert [e.path for e in m.models] == ["zoo:tiny-cnn", "m.onnx"] and m.models[1].shapes == [{"x": [1, 3, 32, 32]}]


def test_documented_example_matrix_loads_and_expands():
    root = Path(__file__).resolve().parents[2]
    m = load_matrix(root / "examples" / "sweep.yaml")
    cases, _ = expand(m, info(2, 2, False))
    assert cases and all(c.config.stop.min_duration_s > 0 for c in cases)


def test_plan_states_both_stop_bounds_and_an_estimate():
    from inferperf.sweep.plan import ISOLATION_S, plan_lines

    m = Matrix(models=[ModelEntry(path="m.onnx", shapes=[{"x": [1, 3, 640, 640]}])],
               axes=Axes(intra_op_num_threads=[1, 2]), settings={"stop": {"min_duration_s": 1.0}})
    cases, _ = expand(m, info(2, 2, False))
    lines = plan_lines(cases, 3)
    assert any("BOTH >= 1 s AND >= 100 queries" in x and "capped at 60 s" in x and "--iterations" in x for x in lines)
    est = lines[-1]
    assert est.startswith("estimate: 2 cases x 3 round(s) = 6 runs")
    assert f"at least {6 * (1.0 + ISOLATION_S):.0f} s" in est and "at most 6.1 min" in est and "BENCHMARKS.md" in est


def test_a_case_the_settings_refuse_is_their_one_line() -> None:
    """Issue 25 item 2: the case's BenchConfig refuses with its own line (was 'sweep case M: : Value error, ...')."""
    m = Matrix(models=[ModelEntry(path="zoo:tiny-cnn")], axes=Axes(concurrency=[1, 2]),
               settings={"scenario": "single-stream"})
    with pytest.raises(UsageError) as e:
        expand(m, info(2, 2, False))
    assert str(e.value).startswith("sweep case zoo:tiny-cnn: --scenario single-stream contradicts --concurrency 2:"
                                   " drop one (matrix settings")
