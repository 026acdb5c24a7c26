"""The console line of a token-stream load step (``metrics.generation``, docs/generate.md)."""

from __future__ import annotations

from typing import Any


def _p(block: dict[str, Any] | None, name: str) -> str:
    if not block:
        return "-"
    ci = block.get(f"{name}_ci95") or []
    interval = f" [{ci[0]:.1f}, {ci[1]:.1f}]" if len(ci) == 2 and None not in ci else ""
    return f"{block[name]:.1f}{interval}"


def generation_line(g: dict[str, Any]) -> str:
    """``  tokens: TTFT p50 ... ms, ITL p50 ..., TPOT p50 ..., output ... tok/s, ...`` (95 % intervals in [])."""
    t = g["tokens"]
    parts = [f"TTFT p50 {_p(g['ttft_ms'], 'p50')} p99 {_p(g['ttft_ms'], 'p99')} ms",
             f"ITL p50 {_p(g['itl_ms'], 'p50')} p99 {_p(g['itl_ms'], 'p99')} ms",
             f"TPOT p50 {_p(g['tpot_ms'], 'p50')} ms", f"e2e p50 {_p(g['e2e_ms'], 'p50')} ms",
             f"output {g['output_tokens_per_s']:.1f} tok/s ({t['output_total']} tokens, {t['output_source']})",
             f"input {g['input_tokens_per_s']:.1f} tok/s", f"{g['requests_per_s']:.2f} req/s"]  # fmt: skip
    gp = g.get("goodput")
    if gp:
        parts.append(f"goodput {gp['requests_per_s']:.2f} req/s ({100 * gp['fraction']:.0f} % met the SLOs)")
    if g["incomplete_streams"] or g["unanswered"]:
        parts.append(f"incomplete streams {g['incomplete_streams']}, unanswered {g['unanswered']}")
    return "  tokens: " + ", ".join(parts)
