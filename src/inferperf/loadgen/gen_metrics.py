"""``metrics.generation`` of a token-stream step: TTFT, ITL, TPOT, e2e, tokens, rates and goodput.

Per request, all from the **scheduled** send time (open loop: corrected for coordinated omission; closed loop
it is the actual send) and on the client's clock, over the requests that completed in the measured span:

- TTFT = time of the first socket read that completed a *content* event (role-only and empty events do not
  count, :mod:`.generation`) - scheduled time;
- ITL: one sample per gap between consecutive content events; a chunk carrying k tokens is ONE gap (not split
  over k), so ITL describes the stream as received, and TPOT the per-token pace;
- TPOT = (e2e - TTFT) / (output tokens - 1), for requests with at least 2 output tokens;
- e2e = answer complete - scheduled time;
- output tokens: the tokenizer's count of the text with ``--tokenizer``, else the server's
  ``usage.completion_tokens`` when given, else whitespace words (approximate); input tokens: the server's
  ``usage.prompt_tokens`` when given, else the client's count of each request's prompt.
  Client and server counts that differ by more than 1 % in total give a note.

Per step: requests/s, output and input tokens/s (successes in the span over its wall time), goodput
(requests/s of successes meeting every SLO given, ``--slo-ttft-ms`` and ``--slo-tpot-ms``: DistServe's
definition, Zhong et al. 2024), percentiles with distribution-free 95 % intervals (p50 and p99, order
statistics), errors by kind and incomplete streams (closed before ``[DONE]``; plus requests due in the span
that never answered).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..stats import latency_summary, quantile_ci
from .driver import StepSamples
from .generation import INCOMPLETE
from .options import LoadConfig

ITL_CONVENTION = "one sample per gap between consecutive content chunks; a chunk with k tokens is one gap, not split"
MISMATCH_FRACTION = 0.01


def summary_ms(ns: np.ndarray) -> dict[str, Any] | None:
    """:func:`~inferperf.stats.latency_summary` (ms) plus ``p99_ci95`` (None ends where the sample cannot give
    one); None for no samples."""
    if ns.size == 0:
        return None
    out = latency_summary(ns)
    if ns.size > 1:
        lo, hi = quantile_ci(ns / 1e6, 99.0)
        out["p99_ci95"] = [None if math.isnan(v) else v for v in (lo, hi)]
    return out


def _tokens_out(rec: Any, tokenizer: bool) -> int:
    if tokenizer or rec.usage_out < 0:
        return int(rec.out_tokens)
    return int(rec.usage_out)


def request_figures(s: StepSamples, tokenizer: bool) -> dict[str, np.ndarray]:
    """Per successful request measured in the span: ``ttft_ns``, ``e2e_ns``, ``tpot_ns`` (NaN under 2 tokens),
    ``out``, ``usage_out``, ``client_out``, ``usage_in`` (-1 = not given) arrays; ``itl_ns`` all gaps."""
    m = s.measured() & (s.error == 0)
    idx = np.flatnonzero(m)
    streams = s.streams or []
    recs = [streams[i] for i in idx]
    sched = s.scheduled_ns[idx]
    first = np.asarray([r.first_ns for r in recs], np.int64)
    e2e = s.done_ns[idx] - sched
    out = np.asarray([_tokens_out(r, tokenizer) for r in recs], np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (s.done_ns[idx] - first) / np.maximum(out - 1, 1), np.nan)
    has_first = first >= 0
    gaps = [np.diff(np.asarray(r.chunk_ns, np.int64)) for r in recs if len(r.chunk_ns) > 1]
    return {"ttft_ns": (first - sched)[has_first], "e2e_ns": e2e, "tpot_ns": tpot[has_first & ~np.isnan(tpot)],
            "itl_ns": np.concatenate(gaps) if gaps else np.zeros(0, np.int64), "out": out,
            "usage_out": np.asarray([r.usage_out for r in recs], np.int64),
            "client_out": np.asarray([r.out_tokens for r in recs], np.int64),
            "usage_in": np.asarray([r.usage_in for r in recs], np.int64),
            "client_in": np.asarray([getattr(r, "in_tokens", -1) for r in recs], np.int64),
            "ok_ttft_ns": np.where(has_first, first - sched, -1), "ok_tpot_ns": tpot}  # fmt: skip


def goodput(f: dict[str, np.ndarray], cfg: LoadConfig, duration_s: float) -> dict[str, Any] | None:
    """Requests/s of successes meeting every SLO given (DistServe); None when no SLO is given. A request with
    no content event fails a TTFT SLO; one with a single token meets any TPOT SLO (its TPOT is undefined)."""
    if cfg.slo_ttft_ms is None and cfg.slo_tpot_ms is None:
        return None
    good = np.ones(f["e2e_ns"].size, bool)
    if cfg.slo_ttft_ms is not None:
        t = f["ok_ttft_ns"]
        good &= (t >= 0) & (t <= cfg.slo_ttft_ms * 1e6)
    if cfg.slo_tpot_ms is not None:
        p = f["ok_tpot_ns"]
        good &= np.isnan(p) | (p <= cfg.slo_tpot_ms * 1e6)
    n = int(good.sum())
    return {"slo_ttft_ms": cfg.slo_ttft_ms, "slo_tpot_ms": cfg.slo_tpot_ms, "requests": n,
            "requests_per_s": n / duration_s if duration_s > 0 else 0.0,
            "fraction": n / good.size if good.size else 0.0}  # fmt: skip


def _token_block(f: dict[str, np.ndarray], target: Any, tokenizer: bool) -> tuple[dict[str, Any], list[str]]:
    n = int(f["out"].size)
    pool = list(getattr(target, "prompt_tokens", []) or [])
    known = f["client_in"] >= 0
    client_in = float(f["client_in"].sum()) if n and known.all() else (float(np.mean(pool)) * n if pool else 0.0)
    usage_in = f["usage_in"]
    in_total = int(usage_in.sum()) if n and (usage_in >= 0).all() else round(client_in)
    notes = []
    out_src = "tokenizer" if tokenizer else ("usage" if n and (f["usage_out"] >= 0).all() else "client words")
    for what, a, b in (("output", f["usage_out"], f["client_out"]),):
        if n and (a >= 0).all() and abs(int(a.sum()) - int(b.sum())) > MISMATCH_FRACTION * max(1, int(a.sum())):
            notes.append(f"{what} tokens: the server's usage says {int(a.sum())}, the client counted {int(b.sum())}"
                         f" ({getattr(target, 'token_count', 'whitespace words')}): counts differ by more than 1 %")
    if n and (usage_in >= 0).all() and client_in and abs(in_total - client_in) > MISMATCH_FRACTION * max(1, in_total):
        notes.append(f"input tokens: the server's usage says {in_total}, the client's prompts hold {client_in:.0f}"
                     f" ({getattr(target, 'token_count', '')}; a chat template adds tokens)")
    block = {"input_total": in_total, "output_total": int(f["out"].sum()),
             "input_per_request_mean": in_total / n if n else 0.0,
             "output_per_request_mean": float(f["out"].mean()) if n else 0.0,
             "output_source": out_src, "input_source": "usage" if n and (usage_in >= 0).all() else "client prompts",
             "prompt_count": getattr(target, "token_count", "whitespace words (approximate)")}  # fmt: skip
    return block, notes


def generation_block(s: StepSamples, target: Any, cfg: LoadConfig) -> tuple[dict[str, Any], list[str]]:
    """``metrics.generation`` of step ``s`` (module docstring) and the notes it raises."""
    tokenizer = cfg.tokenizer is not None
    f = request_figures(s, tokenizer)
    dur = s.duration_s
    tokens, notes = _token_block(f, target, tokenizer)
    m = s.measured()
    by_kind: dict[str, int] = {}
    for e in s.error[m & (s.error > 0)]:
        by_kind[s.error_kinds[int(e)]] = by_kind.get(s.error_kinds[int(e)], 0) + 1
    n = int(f["e2e_ns"].size)
    if cfg.stream and n and f["ttft_ns"].size < n:
        notes.append(f"{n - f['ttft_ns'].size} of {n} answers carried no content event (no TTFT)")
    block = {
        "api": cfg.api, "stream": cfg.stream, "itl_convention": ITL_CONVENTION,
        "requests": int(m.sum()), "succeeded": n,
        "ttft_ms": summary_ms(f["ttft_ns"]) if cfg.stream else None,
        "itl_ms": summary_ms(f["itl_ns"]) if cfg.stream else None,
        "tpot_ms": summary_ms(f["tpot_ns"]) if cfg.stream else None,
        "e2e_ms": summary_ms(f["e2e_ns"]), "tokens": tokens,
        "requests_per_s": n / dur if dur > 0 else 0.0,
        "output_tokens_per_s": tokens["output_total"] / dur if dur > 0 else 0.0,
        "input_tokens_per_s": tokens["input_total"] / dur if dur > 0 else 0.0,
        "goodput": goodput(f, cfg, dur), "errors_by_kind": by_kind,
        "incomplete_streams": by_kind.get(INCOMPLETE, 0), "unanswered": int(s.incomplete_mask().sum()),
    }  # fmt: skip
    return block, notes


__all__ = ["ITL_CONVENTION", "generation_block", "goodput", "request_figures", "summary_ms"]
