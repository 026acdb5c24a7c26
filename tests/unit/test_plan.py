"""The planner: service models from Results, the fleet search, the deployable files (plan/)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inferperf.errors import UsageError
from inferperf.plan.deploy import serve_settings, triton_config
from inferperf.analysis.fleet import Option, PlanOptions, Simulator, capacity_per_s, options_for, search, size_fleet
from inferperf.analysis.candidates import candidates, overhead
from inferperf.plan.ladder import ladder_configs
from inferperf.results.model import Result
from inferperf.serve.options import ServeOptions
from inferperf.serve.triton_config import parse
from tests.plan_results import base_result, measured


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return base_result(tmp_path_factory.mktemp("plan"))


def test_candidates_pool_samples_per_batch_size_and_keep_instances_apart(base: Result) -> None:
    rs = [(Path("a.json"), measured(base, 1, 1, 1, 1.0)), (Path("b.json"), measured(base, 1, 1, 1, 1.0, seed=1)),
          (Path("c.json"), measured(base, 4, 1, 1, 1.6)), (Path("d.json"), measured(base, 1, 1, 2, 1.3)),
          (Path("e.json"), measured(base, 1, 2, 1, 0.6)),
          # one session shared by 2 threads is not two instances: left out
          (Path("f.json"), measured(base, 1, 1, 2, 9.9, session_mode="shared"))]
    cands = candidates(rs, "mlp")
    assert [(c.threads, c.instances, c.cores) for c in cands] == [(1, 1, 1), (1, 2, 2), (2, 1, 2)]
    one = cands[0]
    assert one.service.sizes == (1, 4) and one.sources == {1: ["a.json", "b.json"], 4: ["c.json"]}
    assert one.service.mean_ns(1) == pytest.approx(1e6, rel=0.01)
    assert one.example.config.workload.batch_size == 4  # the largest batch's model file and config
    assert cands[1].service.mean_ns(1) == pytest.approx(1.3e6, rel=0.01)  # measured side by side, not assumed
    assert candidates(rs, "zoo:other") == []


def _variant(r: Result, *, shapes: dict | None = None, session: dict | None = None, cpus: list | None = None,
             sha256: str | None = None, path: str | None = None) -> Result:
    """``r`` measured with other per-row shapes (the batch dim kept), session settings, pinning or model file."""
    c = r.config
    upd: dict = {}
    if shapes is not None:
        upd["workload"] = c.workload.model_copy(update={"shapes": {k: [c.workload.batch_size, *v] for k, v in shapes.items()}})
    if session is not None:
        upd["session"] = c.session.model_copy(update={"requested": {**c.session.requested, **session}})
    if cpus is not None:
        upd["placement"] = c.placement.model_copy(update={"cpus": cpus})
    out = r.model_copy(update={"config": c.model_copy(update=upd)}, deep=True)
    if sha256 is not None or path is not None:
        out.model = out.model.model_copy(update={"sha256": sha256 or out.model.sha256, "path": path or out.model.path})
    return out


def test_results_of_two_input_sizes_are_never_pooled_into_one_service_model(base: Result) -> None:
    """Issue 36 item 2: a sweep over two input sizes became one service model (1 ms and 10 ms averaged to 5.49)."""
    small = [(Path(f"s{b}.json"), _variant(measured(base, b, 1, 1, 1.0 * b, seed=b), shapes={"x": [32]}))
             for b in (1, 4)]
    large = [(Path(f"l{b}.json"), _variant(measured(base, b, 1, 1, 10.0 * b, seed=b), shapes={"x": [320]}))
             for b in (1, 4)]
    with pytest.raises(UsageError, match=r"^--from mixes workloads: per-row input shapes differ \(s1.json: x: 32; "
                                         r"l1.json: x: 320\): pass --shape"):
        candidates(small + large)
    (one,) = candidates(small + large, shapes={"x": [1, 320]})  # --shape x:1x320 picks one workload
    assert one.service.sizes == (1, 4) and one.service.mean_ns(1) == pytest.approx(10e6, rel=0.02)
    assert one.sources == {1: ["l1.json"], 4: ["l4.json"]}
    (only,) = candidates(small + large, shapes={"": [8, 32]})  # a one-input model's --shape 8x32: rows ignored
    assert only.service.mean_ns(1) == pytest.approx(1e6, rel=0.02)
    with pytest.raises(UsageError, match=r"--shape x: 64 \(per row\): no Result in --from has it; they have x: 32; x: 320"):
        candidates(small + large, shapes={"x": [1, 64]})
    two = [(Path(f"t{n}.json"), _variant(measured(base, 1, 1, 1, 0.1 * n, seed=n), shapes={"ids": [n], "mask": [n]}))
           for n in (16, 32)]
    (picked,) = candidates(two, shapes={"ids": [1, 32]})  # a two-input model: naming one input picks its workload
    assert picked.sources == {1: ["t32.json"]}
    other_model = _variant(measured(base, 1, 1, 1, 2.0), sha256="f" * 64)
    with pytest.raises(UsageError, match="model differs"):
        candidates(small + [(Path("o.json"), other_model)])


def test_a_made_batchable_copy_is_the_same_model_and_settings_split_candidates(base: Result) -> None:
    sha = base.model.sha256
    copy = _variant(measured(base, 4, 1, 1, 1.6, seed=4), sha256="e" * 64, path=f"/cache/derived/{sha[:16]}-dynbatch.onnx")
    rs = [(Path("b1.json"), measured(base, 1, 1, 1, 1.0)), (Path("b4.json"), copy)]
    (c,) = candidates(rs)  # bench --batch-size 4 of a fixed-batch model measures a copy: still one workload
    assert c.service.sizes == (1, 4)
    basic = [(Path(f"g{b}.json"), _variant(measured(base, b, 1, 1, 2.0 * b, seed=b),
                                           session={"graph_optimization_level": "basic"})) for b in (1, 4)]
    pinned = [(Path("p1.json"), _variant(measured(base, 1, 1, 2, 1.4), cpus=[0]))]
    cands = candidates(rs + basic + pinned)
    assert [(c.label, c.cores) for c in cands] == [
        ("onnxruntime 1 thread x 1 instance, graph_optimization_level all", 1),
        ("onnxruntime 1 thread x 1 instance, graph_optimization_level basic", 1),
        ("onnxruntime 1 thread x 2 instances, pinned to 1 CPU", 1)]  # costed by the CPUs it was measured on
    assert cands[1].service.mean_ns(1) == pytest.approx(2e6, rel=0.02) and cands[1].session["graph_optimization_level"] == "basic"


def test_server_overhead_is_request_minus_queue_minus_model_time(base: Result) -> None:
    def serve(req: float, q: float, comp: float, n: int) -> Result:
        r = base.model_copy(update={"kind": "serve"}, deep=True)
        r.metrics.server = {"request_ms": {"count": n, "mean": req}, "queue_ms": {"count": n, "mean": q},
                            "compute_ms": {"count": n, "mean": comp}}
        return r

    o = overhead([(Path("s1.json"), serve(2.0, 0.5, 1.0, 100)), (Path("s2.json"), serve(3.0, 0.5, 1.0, 300))])
    assert o is not None and o.mean_ms == pytest.approx((0.5 * 100 + 1.5 * 300) / 400)
    assert o.sources == ["s1.json", "s2.json"] and o.model.base_ns == 1_250_000
    assert overhead([(Path("b.json"), measured(base, 1, 1, 1, 1.0))]) is None


def test_search_picks_the_cheapest_fleet_and_batching_earns_it(base: Result) -> None:
    """1 ms per call alone, 1.6 ms for 4 rows; 2000 req/s under a 20 ms p99. Batching off needs 3 replicas
    (2 would run at 100 %: the backlog grows); batching up to 4 carries it on fewer."""
    rs = [(Path("b1.json"), measured(base, 1, 1, 1, 1.0)), (Path("b4.json"), measured(base, 4, 1, 1, 1.6))]
    opts = PlanOptions(2000.0, 20.0, requests=6000, rounds=3)
    ranked, sim = search(candidates(rs), opts, None)
    off = next(o for o in ranked if not o.policy.dynamic)
    assert off.replicas == 3
    best = ranked[0]
    assert best.policy.dynamic and best.replicas is not None and best.replicas < 3
    assert best.at_plan is not None and best.at_plan.latency_ms["p99"] <= 20 and best.intervals is not None
    assert best.limit_rate_per_s is not None and 2000 <= best.limit_rate_per_s <= capacity_per_s(best) * best.replicas
    assert best.curve and best.curve[-1]["past_saturation"]
    assert off.limit_rate_per_s is not None and 2000 < off.limit_rate_per_s < 3000
    assert sim.runs > len(ranked)


def test_an_slo_below_one_call_is_refused_per_option(base: Result) -> None:
    rs = [(Path("b1.json"), measured(base, 1, 1, 1, 5.0))]
    ranked, _ = search(candidates(rs), PlanOptions(100.0, 2.0, requests=2000, rounds=2), None)
    assert all(o.replicas is None and "over the SLO" in (o.why_not or "") for o in ranked)


def test_options_and_bad_inputs(base: Result) -> None:
    rs = [(Path("b1.json"), measured(base, 1, 1, 1, 1.0)), (Path("b8.json"), measured(base, 8, 1, 1, 3.0))]
    labels = [o.label for o in options_for(candidates(rs), PlanOptions(10.0, 50.0))]
    assert labels == ["onnxruntime 1 thread x 1 instance, batching off",
                      "onnxruntime 1 thread x 1 instance, batching up to 8 rows, delay 0 ms",
                      "onnxruntime 1 thread x 1 instance, batching up to 8 rows, delay 5 ms"]
    for bad, match in ((PlanOptions(0, 50.0), "--target-rate"), (PlanOptions(10.0, 50.0, burst=0.5), "--burst"),
                       (PlanOptions(10.0, 50.0, balancer="x"), "--balancer"),
                       (PlanOptions(10.0, 50.0, arrival="x"), "--arrival")):
        with pytest.raises(UsageError, match=match):
            bad.check()
    with pytest.raises(UsageError, match="no measured candidate"):
        search([], PlanOptions(10.0, 50.0), None)


def test_measure_ladder_runs_instances_side_by_side() -> None:
    cfgs = ladder_configs([1, 4], [1, 2], cpus=2, duration_s=2.0)
    got = [(c.workload.batch_size, c.concurrency, c.session_mode, c.session.intra_op_num_threads, c.scenario)
           for c in cfgs]
    assert got == [(1, 1, "shared", 2, "single-stream"), (4, 1, "shared", 2, "single-stream"),
                   (1, 2, "per-stream", 1, "concurrent"), (4, 2, "per-stream", 1, "concurrent")]
    assert all(c.stop.min_duration_s == 2.0 for c in cfgs)
    # a run gets the time its calls need (the cap only guards a hung worker), and 3 rounds pool >= 100 samples
    assert all(c.stop.min_iterations == 100 and c.stop.max_duration_s >= 600 for c in cfgs)
    assert {c.stop.min_iterations for c in ladder_configs([1], [1], cpus=2, duration_s=1.0, rounds=3)} == {34}
    with pytest.raises(UsageError, match="--measure-rounds"):
        ladder_configs([1], [1], 2, 1.0, rounds=0)
    assert all(c.placement.cpus is None for c in cfgs)  # unpinned unless asked
    # pinned to the replica's CPUs (plan --validate: the server's share), a --shape follows each batch size
    from inferperf.config import BenchConfig

    base = BenchConfig.model_validate({"workload": {"shapes": {"x": [1, 3, 64, 64]}}})
    pinned = ladder_configs([1, 4], [2], cpus=1, duration_s=1.0, base=base, pin=[0])
    assert [c.placement.cpus for c in pinned] == [[0], [0]]
    assert [c.workload.shapes["x"] for c in pinned] == [[1, 3, 64, 64], [4, 3, 64, 64]]
    with pytest.raises(UsageError, match="--measure"):
        ladder_configs([], [1], 2, 1.0)


def test_deployable_settings_parse_as_serve_and_triton_configs(base: Result) -> None:
    rs = [(Path("b1.json"), measured(base, 1, 2, 2, 1.0)), (Path("b4.json"), measured(base, 4, 2, 2, 1.6))]
    opt = options_for(candidates(rs), PlanOptions(10.0, 20.0))[-1]
    doc = serve_settings(opt)
    assert doc["session"] == {"intra_op_num_threads": 2}
    s = ServeOptions.model_validate(doc["serve"])
    assert (s.max_batch_size, s.dynamic_batching, s.max_queue_delay_us, s.instance_count) == (4, True, 2000, 2)
    t = parse(triton_config(opt, "mlp"))
    assert t.serve["max_batch_size"] == 4 and t.serve["max_queue_delay_us"] == 2000
    assert t.serve["instance_count"] == 2 and np.isfinite(capacity_per_s(opt))


def test_server_overhead_enters_the_prediction_as_one_worker_per_replica(base: Result) -> None:
    from inferperf.analysis.service_model import Deterministic
    from inferperf.analysis.candidates import Overhead

    rs = [(Path("b1.json"), measured(base, 1, 1, 1, 1.0))]
    opts = PlanOptions(200.0, 50.0, requests=3000, rounds=2)
    (plain,), _ = search(candidates(rs), opts, None, detail=0)
    (slow,), _ = search(candidates(rs), opts, Overhead(Deterministic(2_000_000), 2.0, ["s.json"]), detail=0)
    assert plain.at_plan is not None and slow.at_plan is not None
    assert plain.at_plan.tail_ms["server_overhead"] == 0
    assert slow.at_plan.tail_ms["server_overhead"] >= 2.0
    assert slow.at_plan.latency_ms["p50"] >= plain.at_plan.latency_ms["p50"] + 2.0


def test_a_fleet_capped_before_it_meets_the_slo_names_max_replicas(base: Result) -> None:
    rs = [(Path("b1.json"), measured(base, 1, 1, 1, 1.0))]
    assert PlanOptions(1.0, 1.0).max_replicas == 100_000  # visible (--max-replicas) and large
    (o,), _ = search(candidates(rs), PlanOptions(1900.0, 20.0, requests=4000, rounds=2, max_replicas=2), None)
    assert o.replicas is None and o.why_not is not None
    assert o.why_not.startswith("no fleet up to --max-replicas 2 meets the SLO (p99 ")  # 2 at 95 %
    (o,), _ = search(candidates(rs), PlanOptions(2500.0, 20.0, requests=2000, rounds=2, max_replicas=2), None)
    assert o.why_not == "the mean service time alone needs 3 replicas, over --max-replicas 2"
    with pytest.raises(UsageError, match="--max-replicas"):
        PlanOptions(1.0, 1.0, max_replicas=0).check()


def _exhaustive(opt: Option, sim: Simulator) -> int:
    """The smallest fleet meeting the SLO, every size tried from 1."""
    r = 1
    while not sim.meets(sim.predict(opt, sim.opts.planned_rate_per_s, r)):
        r += 1
    return r


@pytest.mark.parametrize("batching", [False, True])
def test_the_fleet_search_finds_the_smallest_fleet_an_exhaustive_scan_finds(base: Result, batching: bool) -> None:
    """Issue 36 item 1: the search added one replica at a time only below 8, then grew by 15 %, so it chose 14 /
    20 / 43 where 13 / 19 / 40 met the SLO. At each listed size the answer is the exhaustive scan's. With random
    routing a fleet of R at rate x is one replica at x / R, so the rate one replica carries under the SLO
    (``per``, bisected) sets the fleet: (W - 0.5) x per needs exactly W (batching off: p99 monotone in the
    rate; batching on: not strictly, so only the exhaustive scan is the judge)."""
    rs = [(Path("b1.json"), measured(base, 1, 1, 1, 1.0, seed=1)), (Path("b4.json"), measured(base, 4, 1, 1, 1.6, seed=4))]
    opt = options_for(candidates(rs), PlanOptions(1.0, 3.0))[1 if batching else 0]
    assert opt.policy.dynamic is batching
    one = Simulator(PlanOptions(1.0, 3.0, requests=2000), None)
    lo, hi = 1.0, capacity_per_s(opt)
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if one.meets(one.predict(opt, mid, 1)) else (lo, mid)
    for want in (9, 11, 13, 19, 40, 100, 170):
        sim = Simulator(PlanOptions((want - 0.5) * lo, 3.0, requests=2000), None)
        size_fleet(opt, sim)
        exact = _exhaustive(opt, sim)
        assert opt.replicas == exact, (want, opt.replicas, exact)
        assert opt.at_plan is not None and sim.meets(opt.at_plan)
        if not batching:
            assert exact == want
        else:
            assert abs(exact - want) <= 1


def test_a_fleet_of_over_a_thousand_replicas_is_found(base: Result) -> None:
    """The docs' own example (``--target-rate 100000``) once hit a hidden cap of 1,000 replicas (exit 3)."""
    rs = [(Path("b1.json"), measured(base, 1, 1, 1, 10.0))]
    (o,), sim = search(candidates(rs), PlanOptions(100_000.0, 50.0, requests=2000, rounds=2), None, detail=0)
    assert o.replicas is not None and o.replicas > 1000, o.why_not
    assert not sim.meets(sim.predict(o, 100_000.0, o.replicas - 1))


