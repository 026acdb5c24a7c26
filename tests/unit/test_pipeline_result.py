"""The pipeline Result assembled from simulated traces: overhead verdict, Little's-law note, worker advice."""

from __future__ import annotations

import pytest

from inferperf.pipeline.result import assemble
from inferperf.pipeline.run import PipelineOptions
from inferperf.pipeline.simulate import fixed, simulate
from inferperf.pipeline.spec import parse
from inferperf.results.model import Result
from inferperf.system import collect_system

MS = 1_000_000
SPEC = parse({"name": "toy", "source": {"generator": "m:g"},
              "stages": [{"name": "a", "function": "m:a"}, {"name": "b", "function": "m:b"}]})


def result(alone: dict | None = None, concurrency: int = 4) -> Result:
    tr = simulate(["a", "b"], [1, 1], fixed([2 * MS, 10 * MS]), sizes=[4, 4], items=300, concurrency=concurrency)
    return assemble(tr, SPEC, PipelineOptions(), collect_system(), {}, alone or {})


def test_result_shape_and_figures():
    r = result()
    assert r.kind == "pipeline" and r.config.backend == "pipeline" and r.config.scenario == "concurrent"
    assert r.metrics.throughput.queries_per_s == pytest.approx(100.0, rel=0.02)
    assert set(r.metrics.stages) == {"a", "b"} and r.run["pipeline"]["bottleneck"] == "b"
    assert r.metrics.latency_ms.count == 300 and len(r.samples.latency_ns) == 300
    Result.model_validate_json(r.model_dump_json())  # round-trips as a Result document


def test_overhead_is_flagged_only_below_0_9_of_the_slowest_stage_alone():
    slow = {"a": {"items_per_s": 500.0, "service_ms_mean": 2.0, "cpu_per_wall": 1.0, "cpu_cores": 1.0},
            "b": {"items_per_s": 125.0, "service_ms_mean": 8.0, "cpu_per_wall": 1.0, "cpu_cores": 1.0}}
    r = result(slow)
    o = r.run["pipeline"]["overhead"]
    assert o["slowest_alone"] == "b" and o["ratio"] == pytest.approx(0.8, rel=0.02) and o["overhead"]
    assert any(n.startswith("pipeline overhead") for n in r.notes)
    assert set(o["hops"]) == {"a", "b"} and o["hops"]["b"]["queue_wait_ms"] > 0
    fine = {k: {**v, "items_per_s": v["items_per_s"] * 0.8} for k, v in slow.items()}
    r2 = result(fine)
    assert not r2.run["pipeline"]["overhead"]["overhead"]
    assert not any(n.startswith("pipeline overhead") for n in r2.notes)


def test_littles_law_note_when_far_more_items_are_in_flight_than_in_service():
    r = result(concurrency=20)
    assert r.run["pipeline"]["in_service_mean"] == pytest.approx(100 * 0.012, rel=0.03)
    assert any("only 1.20 are in service" in n and "--concurrency 3" in n for n in r.notes)
    assert not any("in service" in n for n in result(concurrency=3).notes)


def test_worker_advice_names_the_flags_to_rerun():
    tr = simulate(["a", "b"], [1, 1], fixed([2 * MS, 10 * MS]), sizes=[4, 4], items=300, concurrency=4)
    four = collect_system().model_copy(update={"effective_cpus": 4})
    w = assemble(tr, SPEC, PipelineOptions(), four, {}, {}).run["pipeline"]["workers"]
    # 12 ms of CPU per item on 4 CPUs: a 3 ms cycle; b (10 ms) needs ceil(10 / 3) = 4 workers, a (2 ms) one
    assert w["workers"] == {"a": 1, "b": 4} and w["cycle_ms"] == pytest.approx(3.0, rel=0.01)
    assert w["rerun"] == "--workers b=4" and w["limited_by"] == "the CPUs"


