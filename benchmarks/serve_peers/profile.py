"""Where does a serving arm's CPU time go under load? py-spy over one wrk point (issue 12).

Run: ``python benchmarks/serve_peers/profile.py [--arm on] [--encoding binary] [--concurrency 16]
[--seconds 10] [--model zoo:squeezenet]``. The arm is started as in benchmarks/serve.py (pinned to CPU
0), wrk (pinned to CPU 1) drives it, and ``py-spy record --format raw --native`` (which pauses the process per sample) samples the server for
the same window (the collapsed stacks are kept next to ``--out`` as ``*.stacks.txt``). Printed: the top functions by self samples and by inclusive samples (share of all
on-CPU samples), and the collapsed stacks file for a flame graph.

Before the sampled window, a counters window of the same length with no sampler attached (py-spy pauses the
process per sample, which inflates its own share): the server's user and system CPU ms, minor page faults and
context switches per request, from ``/proc/PID/stat`` and ``/proc/PID/status`` (Linux) read at both edges.
"""

from __future__ import annotations

import argparse
import collections
import shlex
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from serve import _probes, load_models, run_wrk  # noqa: E402
from serve_peers.arms import MLSERVER_VENV, available_arms  # noqa: E402
from serve_peers.bodies import tensors, write_bodies  # noqa: E402


FOCUS = ("inferperf/serve/", "Session.run", "orjson", "json/", "numpy", "uvicorn/protocols", "starlette/",
         "prometheus_client", "asyncio/")


def _frame(f: str) -> str:
    """A native frame without symbol ('0x7f... (libc.so.6)') becomes '[libc.so.6]'."""
    if f.startswith("0x") and "(" in f:
        return "[" + f[f.index("(") + 1 : f.rindex(")")].rsplit("/", 1)[-1] + "]"
    return f


def proc_counters(pid: int) -> dict[str, float]:
    """User and system CPU seconds, minor faults and context switches of process ``pid`` (all threads), from
    ``/proc`` (Linux; field numbers from proc(5))."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    switches = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
            switches += int(line.split()[1])
    # after the ")": state is field 3 of proc(5), so minflt (10) is [7], utime (14) [11], stime (15) [12]
    return {"user_s": int(fields[11]) / tick, "sys_s": int(fields[12]) / tick, "minflt": int(fields[7]),
            "switches": switches}


def counters_line(a: dict[str, float], b: dict[str, float], requests: int) -> str:
    """Per-request server figures between two :func:`proc_counters` reads."""
    n = max(requests, 1)
    return (f"server per request (no sampler, {requests} requests): user {1e3 * (b['user_s'] - a['user_s']) / n:.3f} ms,"
            f" system {1e3 * (b['sys_s'] - a['sys_s']) / n:.3f} ms, minor faults {(b['minflt'] - a['minflt']) / n:.1f},"
            f" context switches {(b['switches'] - a['switches']) / n:.2f}")


def summarize(collapsed: Path, top: int) -> str:
    """Top frames by self share, and the inclusive share of the frames in FOCUS, of a py-spy raw file."""
    self_n: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, n_s = line.rpartition(" ")
        if not stack:
            continue
        n = int(n_s)
        frames = [_frame(f) for f in stack.split(";")]
        total += n
        self_n[frames[-1]] += n
        for f in set(frames):
            if any(k in f for k in FOCUS):
                incl[f] += n
    out = [f"{total} samples (on-CPU, all threads)", f"-- top {top} by self share --"]
    out += [f"{100 * n / total:5.1f} %  {f[:160]}" for f, n in self_n.most_common(top)]
    out.append(f"-- top {top} serving frames by inclusive share --")
    out += [f"{100 * n / total:5.1f} %  {f[:160]}" for f, n in incl.most_common(top)]
    return "\n".join(out)


def main() -> None:
    """Serve one arm under wrk while py-spy samples the server; print the shares of its loop thread."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="zoo:squeezenet")
    ap.add_argument("--arm", default="on")
    ap.add_argument("--encoding", default="binary")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--batch-flags", default="--dynamic-batching --max-queue-delay-us 2000")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", type=Path, default=Path("results") / "serve-profile.txt")
    args = ap.parse_args()
    model = load_models([args.model], 8)[0]
    arm = next(a for a in available_arms(0, shlex.split(args.batch_flags)) if a.key == args.arm)
    with tempfile.TemporaryDirectory(prefix="serve-profile-") as tmp:
        work = Path(tmp)
        xs = tensors(model.shape, 64)
        bodies = write_bodies(work / args.encoding, model.input, xs, args.encoding)
        arm.start(model, work, _probes(model.input, xs[0]))
        try:
            assert arm.proc is not None
            url, path = f"http://127.0.0.1:{arm.port}", f"/v2/models/{model.name}/infer"
            c0 = proc_counters(arm.proc.pid)
            quiet = run_wrk(url, bodies, path, args.concurrency, args.seconds, 1)
            counters = counters_line(c0, proc_counters(arm.proc.pid), quiet["requests"])
            counters += f"; {quiet['rps']:.1f} req/s"
            raw = work / "stacks.txt"
            spy = subprocess.Popen([str(MLSERVER_VENV / "bin" / "py-spy"), "record", "--pid", str(arm.proc.pid),
                                    "--duration", str(int(args.seconds)), "--rate", "200", "--format", "raw",
                                    "--native", "--output", str(raw)],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            res: dict = {}
            t = threading.Thread(target=lambda: res.update(run_wrk(url, bodies, path, args.concurrency, args.seconds,
                                                                   1)))  # fmt: skip
            t.start()
            spy_out = spy.communicate(timeout=args.seconds + 120)[0]
            t.join()
        finally:
            arm.stop()
        text = (f"{model.label} {arm.label} {args.encoding} conc. {args.concurrency}: {res.get('rps', 0):.1f} req/s,"
                f" p50 {res.get('p50_ms', 0):.2f} ms (sampled)\n{counters}\n" + (summarize(raw, args.top) if raw.exists() else spy_out))
        if raw.exists():
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.with_suffix(".stacks.txt").write_text(raw.read_text())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
