"""examples/monitoring against a real Prometheus (issue 31 item 1): Prometheus scrapes ``inferperf serve`` (both on
ephemeral 127.0.0.1 ports) under a short ``inferperf load``; every PromQL expression of the Grafana dashboard
(its variables substituted) and every variable query returns data through Prometheus' HTTP API; ``promtool check
metrics`` is clean on /metrics; ``promtool check rules`` / ``test rules`` on the alert rules (must-fire and
must-not-fire cases in alerts_test.yml). Debian's ``prometheus`` package: .ci/run installs it
(scripts/install_prometheus.sh); without it these tests skip (a failure under CI=true)."""

from __future__ import annotations

import json
import math
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.e2e.test_serve_cli import _banner, _start, _url
from tests.models import seeded_mlp_onnx

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "monitoring"
SCRAPE_S = 1
RATE_INTERVAL = "5s"  # what Grafana's $__rate_interval is at a 1 s scrape interval: 4 x scrape, rounded up
LOAD_S = 6.0


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:  # under CI=true a skip is a failure (tests/conftest.py): .ci/run installs it
        pytest.skip(f"{name} not installed (scripts/install_prometheus.sh: Debian's prometheus package)")
    return path


def _dashboard() -> dict:
    return json.loads((EXAMPLE / "grafana-dashboard.json").read_text())