def gil_verdict(cpu_share: float, workers: int = 2, cpus: int = 2, alone: dict | None = None) -> tuple[dict, bool]:
    """One thread stage of ``workers`` workers with 5 ms services and a full queue (4 in flight), its CPU
    readings scripted: each item's thread CPU = ``cpu_share`` x its service time (what ``thread_cpu_ns``
    would read: 0.5 for two threads taking turns at one GIL, 1.0 for threads that release it, ~0 for a
    sleep). Returns the stage's ``gil`` block and whether a note names the GIL."""
    tr = simulate(["spin"], [workers], fixed([5 * MS]), sizes=[4], items=200, concurrency=4)
    for r in tr.items:
        if r.start[0] >= 0 and r.end[0] >= 0:
            r.cpu[0] = round((r.end[0] - r.start[0]) * cpu_share)
    spec = parse({"name": "gil", "source": {"generator": "m:g"},
                  "stages": [{"name": "spin", "function": "m:spin", "workers": workers}]})
    system = collect_system().model_copy(update={"effective_cpus": cpus})
    r = assemble(tr, spec, PipelineOptions(), system, {}, alone or {})
    return r.metrics.stages["spin"]["gil"], any("GIL" in n for n in r.notes)


def solo(cores: float) -> dict:
    """A standalone run of the 2-worker 5 ms stage whose threads used ``cores`` cores between them."""
    return {"items_per_s": 400.0, "items": 400, "workers": 2, "service_ms_mean": 5.0, "cpu_per_wall": cores / 2,
            "cpu_cores": cores, "errors": 0}


def test_threads_sharing_one_core_of_cpu_work_are_gil_limited():
    gil, noted = gil_verdict(0.5)  # two busy threads, one core between them
    assert gil["limited"] and noted
    assert gil["cpu_per_wall"] == pytest.approx(0.5) and gil["cpu_cores"] == pytest.approx(1.0, rel=0.02)
    # judged on the standalone run when there is one: alone, the stage had one core's worth
    gil, noted = gil_verdict(1.0, alone={"spin": solo(1.0)})
    assert gil["limited"] and noted and gil["standalone_cpu_cores"] == 1.0


@pytest.mark.parametrize("case", ["two cores", "sleeping", "one worker", "one cpu", "two cores alone"])
def test_threads_using_their_cores_waiting_or_alone_are_not_gil_limited(case):
    kwargs = {"two cores": {"cpu_share": 1.0}, "sleeping": {"cpu_share": 0.1},
              "one worker": {"cpu_share": 1.0, "workers": 1}, "one cpu": {"cpu_share": 0.5, "cpus": 1},
              "two cores alone": {"cpu_share": 0.5, "alone": {"spin": solo(1.9)}}}
    gil, noted = gil_verdict(**kwargs[case])
    assert gil["limited"] is False and not noted


def test_figures_of_thousands_of_items_per_s_read_without_an_exponent():
    """A fast pipeline's notes read 'pipeline overhead: 3.08e+03 items/s ... (5.48e+03 items/s)' and the stage
    table's alone column '2.99e+04' (issue 24 item 15: no exponent in 4- and 5-digit figures)."""
    from rich.console import Console

    from inferperf.cli.pipeline_view import stage_table

    us = 1_000
    tr = simulate(["a", "b"], [1, 1], fixed([50 * us, 200 * us]), sizes=[4, 4], items=300, concurrency=4)
    alone = {"a": {"items_per_s": 29914.0, "service_ms_mean": 0.033, "cpu_per_wall": 1.0, "cpu_cores": 1.0},
             "b": {"items_per_s": 6250.0, "service_ms_mean": 0.16, "cpu_per_wall": 1.0, "cpu_cores": 1.0}}
    r = assemble(tr, SPEC, PipelineOptions(), collect_system(), {}, alone)
    over = next(n for n in r.notes if n.startswith("pipeline overhead"))
    assert "e+" not in " ".join(r.notes) and "6250 items/s" in over, over
    console = Console(width=250, record=True)
    console.print(stage_table(r))
    table = console.export_text()
    assert "29914" in table and "e+" not in table, table
