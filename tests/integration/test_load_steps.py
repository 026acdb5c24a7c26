"""``inferperf load`` steps over real sockets against ``inferperf serve`` on 127.0.0.1 (issue 23 items 2-4)."""

from __future__ import annotations

import os

import orjson
import pytest

from inferperf.cli import main
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.run import load
from inferperf.results.io import load as load_result


def test_a_shape_the_model_refuses_is_one_line_exit_2_before_any_request(server, capsys) -> None:
    """Checked against GET /v2/models/mlp (x [-1, 32]) as `bench --shape` checks: nothing is sent, no table."""
    assert main(["load", server.url, "--model", "mlp", "--shape", "x:1x16", "--concurrency", "1",
                 "--duration-s", "5"]) == 2  # fmt: skip
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "contradicts fixed dim 1 (= 32)" in lines[0] and "keep 32" in lines[0]
    assert "concurrency" not in out  # refused before the table


def test_requests_the_server_answers_400_stop_after_10_and_exit_2_with_its_words(server, tmp_path, capsys) -> None:
    """A prepared body the server refuses (a plain URL has no metadata to check it against): the step stops
    after 10 answers 400 in a row instead of running its 5 s as a 'stall', the Result is kept (INVALID, the
    refusal in `metrics.client.rejected`) and the exit is 2 with the server's own message on one line."""
    body = tmp_path / "bad.json"
    body.write_bytes(orjson.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16], "data": [0.5] * 16}]}))
    out = tmp_path / "out"
    assert main(["load", f"{server.url}/v2/models/mlp/infer", "--body", str(body), "--header",
                 "Content-Type:application/json", "--concurrency", "1", "--warmup-s", "0", "--duration-s", "5",
                 "-o", str(out)]) == 2  # fmt: skip
    err = [x for x in capsys.readouterr().err.strip().splitlines() if x.startswith("error:")]
    assert len(err) == 1 and "10 answers 400 in a row" in err[0] and "does not match the model's" in err[0]
    (path,) = out.glob("*.json")
    r = load_result(path)
    assert r.metrics.client["rejected"]["in_a_row"] == 10 and r.metrics.errors.by_kind == {"http_400": 10}
    assert not r.validity.valid  # one stream sent exactly 10 requests: it stopped there, it did not run its 5 s
    assert r.metrics.client["requests_sent"] == 10 and r.metrics.latency_ms.count == 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_load_zoo_ppocr_cls_uses_the_zoos_default_shape_as_bench_does(tmp_path) -> None:
    """`load zoo:ppocr-cls` (own server) sends x:1x3x48x192, the shape `bench zoo:ppocr-cls` measures (it used to
    stop at 'pass --shape x:1x3x8x8')."""
    out = tmp_path / "out"
    assert main(["load", "zoo:ppocr-cls", "--concurrency", "1", "--requests", "20", "--warmup-s", "0.2",
                 "-o", str(out)]) == 0  # fmt: skip
    (client,) = [r for r in map(load_result, out.glob("*.json")) if r.kind == "load"]
    assert client.config.workload.shapes == {"x": [1, 3, 48, 192]}
    assert client.metrics.latency_ms.count == 20 and client.metrics.errors.count == 0


FAST = {"warmup_s": 0.2, "duration_s": 0.8, "measurement_interval_ms": 400}


def _measured_something(r) -> None:  # noqa: ANN001
    c = r.metrics.client
    assert r.metrics.latency_ms.count > 0 and r.metrics.errors.count == 0
    assert not any("no request succeeded" in x for x in r.validity.reasons), r.validity  # (the server shares this
    # process, so generator-bound may be said: its CPU is counted)
    assert c["client_cpu_percent"] is not None and 0 <= c["client_cpu_percent"] <= 100 * os.cpu_count()


@pytest.mark.timeout(240)
def test_stress_with_two_workers_measures_its_first_step_at_concurrency_1(server) -> None:
    """`--stress --workers 2`: the ramp starts at 1 stream, which ran ONE worker (a second one had no stream,
    an empty span, and the pooled span collapsed: 'no request succeeded', '4000000000 % of one core'). A
    1 us SLO ends the ramp after that step."""
    from inferperf.loadgen.stress import stress

    (r,) = stress(LoadConfig(url=server.url, model="mlp", stress=True, workers=2, slo_p99_ms=1e-3, **FAST))
    assert r.config.concurrency == 1 and r.metrics.client["workers"] == 1
    _measured_something(r)
    assert any("--workers 2 at concurrency 1: 1 worker" in n for n in r.notes)


@pytest.mark.timeout(240)
def test_two_workers_over_concurrency_1_then_2(server) -> None:
    r1, r2 = load(LoadConfig(url=server.url, model="mlp", concurrency=[1, 2], workers=2, **FAST))
    assert (r1.metrics.client["workers"], r2.metrics.client["workers"]) == (1, 2)
    for r in (r1, r2):
        _measured_something(r)
    assert sorted(set(r2.samples.stream_ids)) == [0, 1]


def test_stress_and_find_max_rate_print_their_plan_and_progress_on_stderr(server, capsys) -> None:
    for flags, step1, column in [(["--stress"], "step 1 of at most 12: concurrency 1, about", "concurrency"),
                                 (["--find-max-rate", "--request-rate", "1000"],
                                  "step 1 bracketing: 1000 req/s, about", "rate/s")]:  # fmt: skip
        assert main(["load", server.url, "--model", "mlp", *flags, "--slo-p99-ms", "0.001", "--warmup-s", "0.2",
                     "--duration-s", "0.5"]) == 0  # fmt: skip
        out, err = capsys.readouterr()
        lines = err.splitlines()
        assert lines[0].startswith("plan: ") and lines[1].startswith(step1) and "so far" in lines[1]
        assert any(x.startswith("done: 1 step in ") for x in lines)
        assert any(x.split()[:1] == [column] for x in out.splitlines())  # the table's header row
