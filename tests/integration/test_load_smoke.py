"""``inferperf load`` over real sockets against ``inferperf serve`` on 127.0.0.1 (loose bounds, no speed claims)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from inferperf.cli import main
from inferperf.config import BenchConfig
from inferperf.errors import UsageError
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.run import load
from inferperf.results.io import load as load_result
from inferperf.serve.server import serving
from tests.models import seeded_mlp_onnx

FAST = {"warmup_s": 0.3, "duration_s": 1.5, "measurement_interval_ms": 500}


def test_closed_loop_smoke_with_server_block(server) -> None:
    (r,) = load(LoadConfig(url=server.url, model="mlp", concurrency=[2], **FAST))
    c = r.metrics.client
    assert r.kind == "load" and r.config.scenario == "concurrent" and r.config.concurrency == 2
    assert r.metrics.latency_ms.count > 10 and r.metrics.errors.count == 0
    assert c["uncorrected_latency_ms"]["count"] == r.metrics.latency_ms.count
    assert c["littles_law"]["measured"] == 2
    s = r.metrics.server
    assert s is not None and s["requests"] >= r.metrics.latency_ms.count
    split = s["latency_split_ms"]
    assert split["queue_ms"] >= 0 and split["compute_ms"] > 0 and split["rest_ms"] >= 0
    assert len(r.samples.latency_ns) == r.metrics.latency_ms.count


def test_open_loop_poisson_binary_smoke(server) -> None:
    cfg = LoadConfig(url=server.url, model="mlp", request_rate=[40], arrival="poisson", protocol="binary", **FAST)
    (r,) = load(cfg)
    c = r.metrics.client
    assert r.config.scenario == "server" and c["target_rate"] == 40
    assert 10 < c["send_rate"] < 100  # Poisson over 1.5 s: loose
    assert r.metrics.errors.count == 0 and r.metrics.latency_ms.count > 5
    assert c["send_lag_ms"]["max"] >= 0 and c["connections"]["peak"] >= 1


def test_trace_replay_smoke(server, tmp_path) -> None:
    """A trace file replays over real sockets: of 64 offsets, the 2 inside the 0.3 s warm-up and the 2 after the
    1.5 s measured window are not measured, the 60 between (every 20 ms from 0.40 s) are, exactly: sends follow
    the file, not a rate. A request counts by its answer's time, so every offset keeps 100 ms or more from both
    edges of the window (a stall of that size on a loaded runner would otherwise move one across)."""
    trace = tmp_path / "trace.txt"
    measured = [0.40 + 0.020 * i for i in range(60)]  # 0.40 .. 1.58 s, inside (0.3, 1.8] with 100+ ms to spare
    trace.write_text("\n".join(f"{t:.3f}" for t in [0.05, 0.15, *measured, 1.95, 2.05]) + "\n")
    cfg = LoadConfig(url=server.url, model="mlp", arrival=f"trace:{trace}", protocol="binary", **FAST)
    (r,) = load(cfg)
    assert r.config.scenario == "server" and r.metrics.errors.count == 0
    assert r.metrics.latency_ms.count == len(measured)


def test_a_weighted_shape_mix_is_accepted_by_the_server(server) -> None:
    cfg = LoadConfig(url=server.url, model="mlp", concurrency=[2], shapes=["x:1x32", "x:3x32"], shape_weights=[3, 1],
                     requests=30, warmup_s=0.2)  # fmt: skip
    (r,) = load(cfg)
    assert r.metrics.errors.count == 0 and r.metrics.latency_ms.count == 30
    assert r.metrics.throughput.samples_per_s > 0


def test_requests_n_over_two_workers_pools_raw_samples(server) -> None:
    cfg = LoadConfig(url=server.url, model="mlp", concurrency=[2], workers=2, requests=20, warmup_s=0.2)
    (r,) = load(cfg)
    assert r.metrics.latency_ms.count == 20
    assert sorted(set(r.samples.stream_ids)) == [0, 1]
    assert r.metrics.client["workers"] == 2


def test_unknown_model_and_unreachable_target_are_one_line_usage_errors(server) -> None:
    with pytest.raises(UsageError, match="'nope' is not served.*served: mlp"):
        load(LoadConfig(url=server.url, model="nope", concurrency=[1], **FAST))
    with pytest.raises(UsageError, match="unreachable"):
        load(LoadConfig(url="http://127.0.0.1:9", model="mlp", concurrency=[1], **FAST))


def test_plain_url_with_a_body_file(server, tmp_path, capsys) -> None:
    """`--body FILE --header K:V` drives any HTTP endpoint (here the server's infer route with a JSON body); an
    unreachable plain URL is one line, exit 2, before any load (it used to run the whole step and exit 1)."""
    import orjson

    body = tmp_path / "req.json"
    body.write_bytes(orjson.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 32], "data": [0.5] * 32}]}))
    (r,) = load(LoadConfig(url=f"{server.url}/v2/models/mlp/infer", body=str(body),
                           headers=["Content-Type:application/json"], concurrency=[1], **FAST))
    assert r.kind == "load" and r.metrics.errors.count == 0 and r.metrics.latency_ms.count > 5
    assert main(["load", "http://127.0.0.1:9/predict", "--body", str(body), "--concurrency", "1",
                 "--duration-s", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unreachable" in err[0] and "start the server or fix the URL" in err[0]


@pytest.mark.parametrize("argv", [["--model", "mlp", "--request-rate", "0"], ["--model", "mlp", "--concurrency", "-1"],
                                  ["--model", "nope"], ["--model", "mlp", "--arrival", "trace:/nonexistent.txt"]])
def test_bad_input_exits_2(server, argv, capsys) -> None:
    assert main(["load", server.url, *argv, "--duration-s", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_an_unknown_model_to_serve_exits_2_with_one_line(capsys) -> None:
    assert main(["load", "zoo:doesnotexist", "--concurrency", "1", "--duration-s", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown zoo model 'doesnotexist'" in err[0]


def test_strict_rate_short_exits_3(server, capsys) -> None:
    argv = ["load", server.url, "--model", "mlp", "--request-rate", "5000", "--max-connections", "1",
            "--warmup-s", "0.2", "--duration-s", "1", "--strict-rate"]
    assert main(argv) == 3
    assert "--strict-rate" in capsys.readouterr().err


def test_a_target_dying_mid_run_ends_on_time_with_exit_1(tmp_path, capsys) -> None:
    mlp = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}, "warmup": {"iterations": 1}})
    out = tmp_path / "out"
    with serving(str(mlp), cfg, name="mlp") as handle:
        threading.Timer(1.2, handle.stop).start()
        code = main(["load", handle.url, "--model", "mlp", "--concurrency", "2", "--warmup-s", "0.2",
                     "--duration-s", "2.5", "--measurement-interval-ms", "500", "-o", str(out)])
    assert code == 1
    assert "stopped answering" in capsys.readouterr().err
    (path,) = out.glob("*.json")
    r = load_result(path)
    assert r.metrics.errors.count > 0 and r.metrics.client["target_lost"]
    assert r.metrics.client["zero_completion_windows"]


@pytest.mark.slow
def test_load_zoo_model_starts_and_stops_its_own_server(tmp_path) -> None:
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "inferperf", "load", "zoo:squeezenet", "--concurrency", "2",
                        "--duration-s", "3", "-o", str(out)], capture_output=True, text=True, timeout=240)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "concurrency" in p.stdout and "VALID" in p.stdout
    results = [load_result(f) for f in sorted(Path(out).glob("*.json"))]
    kinds = sorted(r.kind for r in results)
    assert kinds == ["load", "serve"]
    client = next(r for r in results if r.kind == "load")
    placement = client.run["placement"]
    assert set(placement["generator_cpus"]).isdisjoint(placement["server_cpus"]) or not placement["disjoint"]
    assert client.metrics.latency_ms.count > 0