def test_a_replica_near_saturation_is_judged_on_a_run_long_enough_for_its_queue(base: Result) -> None:
    """A 1 ms service at 995 req/s runs at 99.5 %: 20,000 arrivals (20 s) left its queue still filling, p99 180 ms
    met a 250 ms SLO and one replica was chosen, where 600 s of virtual time give p99 288 ms (two needed). A point
    is now stretched to hold 5 relaxation times (Morse: rho / (1 - sqrt rho)^2 arrivals each) and gets the long
    run's answer; a point that would need more than MAX_POINT_ARRIVALS is not steady and never meets."""
    from inferperf.analysis.fleet import MAX_POINT_ARRIVALS, steady_arrivals

    rs = [(Path("b1.json"), measured(base, 1, 1, 1, 1.0, seed=1))]
    (short,), sim = search(candidates(rs), PlanOptions(995.0, 250.0, rounds=2), None, detail=0)
    (long_,), _ = search(candidates(rs), PlanOptions(995.0, 250.0, rounds=2, duration_s=600.0), None, detail=0)
    assert short.replicas == long_.replicas == 2
    one = sim.predict(short, 995.0, 1)
    assert sim.last["arrivals"] >= steady_arrivals(0.99) and one.steady and not sim.meets(one)
    assert steady_arrivals(0.5) == pytest.approx(5 * 0.5 / (1 - 0.5 ** 0.5) ** 2) and steady_arrivals(1.0) == float("inf")
    n, steady = sim.count(999.9, 1, short)  # 99.99 %: would need 2e8 arrivals
    assert not steady and n == 20_000 and steady_arrivals(sim.utilisation(short, 999.9, 1)) > MAX_POINT_ARRIVALS


