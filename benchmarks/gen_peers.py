"""Token-stream clients side by side (issue 30 items 5 and 6): the mock token server, the three clients
(``inferperf load --api openai-chat``, NVIDIA AIPerf, GuideLLM) as subprocesses, and each one's figures read
from its own output, under the definitions mapped here so that like is compared with like.

| figure | inferperf (Result ``metrics.generation``) | AIPerf (``profile_export_aiperf.json``) | GuideLLM (``--output kind=json``) | mock (``--mock-log``) |
|---|---|---|---|---|
| TTFT p50: first content token - send | ``ttft_ms.p50`` (from the scheduled send) | ``time_to_first_token.p50`` | ``time_to_first_token_ms.successful.median`` | ``ttft_ms`` (from arrival) |
| ITL p50: one sample per gap between content events | ``itl_ms.p50`` | ``inter_chunk_latency.p50`` | (none: no per-gap figure) | ``itl_ms`` pooled |
| TPOT p50: per request (last - first token) / (tokens - 1) | ``tpot_ms.p50`` (e2e - TTFT) | ``inter_token_latency.p50`` | ``inter_token_latency_ms.successful.median`` (weighted by tokens - 1) | (last - first send) / (n - 1) |
| output tokens/s | ``output_tokens_per_s`` | ``output_token_throughput.avg`` | ``output_tokens_per_second.total.mean`` | tokens / (last done - first arrival) |

AIPerf's "inter_token_latency" and GuideLLM's "inter_token_latency_ms" are both a per-request average, i.e.
inferperf's TPOT; GuideLLM's own "time_per_output_token_ms" is (last token - request start) / tokens, TTFT
included, a figure the others do not have. Sources: aiperf 0.13.0 ``metrics/types`` and the export's
``inter_chunk_latency``; guidellm 0.8.1 ``schemas/base/request_stats.py`` (``inter_token_latency_ms``,
``time_per_output_token_ms``).

Both peers run offline: the tokenizer is a local directory (``scripts/make_tokenizer.py``, one token per
whitespace word, the mock's count); AIPerf is given its absolute path (it then loads it with
``AutoTokenizer.from_pretrained(path)``; with ``HF_HUB_OFFLINE=1`` AIPerf 0.13 instead looks the name up in
the hub cache and fails on a path, so that variable is left unset for it), GuideLLM gets
``HF_HUB_OFFLINE=1``/``TRANSFORMERS_OFFLINE=1``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
AIPERF = Path(os.environ.get("INFERPERF_AIPERF_VENV", ROOT / ".venv-aiperf")) / "bin"
GUIDELLM = Path(os.environ.get("INFERPERF_GUIDELLM_VENV", ROOT / ".venv-guidellm")) / "bin"
INPUT_TOKENS, OUTPUT_TOKENS = 64, 16


def start_mock(tmp: Path, profile: str, cpu: int | None = None) -> tuple[subprocess.Popen, str, Path]:
    """Start ``inferperf serve --mock-generate`` with the YAML ``profile`` text on a free port (pinned to
    ``cpu`` when given); returns (process, base URL, its ``--mock-log`` path). Raises SystemExit: no start in 60 s."""
    (tmp / "profile.yaml").write_text(profile)
    log = tmp / "mock.jsonl"
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    proc = subprocess.Popen([*pin, sys.executable, "-m", "inferperf", "serve", "--mock-generate", "--port", "0",
                             "--mock-profile", str(tmp / "profile.yaml"), "--mock-log", str(log)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    end = time.monotonic() + 60
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if line.startswith("MOCK token server"):
            return proc, re.search(r"http://[0-9.]+:[0-9]+", line).group(), log  # type: ignore[union-attr]
    proc.kill()
    raise SystemExit("the mock did not start")


def stop_mock(proc: subprocess.Popen) -> None:
    """Stop the mock: SIGTERM, then SIGKILL when it has not exited in 10 s (a run once hung in its teardown)."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def make_tokenizer(dest: Path) -> Path:
    """The WordLevel tokenizer directory (``scripts/make_tokenizer.py``, run by a peer venv's Python)."""
    py = AIPERF / "python" if (AIPERF / "python").exists() else GUIDELLM / "python"
    subprocess.run([str(py), str(ROOT / "scripts" / "make_tokenizer.py"), str(dest)], check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    return dest


def read_log(log: Path) -> list[dict[str, Any]]:
    """The mock's records so far, in the order requests finished (one JSON line each)."""
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def truth(recs: list[dict[str, Any]]) -> dict[str, float]:
    """The mock's true figures over ``recs`` (module table): ms and tokens/s."""
    tpot = [(r["send_ns"][-1] - r["send_ns"][0]) / 1e6 / (len(r["send_ns"]) - 1) for r in recs if len(r["send_ns"]) > 1]
    span_s = (max(r["done_ns"] for r in recs) - min(r["arrived_ns"] for r in recs)) / 1e9
    return {"ttft": float(np.median([r["ttft_ms"] for r in recs])),
            "itl": float(np.median([g for r in recs for g in r["itl_ms"]])), "tpot": float(np.median(tpot)),
            "tok_s": sum(r["output_tokens"] for r in recs) / span_s}  # fmt: skip


def _load_args(mode: str, value: float) -> list[str]:
    return ["--concurrency", str(int(value))] if mode == "concurrency" else ["--request-rate", str(value)]


def _stop(n: int | float) -> tuple[int | None, float | None]:
    """``n``: an int is a request count, a float a duration in seconds."""
    return (n, None) if isinstance(n, int) else (None, float(n))


def inferperf_cmd(url: str, mode: str, value: float, n: int | float, out: Path, tokens: tuple[int, int]) -> list[str]:
    """``inferperf load`` for ``n`` requests or seconds (no warm-up) at concurrency or constant-rate ``value``."""
    count, dur = _stop(n)
    return [sys.executable, "-m", "inferperf", "load", url, "--api", "openai-chat", *_load_args(mode, value),
            *(["--requests", str(count)] if count else ["--duration-s", str(dur)]), "--warmup-s", "0",
            "--max-tokens", str(tokens[1]), "--input-tokens", str(tokens[0]), "--ignore-eos", "-o", str(out)]  # fmt: skip


def inferperf_figures(out: Path) -> dict[str, Any]:
    """From an ``inferperf load`` Result: TTFT p50, per-gap ITL p50, per-request TPOT p50 (ms) and output tokens/s."""
    g = json.loads(out.read_text())["metrics"]["generation"]
    return {"ttft": g["ttft_ms"]["p50"], "itl": g["itl_ms"]["p50"], "tpot": g["tpot_ms"]["p50"],
            "tok_s": g["output_tokens_per_s"]}  # fmt: skip


def aiperf_cmd(url: str, mode: str, value: float, n: int | float, out: Path, tok: Path,
               tokens: tuple[int, int]) -> list[str]:  # fmt: skip
    """``aiperf profile`` (chat, streaming, server token counts) for ``n`` requests or seconds; ``out`` its
    artifact dir."""
    count, dur = _stop(n)
    load = _load_args(mode, value) + (["--arrival-pattern", "constant"] if mode == "rate" else [])
    load += ["--request-count", str(count)] if count else ["--benchmark-duration", str(dur)]
    return [str(AIPERF / "aiperf"), "profile", "--model", "mock-model", "--url", url, "--endpoint-type", "chat",
            "--streaming", *load, "--synthetic-input-tokens-mean", str(tokens[0]),
            "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", str(tokens[1]),
            "--output-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true", "--tokenizer", str(tok.resolve()),
            "--use-server-token-count", "--artifact-dir", str(out), "--ui-type", "none", "--random-seed", "0",
            "--no-server-metrics", "--no-gpu-telemetry"]  # fmt: skip


def aiperf_figures(out: Path) -> dict[str, Any]:
    """From AIPerf's ``profile_export_aiperf.json``: the same figures by definition (ms; tokens/s): its
    ``inter_chunk_latency`` is our per-gap ITL, its ``inter_token_latency`` our per-request TPOT."""
    d = json.loads((out / "profile_export_aiperf.json").read_text())
    return {"ttft": d["time_to_first_token"]["p50"], "itl": d["inter_chunk_latency"]["p50"],
            "tpot": d["inter_token_latency"]["p50"], "tok_s": d["output_token_throughput"]["avg"]}  # fmt: skip


def guidellm_cmd(url: str, mode: str, value: float, n: int | float, out: Path, tok: Path,
                 tokens: tuple[int, int]) -> list[str]:  # fmt: skip
    """``guidellm run`` (openai_http, synthetic text) for ``n`` requests or seconds; ``out`` its JSON report."""
    count, dur = _stop(n)
    prof = f"kind=concurrent,streams={int(value)}" if mode == "concurrency" else f"kind=constant,rate={value}"
    stop = f"kind=max_requests,count={count}" if count else f"kind=max_duration,seconds={dur}"
    return [str(GUIDELLM / "guidellm"), "run", "--backend", f"kind=openai_http,target={url},model=mock-model",
            "--profile", prof, "--constraint", stop, "--data",
            f"kind=synthetic_text,prompt_tokens={tokens[0]},output_tokens={tokens[1]}", "--tokenizer",
            f"kind=huggingface_auto,model={tok.resolve()}", "--output", f"kind=json,path={out}",
            "--disable-console"]  # fmt: skip


def guidellm_figures(out: Path) -> dict[str, Any]:
    """GuideLLM's figures, and ``ttft_np``: numpy's median of its own per-request TTFTs (its summary's
    median comes from its distribution code, which can differ from the interpolated one on few samples)."""
    b = json.loads(out.read_text())["benchmarks"][0]
    m = b["metrics"]
    return {"ttft": m["time_to_first_token_ms"]["successful"]["median"], "itl": None,
            "tpot": m["inter_token_latency_ms"]["successful"]["median"],
            "tok_s": m["output_tokens_per_second"]["total"]["mean"],
            "ttft_np": float(np.median([r["time_to_first_token_ms"] for r in b["requests"]["successful"]]))}  # fmt: skip


def peer_env(peer: str) -> dict[str, str]:
    """The subprocess environment: this checkout's src first; hub access off (GuideLLM; module docstring)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    if peer == "guidellm":
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if peer == "aiperf":
        env.pop("HF_HUB_OFFLINE", None)
    return env


def run_arm(peer: str, url: str, mode: str, value: float, n: int | float, out: Path, tok: Path,
            pin: list[str] | None = None, timeout_s: float = 600,
            tokens: tuple[int, int] = (INPUT_TOKENS, OUTPUT_TOKENS)) -> dict[str, Any]:  # fmt: skip
    """Run one client for ``n`` requests (an int) or seconds (a float) with ``tokens`` (input, output) per
    request and return its figures (module table). Raises RuntimeError: the client failed."""
    cmd = {"inferperf": lambda: inferperf_cmd(url, mode, value, n, out, tokens),
           "aiperf": lambda: aiperf_cmd(url, mode, value, n, out, tok, tokens),
           "guidellm": lambda: guidellm_cmd(url, mode, value, n, out, tok, tokens)}[peer]()  # fmt: skip
    p = subprocess.run([*(pin or []), *cmd], capture_output=True, text=True, timeout=timeout_s, env=peer_env(peer),
                       cwd=out.parent)  # fmt: skip
    if p.returncode != 0:
        raise RuntimeError(f"{peer} exited {p.returncode}: {(p.stdout + p.stderr)[-2000:]}")
    return {"inferperf": inferperf_figures, "aiperf": aiperf_figures, "guidellm": guidellm_figures}[peer](out)
