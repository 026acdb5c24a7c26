"""Issue 28 item 1: the history store (SQLite file): idempotent and transactional ingest, series keys, the
schema version check, the raw Result kept compressed."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
import sqlalchemy as sa

from inferperf.errors import UsageError
from inferperf.history import ingest, store
from inferperf.history.ingest import Provenance, add, parse_time
from inferperf.results import content_hash
from inferperf.results.model import Result
from tests.history_results import make


def _db(tmp_path: Path) -> sa.Engine:
    return store.open_store(str(tmp_path / "h.db"))


def _count(engine: sa.Engine, table: sa.Table) -> int:
    with engine.connect() as c:
        return int(c.execute(sa.select(sa.func.count()).select_from(table)).scalar())


def test_the_same_result_twice_is_one_point_per_metric(tmp_path: Path) -> None:
    e = _db(tmp_path)
    r = make()
    first = add(e, [("a.json", r)])
    again = add(e, [("b.json", r), ("c.json", Result.model_validate(r.model_dump(mode="json")))])
    assert (first.added, first.duplicates, first.points) == (1, 0, 3)  # samples/s, p50, p99
    assert (again.added, again.duplicates, again.points) == (0, 2, 0)
    assert _count(e, store.results) == 1 and _count(e, store.points) == 3 and _count(e, store.series) == 3


def test_a_failed_add_leaves_nothing_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    e = _db(tmp_path)
    real = ingest.drafts
    calls = []

    def failing(result):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return real(result)

    monkeypatch.setattr(ingest, "drafts", failing)
    with pytest.raises(RuntimeError):
        add(e, [("a", make(seed=1)), ("b", make(seed=2))])
    assert len(calls) == 2  # the first Result was written inside the transaction, then rolled back
    assert _count(e, store.results) == 0 and _count(e, store.points) == 0 and _count(e, store.series) == 0


def test_the_raw_result_is_stored_compressed_and_reads_back(tmp_path: Path) -> None:
    e = _db(tmp_path)
    r = make()
    add(e, [("a.json", r)])
    with e.connect() as c:
        blob = c.execute(sa.select(store.results.c.document)).scalar()
    doc = json.loads(zlib.decompress(blob))
    assert content_hash(Result.model_validate(doc)) == content_hash(r)
    assert len(blob) < len(json.dumps(doc))
    assert ingest.stored_result(e, content_hash(r)) == doc


def test_series_keys_continue_over_new_weights_and_split_by_machine(tmp_path: Path) -> None:
    e = _db(tmp_path)
    base = make(seed=1)
    new_weights = Result.model_validate({**make(seed=2).model_dump(mode="json"),
                                         "model": {**base.model.model_dump(), "sha256": "b" * 64}})
    new_runtime = make(seed=3, runtime="1.21.0")
    other_machine = make(seed=4, cpu="Y")
    add(e, [("1", base), ("2", new_weights), ("3", new_runtime), ("4", other_machine)])
    with e.connect() as c:
        rows = c.execute(sa.select(store.series.c.name, store.series.c.machine, sa.func.count(store.points.c.id))
                         .join(store.points).group_by(store.series.c.id)).all()
        runtimes = {r[0] for r in c.execute(sa.select(store.points.c.runtime)).all()}
    counts = sorted(n for _, _, n in rows)
    assert counts == [1, 1, 1, 3, 3, 3]  # 3 metrics x (machine X: 3 points, machine Y: 1 point)
    assert len({m for _, m, _ in rows}) == 2
    assert runtimes == {"onnxruntime 1.20.0", "onnxruntime 1.21.0"}
    assert all(name.startswith("m.onnxruntime.bench.single-stream.c1.b1.") for name, _, _ in rows)


def test_point_time_commit_branch_from_provenance_or_created_at(tmp_path: Path) -> None:
    e = _db(tmp_path)
    add(e, [("a", make(seed=1, created_at="2026-11-30T10:00:00+01:00"))])
    add(e, [("b", make(seed=2))], Provenance(commit="abc", branch="main", time=parse_time("2026-12-02T00:00:00Z")))
    with e.connect() as c:
        got = sorted({(str(r.time), r.commit, r.branch) for r in c.execute(sa.select(store.points)).all()})
    assert got == [("2026-11-30 09:00:00", None, None), ("2026-12-02 00:00:00", "abc", "main")]


def test_per_run_values_median_and_interval(tmp_path: Path) -> None:
    e = _db(tmp_path)
    r = make(runs=4)
    add(e, [("a", r)])
    with e.connect() as c:
        p = {s.metric: pt for s, pt in ((c.execute(sa.select(store.series).where(store.series.c.id == pt.series_id))
                                        .one(), pt) for pt in c.execute(sa.select(store.points)).all())}
    assert p["samples_per_s"].values == pytest.approx(r.metrics.throughput.per_run)
    assert len(p["p99_ms"].values) == 4
    assert p["p50_ms"].median == pytest.approx(sorted(p["p50_ms"].values)[1:3][0] / 2
                                               + sorted(p["p50_ms"].values)[1:3][1] / 2)


def test_a_newer_schema_is_refused_in_one_line(tmp_path: Path) -> None:
    e = _db(tmp_path)
    with e.begin() as c:
        c.execute(store.schema_table.update().values(version=store.SCHEMA_VERSION + 1))
    with pytest.raises(UsageError, match=r"schema v2, newer than this inferperf's v1: upgrade inferperf") as ei:
        _db(tmp_path)
    assert "\n" not in str(ei.value)


def test_bad_urls_and_folders_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="use a file path, sqlite:///PATH or postgresql"):
        store.open_store("redis://x")
    with pytest.raises(UsageError, match="does not exist: create it"):
        store.open_store(str(tmp_path / "nope" / "h.db"))
    with pytest.raises(UsageError, match=r"u:\*\*\*@127.0.0.1:1/none: cannot open it") as ei:
        store.open_store("postgresql+psycopg://u:secret@127.0.0.1:1/none")
    assert "secret" not in str(ei.value)


def test_the_default_database_is_the_env_var_else_a_file_here(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(store.ENV_VAR, raising=False)
    assert store.resolve_url(None) == f"sqlite:///{tmp_path.resolve() / 'inferperf-history.db'}"
    monkeypatch.setenv(store.ENV_VAR, "postgresql+psycopg://u@h/db")
    assert store.resolve_url(None) == "postgresql+psycopg://u@h/db"
    assert store.resolve_url("x.db") == f"sqlite:///{tmp_path.resolve() / 'x.db'}"


def test_a_folder_is_read_without_its_single_runs(tmp_path: Path) -> None:
    from inferperf.history.ingest import read_results
    from inferperf.results.io import save

    save(make(seed=1), tmp_path / "ab" / "current" / "case.json")
    save(make(seed=2, runs=1), tmp_path / "ab" / "current" / "runs" / "case-run0.json")
    (tmp_path / "ab" / "history.json").write_text('{"format": "inferperf-history/1", "series": []}')
    assert [p.name for p, _ in read_results([tmp_path / "ab"])] == ["case.json"]
    named = tmp_path / "ab" / "current" / "runs" / "case-run0.json"
    assert [p.name for p, _ in read_results([named])] == ["case-run0.json"]  # a file named is read as named
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no Result files in .*empty: pass Result files"):
        read_results([tmp_path / "empty"])


def test_the_null_backends_scripted_latency_continues_the_series() -> None:
    from inferperf.history.series import drafts

    def null(latency_s: float):
        doc = make(seed=1).model_dump(mode="json")
        doc["config"]["backend"] = "null"
        doc["config"]["session"]["requested"] = {"latencies_s": [latency_s], "intra_op_num_threads": 2}
        return Result.model_validate(doc)

    assert [d.series_key for d in drafts(null(0.001))] == [d.series_key for d in drafts(null(0.002))]
    other = Result.model_validate({**null(0.001).model_dump(mode="json")})
    other.config.session.requested["intra_op_num_threads"] = 4
    assert drafts(other)[0].series_key != drafts(null(0.001))[0].series_key  # other settings still split it


def test_every_kind_of_result_in_the_report_fixtures_adds(tmp_path: Path) -> None:
    """bench, sweep cases, load steps (closed, open, max-rate, soak, stress), serve, tune, profile, pipeline:
    the folder of every kind adds (its non-Result JSON skipped), each kind with its series."""
    from inferperf.history.ingest import read_results

    fixtures = Path(__file__).parents[1] / "fixtures" / "report" / "all"
    found = read_results([fixtures])
    e = _db(tmp_path)
    rep = add(e, found)
    assert rep.added == len({content_hash(r) for _, r in found}) and rep.points >= 2 * rep.added
    with e.connect() as c:
        kinds = {w["kind"] for (w,) in c.execute(sa.select(store.series.c.workload))}
    assert {"bench", "sweep", "load", "tune", "pipeline"} <= kinds


def test_token_metrics_make_their_own_series_when_present() -> None:
    from inferperf.history.series import drafts

    doc = make(seed=1).model_dump(mode="json")
    assert {d.metric for d in drafts(Result.model_validate(doc))} == {"samples_per_s", "p50_ms", "p99_ms"}
    doc["metrics"]["generation"] = {"ttft_ms": {"count": 50, "p50": 80.0, "p99": 200.0, "p99_ci95": [150.0, None]},
                                    "tpot_ms": {"count": 50, "p50": 12.5, "p50_ci95": [12.0, 13.1]},
                                    "output_tokens_per_s": 640.0}
    got = {d.metric: (d.median, d.lo, d.hi, d.direction) for d in drafts(Result.model_validate(doc))}
    assert got["ttft_p50_ms"] == (80.0, None, None, "lower") and got["ttft_p99_ms"][0] == 200.0
    assert got["tpot_p50_ms"] == (12.5, 12.0, 13.1, "lower")
    assert got["output_tokens_per_s"] == (640.0, None, None, "higher")