def test_mmpp_points_cover_enough_spells_to_size_the_fleet(base: Result) -> None:
    """--arrival mmpp at a fast replica: 20,000 arrivals had been under 1 s, inside one spell (a fleet 25 % short
    when the spell was a low one). Each point now covers >= 20 s of virtual time; the default answers as a 60 s
    simulation does."""
    rs = [(Path("b1.json"), measured(base, 1, 1, 1, 0.05, seed=1))]
    (o,), sim = search(candidates(rs), PlanOptions(1_300_000.0, 5.0, rounds=2, arrival="mmpp"), None, detail=0)
    (ref,), _ = search(candidates(rs), PlanOptions(1_300_000.0, 5.0, rounds=2, arrival="mmpp", duration_s=60.0), None,
                       detail=0)
    assert o.simulation is not None and o.simulation["virtual_s"] >= 20.0
    assert o.replicas is not None and ref.replicas is not None and abs(o.replicas - ref.replicas) <= 1


def test_results_of_another_file_with_the_models_name_are_refused(base: Result, tmp_path: Path) -> None:
    """A file name says nothing of its content: Results of mb/model.onnx planned ma/model.onnx (and its Triton
    repository got mb's file)."""
    from inferperf.plan import plan
    from inferperf.results.io import save

    d = tmp_path / "results"
    save(measured(base, 1, 1, 1, 1.0), d / "b1.json")
    other = tmp_path / "elsewhere" / Path(base.model.path).name
    other.parent.mkdir()
    other.write_bytes(Path(base.model.path).read_bytes() + b"\0")  # same name, other content
    with pytest.raises(UsageError, match=r"^--from: .*b1.json measured another file named mlp \(sha256 "):
        plan(str(other), PlanOptions(100.0, 50.0, requests=2000, rounds=2), tmp_path / "p", [str(d)])
    done = plan(base.model.path, PlanOptions(100.0, 50.0, requests=2000, rounds=2), tmp_path / "q", [str(d)])
    assert done.chosen is not None