def _substitute(expr: str, values: dict[str, str]) -> str:
    out = re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], expr)
    assert "$" not in out, out
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(check, what: str, deadline_s: float) -> None:
    """Poll ``check()`` every 0.25 s until it is true; fail naming ``what`` after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.25)
    raise AssertionError(f"{what} not within {deadline_s} s")


def _get(url: str, **params) -> dict:
    r = httpx.get(url, params=params, timeout=10)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["status"] == "success", doc
    return doc["data"]


@pytest.fixture(scope="module")
def watched(tmp_path_factory) -> Iterator[dict]:
    """A served model, a Prometheus scraping it every second with the example's config, and a 6 s load with more
    clients than the server queues (so some are shed: 503). Yields the URLs, the load's window and /metrics."""
    prometheus = _tool("prometheus")
    tmp = tmp_path_factory.mktemp("prometheus")
    mlp = seeded_mlp_onnx(tmp / "mlp.onnx")
    server = _start(str(mlp), "--port", "0", "--max-batch-size", "4", "--max-queue-delay-us", "2000",
                    "--max-queue-size", "2", "--instance-count", "2", "--intra-op-num-threads", "1")  # fmt: skip
    prom = None
    try:
        url = _url(_banner(server))
        config = yaml.safe_load((EXAMPLE / "prometheus.yml").read_text())
        config["global"].update(scrape_interval=f"{SCRAPE_S}s", evaluation_interval=f"{SCRAPE_S}s")
        config["rule_files"] = [str(EXAMPLE / f) for f in config["rule_files"]]
        config["scrape_configs"][0]["static_configs"][0]["targets"] = [url.removeprefix("http://")]
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
        port = _free_port()
        prom_url = f"http://127.0.0.1:{port}"
        prom = subprocess.Popen([prometheus, f"--config.file={tmp / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=open(tmp / "prometheus.log", "w"))  # fmt: skip

        def ready() -> bool:
            assert prom.poll() is None, (tmp / "prometheus.log").read_text()[-3000:]
            try:
                return httpx.get(f"{prom_url}/-/ready", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        _wait(ready, "Prometheus ready", 60)
        _wait(lambda: _get(f"{prom_url}/api/v1/query", query='up{job="inferperf"} == 1')["result"],
              "the server's first scrape", 30)
        first = _get(f"{prom_url}/api/v1/query", query='inferperf_requests_total{model="mlp"} or '
                     'inferperf_rejected_total{model="mlp"}')["result"]  # scraped before any request
        start = time.time()
        bad = {"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}
        for _ in range(3):  # three 400s within one scrape interval: a series born now would read 3 at once
            assert httpx.post(f"{url}/v2/models/mlp/infer", json=bad, timeout=10).status_code == 400
        time.sleep(SCRAPE_S * 2)
        load = subprocess.run([sys.executable, "-m", "inferperf", "load", url, "--model", "mlp", "--concurrency", "16",
                               "--warmup-s", "0.5", "--duration-s", str(LOAD_S), "-o", str(tmp / "load")],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert load.returncode == 0, load.stderr[-2000:]
        end = time.time()
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
        _wait(lambda: float(_get(f"{prom_url}/api/v1/query", query='timestamp(up{job="inferperf"})')["result"][0]
                            ["value"][1]) > end + SCRAPE_S, "a scrape after the load", 30)
        yield {"prometheus": prom_url, "start": start, "end": end, "metrics": metrics, "first": first}
    finally:
        for p in (prom, server):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)


def _values(result: list[dict]) -> list[float]:
    return [float(v) for series in result for _, v in series["values"]]


def test_every_dashboard_query_returns_data_from_a_real_prometheus(watched: dict) -> None:
    values = {"model": "mlp", "job": "inferperf", "__rate_interval": RATE_INTERVAL}
    dash = _dashboard()
    exprs = [(p["title"], t["expr"]) for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 15
    empty = []
    for title, expr in exprs:
        data = _get(f"{watched['prometheus']}/api/v1/query_range", query=_substitute(expr, values),
                    start=watched["start"], end=watched["end"], step=SCRAPE_S)
        if not [v for v in _values(data["result"]) if math.isfinite(v)]:
            empty.append(f"{title}: {expr}")
    assert not empty, "no data for:\n" + "\n".join(empty)
    # the panels say what happened: requests answered, some shed, both instances busy
    by_status = _get(f"{watched['prometheus']}/api/v1/query", time=watched["end"],
                     query='sum by (status) (increase(inferperf_requests_total{model="mlp"}[1h]))')["result"]
    statuses = {s["metric"]["status"] for s in by_status}
    assert {"200", "503"} <= statuses, statuses
    busy = _get(f"{watched['prometheus']}/api/v1/query", time=watched["end"],
                query='inferperf_instance_busy_seconds_total{model="mlp"} > 0')["result"]
    assert sorted(s["metric"]["model_instance"] for s in busy) == ["0", "1"]


def test_every_series_exists_at_zero_before_its_first_event_so_increase_counts_it(watched: dict) -> None:
    """Issue 41 item 6: the first scrape, before any request, holds every status and shedding reason at 0 (499
    among them); so the three 400s sent within one scrape interval after it are counted by increase() (a series
    born at its first event would read 3 at its first sample, and increase() 0)."""
    first = {(s["metric"].get("status") or s["metric"]["reason"]): float(s["value"][1]) for s in watched["first"]}
    assert {"200", "400", "413", "499", "500", "503", "504", "queue_full", "timeout"} <= set(first), first
    assert set(first.values()) == {0.0}
    got = _get(f"{watched['prometheus']}/api/v1/query", time=watched["end"],
               query='sum(increase(inferperf_requests_total{model="mlp",status="400"}[1h]))')["result"]
    assert got and 2.5 <= float(got[0]["value"][1]) <= 4.0, got  # 3, within increase()'s extrapolation


def test_every_dashboard_variable_query_lists_the_served_model(watched: dict) -> None:
    expect = {"job": "inferperf", "model": "mlp"}
    for var in _dashboard()["templating"]["list"]:
        m = re.fullmatch(r"label_values\((.+), (\w+)\)", var["query"]["query"])
        assert m and var["definition"] == var["query"]["query"], var
        selector = _substitute(m.group(1), {"job": "inferperf"})
        got = _get(f"{watched['prometheus']}/api/v1/label/{m.group(2)}/values", **{"match[]": selector},
                   start=watched["start"], end=watched["end"])
        assert expect[var["name"]] in got, (var["name"], got)


def test_promtool_check_metrics_is_clean_on_the_servers_metrics(watched: dict) -> None:
    promtool = _tool("promtool")
    assert "inferperf_instance_busy_seconds_total" in watched["metrics"]
    p = subprocess.run([promtool, "check", "metrics"], input=watched["metrics"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and not (p.stdout + p.stderr).strip(), p.stdout + p.stderr


def test_promtool_checks_the_alert_rules_and_their_must_fire_and_must_not_fire_cases() -> None:
    promtool = _tool("promtool")
    check = subprocess.run([promtool, "check", "rules", str(EXAMPLE / "alerts.yml")], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0 and "SUCCESS: 3 rules found" in check.stdout, check.stdout + check.stderr
    test = subprocess.run([promtool, "test", "rules", "alerts_test.yml"], cwd=EXAMPLE, capture_output=True,
                          text=True, timeout=60)
    assert test.returncode == 0 and "SUCCESS" in test.stdout, test.stdout + test.stderr


def test_the_dashboard_follows_grafanas_import_format() -> None:
    """What Grafana's import needs: a datasource input every query uses, unique panel ids, a gridPos and refIds
    per panel, every variable an expression names declared."""
    dash = _dashboard()
    inputs = {i["name"] for i in dash["__inputs"] if i["type"] == "datasource" and i["pluginId"] == "prometheus"}
    assert inputs == {"DS_PROMETHEUS"} and dash["uid"] and dash["title"] and dash["schemaVersion"] >= 36
    declared = {v["name"] for v in dash["templating"]["list"]} | {"__rate_interval"}
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        assert set(p["gridPos"]) == {"h", "w", "x", "y"} and p["type"] in ("timeseries", "heatmap")
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs))
        for t in [p, *p["targets"]]:
            assert t["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
        for t in p["targets"]:
            assert set(re.findall(r"\$\{?(\w+)", t["expr"])) <= declared, t["expr"]
    titles = " ".join(p["title"] for p in dash["panels"]).lower()
    for what in ("requests", "error", "p99", "queue", "batch size", "busy", "memory", "cpu"):
        assert what in titles
