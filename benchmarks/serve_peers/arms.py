"""The servers of benchmarks/serve.py (issue 12): each arm a subprocess pinned with ``taskset`` to one CPU.

Arms: ``inferperf serve`` with dynamic batching off or on; the minimal per-request ``session.run`` app
(minimal_app.py, stdlib json); MLServer with the custom ONNX Runtime runtime of mlserver/ and its adaptive
batching on. Every server listens on 127.0.0.1 only; ``start`` waits until one real request succeeds
(deadline), ``stop`` sends SIGTERM then SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MLSERVER_VENV = Path(os.environ.get("INFERPERF_MLSERVER_VENV", ROOT / ".venv-mlserver"))


def free_port() -> int:
    """A 127.0.0.1 port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(url: str, body: bytes, headers: dict[str, str], timeout: float = 60.0) -> tuple[int, bytes, dict[str, str]]:
    """POST ``body``: (status, response body, lower-cased headers); connection errors give status 0."""
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as e:
        return e.code, e.read(), {k.lower(): v for k, v in e.headers.items()}
    except OSError:
        return 0, b"", {}


def get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """GET ``url``: (status, body); connection errors give status 0."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""


@dataclass
class Model:
    """One benchmarked model: how each server is told about it."""

    label: str            # row label, e.g. "squeezenet 224"
    name: str             # served model name (URL path)
    spec: str             # what `inferperf serve`/`bench` get: zoo:NAME or a file
    path: Path            # an ONNX file with a dynamic batch dim (for the peers)
    input: str            # input name
    shape: tuple[int, ...]  # one request's shape, batch 1 included
    shape_flags: list[str] = field(default_factory=list)  # e.g. ["--shape", "x:1x3x640x640"]
    max_batch_size: int = 8


@dataclass
class Arm:
    """One server under test; ``encodings`` are the body kinds it accepts ("binary", "json")."""

    key: str
    label: str
    encodings: tuple[str, ...]
    cpu: int
    proc: subprocess.Popen | None = None
    port: int = 0
    log: Path | None = None

    def command(self, model: Model, port: int, workdir: Path) -> tuple[list[str], dict[str, str]]:
        """The server's command line (without taskset) and extra environment."""
        raise NotImplementedError

    def start(self, model: Model, workdir: Path, probes: dict[str, tuple[bytes, dict[str, str]]],
              deadline_s: float = 180) -> None:
        """Start pinned to ``self.cpu``, wait for /v2/health/ready, then check that one request in the arm's
        first encoding (``probes[encoding]`` = body, headers) gets a 200 (RuntimeError otherwise)."""
        self.port = free_port()
        cmd, env = self.command(model, self.port, workdir)
        self.log = workdir / f"{self.key}.log"
        out = self.log.open("w")
        self.proc = subprocess.Popen(["taskset", "-c", str(self.cpu), *cmd], stdout=out, stderr=subprocess.STDOUT,
                                     env={**os.environ, **env}, cwd=workdir)
        end = time.monotonic() + deadline_s
        while get(f"http://127.0.0.1:{self.port}/v2/health/ready")[0] != 200:
            if self.proc.poll() is not None or time.monotonic() > end:
                self.stop()
                raise RuntimeError(f"{self.label} not ready within {deadline_s} s: {self.log.read_text()[-1500:]}")
            time.sleep(0.3)
        status, body, _ = post(self.infer_url(model), *probes[self.encodings[0]], timeout=60)
        if status != 200:
            self.stop()
            raise RuntimeError(f"{self.label}: first request got HTTP {status}: {body[:300]!r}; log:"
                               f" {self.log.read_text()[-1000:]}")

    def infer_url(self, model: Model) -> str:
        """The POST URL of ``model``."""
        return f"http://127.0.0.1:{self.port}/v2/models/{model.name}/infer"

    def wait_idle(self, cpu_share: float = 0.05, window_s: float = 0.3, deadline_s: float = 120.0) -> float:
        """Wait until the server (and its children) used under ``cpu_share`` of one CPU over ``window_s``:
        requests a load point left queued (wrk stops with requests in flight) must not run into the next
        point. Returns the seconds waited (the deadline ends the wait)."""
        import psutil

        if self.proc is None:
            return 0.0
        t0 = time.monotonic()
        root = psutil.Process(self.proc.pid)

        def cpu() -> float:
            total = 0.0
            for p in [root, *root.children(recursive=True)]:
                try:
                    t = p.cpu_times()
                    total += t.user + t.system
                except psutil.Error:
                    pass
            return total

        while time.monotonic() - t0 < deadline_s:
            c0 = cpu()
            time.sleep(window_s)
            if cpu() - c0 < cpu_share * window_s:
                break
        return time.monotonic() - t0

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 20 s."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None