def test_each_run_is_pooled_once(base: Result) -> None:
    """A sweep folder holds cases/X.json (its runs pooled) and runs/X-r0.json, X-r1.json: pooling all three had
    counted every sample twice and taken the pooled file for a third run; a copy of a Result in a second --from
    folder was pooled twice too."""
    a = measured(base, 1, 1, 1, 1.0, seed=1)
    b = measured(base, 1, 1, 1, 1.05, seed=2)
    a.case_key = b.case_key = "k" * 16
    a.run, b.run = {"pid": 11, "repeat_index": 0}, {"pid": 12, "repeat_index": 1}
    b.created_at = "2026-12-04T00:00:01+00:00"
    pooled = a.model_copy(deep=True)
    pooled.run = {"runs": [dict(a.run), dict(b.run)], "repeats": 2}
    pooled.samples.latency_ns = a.samples.latency_ns + b.samples.latency_ns
    pooled.samples.run_ids = [0] * len(a.samples.latency_ns) + [1] * len(b.samples.latency_ns)
    rs = [(Path("cases/k.json"), pooled), (Path("runs/k-r0.json"), a), (Path("runs/k-r1.json"), b),
          (Path("copy/k-r0.json"), a.model_copy(deep=True))]
    (c,) = candidates(rs)
    assert c.sources == {1: ["runs/k-r0.json", "runs/k-r1.json"]} and c.spread()[1]["runs"] == 2
    (alone,) = candidates([(Path("cases/k.json"), pooled)])  # the pooled case alone: its runs told apart
    assert alone.spread()[1]["runs"] == 2 and alone.spread()[1]["spread"] == pytest.approx(c.spread()[1]["spread"])
    assert [x.workload.batch_size for x in ladder_configs([1, 1, 2], [1], 1, 1.0)] == [1, 2]


def test_constant_inputs_are_another_workload(base: Result) -> None:
    """``bench --value x=0`` measures other data than random inputs: never pooled with them."""
    zero = measured(base, 1, 1, 1, 0.5, seed=3)
    zero.config = zero.config.model_copy(update={"workload": zero.config.workload.model_copy(update={"values": {"x": 0.0}})})
    with pytest.raises(UsageError, match=r"input values differ"):
        candidates([(Path("r.json"), measured(base, 1, 1, 1, 1.0)), (Path("z.json"), zero)])


def test_the_printed_p99_is_simulated_long_enough_for_its_interval_to_be_within_5_percent(base: Result) -> None:
    """Issue 39 item 3: at utilisation 0.8 a p99 from a short run moves a lot from one seed to the next. The chosen
    option's p99 is taken over 5 independent runs whose length doubles until the 95 % interval is within +-5 %;
    the interval holds a far longer run's p99 (the truth to this precision). Capped short, it says it missed."""
    from inferperf.analysis.fleet import MAX_POINT_ARRIVALS
    from inferperf.analysis.fleet_detail import p99_precision

    rs = [(Path("b1.json"), measured(base, 1, 1, 1, 1.0, seed=1))]
    opt = options_for(candidates(rs), PlanOptions(800.0, 50.0))[0]  # batching off: 1 ms at 800/s, rho 0.8
    opt.replicas = 1
    sim = Simulator(PlanOptions(800.0, 50.0, requests=1000), None)
    short = [sim.predict(opt, 800.0, 1, seed_offset=k).latency_ms["p99"] for k in range(5)]
    assert (max(short) - min(short)) / np.mean(short) > 0.10  # 1,000 arrivals: not a +-5 % figure
    p99_precision(opt, sim, MAX_POINT_ARRIVALS)
    pr = opt.precision
    assert pr is not None and pr["met"] and pr["half_width"] <= 0.05 and pr["runs"] == 5
    assert pr["arrivals"] > 1000 and pr["interval"][0] < pr["p99_ms"] < pr["interval"][1]
    truth = np.mean([sim.predict(opt, 800.0, 1, seed_offset=9000 + k, arrivals=1_000_000).latency_ms["p99"]
                     for k in range(4)])  # sd of the mean about 0.6 %
    assert pr["interval"][0] <= truth <= pr["interval"][1], (pr, truth)
    assert pr["meets_slo"] and pr["interval"][1] < 50.0
    capped = options_for(candidates(rs), PlanOptions(800.0, 50.0))[0]
    capped.replicas = 1
    p99_precision(capped, sim, 1000)
    assert capped.precision is not None and not capped.precision["met"] and capped.precision["half_width"] > 0.05
    assert capped.precision["stopped"] == "longest run" and pr["stopped"] == "met"
    p99_precision(capped, sim, MAX_POINT_ARRIVALS, budget=5 * 1000)  # no arrivals left to double with
    assert capped.precision["stopped"] == "budget" and not capped.precision["met"]
    assert capped.precision["arrivals"] == 1000
    tight = Simulator(PlanOptions(800.0, pr["p99_ms"], requests=1000), None)  # an SLO at the p99 itself
    p99_precision(capped, tight, MAX_POINT_ARRIVALS)
    assert not capped.precision["meets_slo"]