@dataclass
class InferperfArm(Arm):
    """``inferperf serve`` (intra-op 1); ``extra`` holds the batching flags."""

    extra: list[str] = field(default_factory=list)

    def command(self, model: Model, port: int, workdir: Path) -> tuple[list[str], dict[str, str]]:
        return ([sys.executable, "-m", "inferperf", "serve", model.spec, *model.shape_flags, "--model-name", model.name,
                 "--port", str(port), "--max-batch-size", str(model.max_batch_size), "--intra-op-num-threads", "1",
                 *self.extra], {})

    def metrics(self) -> str:
        """The /metrics text ('' when unavailable)."""
        status, body = get(f"http://127.0.0.1:{self.port}/metrics")
        return body.decode() if status == 200 else ""


@dataclass
class MinimalArm(Arm):
    """benchmarks/serve_peers/minimal_app.py: per-request session.run, stdlib json."""

    def command(self, model: Model, port: int, workdir: Path) -> tuple[list[str], dict[str, str]]:
        return [sys.executable, str(HERE / "minimal_app.py"), str(model.path), model.name, str(port)], {}


@dataclass
class MlserverArm(Arm):
    """MLServer (own venv) with the ONNX Runtime runtime of mlserver/onnx_runtime.py, adaptive batching on."""

    max_batch_time_s: float = 0.002

    def command(self, model: Model, port: int, workdir: Path) -> tuple[list[str], dict[str, str]]:
        repo = workdir / "mlserver-repo"
        (repo / model.name).mkdir(parents=True, exist_ok=True)
        (repo / "settings.json").write_text(json.dumps({
            "http_port": port, "grpc_port": free_port(), "metrics_port": free_port(), "host": "127.0.0.1",
            "parallel_workers": 0, "debug": False, "load_models_at_startup": True}))
        (repo / model.name / "model-settings.json").write_text(json.dumps({
            "name": model.name, "implementation": "onnx_runtime.OnnxRuntime",
            "max_batch_size": model.max_batch_size, "max_batch_time": self.max_batch_time_s,
            "parameters": {"uri": str(model.path)}}))
        return [str(MLSERVER_VENV / "bin" / "mlserver"), "start", str(repo)], {"PYTHONPATH": str(HERE / "mlserver")}


def available_arms(server_cpu: int, batch_flags: list[str], mlserver: bool = True) -> list[Arm]:
    """The four arms (MLServer only when its venv exists and ``mlserver``)."""
    arms: list[Arm] = [
        InferperfArm("off", "inferperf serve, batching off", ("binary", "json"), server_cpu),
        InferperfArm("on", "inferperf serve, batching on", ("binary", "json"), server_cpu, extra=batch_flags),
        MinimalArm("minimal", "per-request session.run app (stdlib json)", ("binary", "json"), server_cpu),
    ]
    if mlserver and (MLSERVER_VENV / "bin" / "mlserver").exists():
        # MLServer's REST server has no binary tensor extension: JSON only.
        arms.append(MlserverArm("mlserver", "MLServer, adaptive batching", ("json",), server_cpu))
    return arms
