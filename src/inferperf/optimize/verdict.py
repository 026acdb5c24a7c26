"""One honest verdict per variant: from its measured speed against fp32, its accuracy, and the CPU.

Speed: the speed-up is throughput(variant) / throughput(fp32). A difference counts only when
the 95 % intervals are separated (throughput over runs with ``repeat`` >= 2, else the
distribution-free interval of the median latency); otherwise it is "within noise". A slower
variant is named slower ("0.66x (slower)") with the likely reason read from the CPU's ISA flags
and the variant kind. Accuracy: a failed gate or non-finite outputs reject the variant whatever
its speed; figures from synthetic data are flagged as not predictive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..results.model import Result
from ..stats import intervals_separate
from .convert import has_vnni


def speedup(ref: Result, var: Result) -> dict[str, Any]:
    """Speed-up of ``var`` over ``ref``: ratio of throughputs and whether the intervals separate.

    Returns:
        ``{"ratio", "significant", "basis"}``: ratio > 1 = faster; ``basis`` says which intervals decided.
    """
    rt, vt = ref.metrics.throughput, var.metrics.throughput
    ratio = vt.queries_per_s / rt.queries_per_s if rt.queries_per_s > 0 else float("nan")
    if rt.queries_per_s_ci95 and vt.queries_per_s_ci95:
        significant = intervals_separate(rt.queries_per_s_ci95, vt.queries_per_s_ci95)
        return {"ratio": ratio, "significant": significant, "basis": "throughput 95% CI over runs"}
    # one run each: no run-level interval exists; the within-run median CI is no basis for a throughput
    # claim (it can have zero width on timer ties), so no difference is called
    return {"ratio": ratio, "significant": False, "basis": "one run per variant: no CI (use --repeat >= 2)"}


def format_speedup(s: dict[str, Any]) -> str:
    """``1.42x``, ``0.66x (slower)``, ``0.98x (within noise)``."""
    r = s["ratio"]
    if r != r:
        return "-"
    if not s["significant"]:
        return f"{r:.2f}x (within noise)"
    return f"{r:.2f}x (slower)" if r < 1 else f"{r:.2f}x"


def why_slower(variant: str, isa_flags: Sequence[str], settings: dict[str, Any] | None = None) -> list[str]:
    """Likely reasons a variant runs slower than fp32 on this CPU (most specific first)."""
    flags = set(isa_flags)
    settings = settings or {}
    reasons = []
    if variant.startswith("fp16"):
        if "avx512_fp16" not in flags and "asimdhp" not in flags:
            reasons.append("fp16 emulated on this CPU (no avx512_fp16): ONNX Runtime's CPU provider converts to"
                           " fp32 around most ops (Cast nodes), so fp16 only adds work")
        else:
            reasons.append("ONNX Runtime's CPU provider has few fp16 kernels: most ops run in fp32 behind Casts")
    elif variant.startswith("int8"):
        if not has_vnni(isa_flags):
            reasons.append("no VNNI on this CPU (avx512_vnni/avx_vnni): int8 dot products take 3 instructions"
                           " (vpmaddubsw, vpmaddwd, vpaddd) instead of one")
        if variant.startswith("int8-dynamic"):
            reasons.append("dynamic quantization computes activation scales on every call (DynamicQuantizeLinear)"
                           " and ConvInteger has no fast CPU kernel: conv models usually slow down")
        else:
            reasons.append("Quantize/Dequantize pairs around ops left in fp32 add conversions; small tensors"
                           " gain little from int8")
    elif variant.startswith("ort-"):
        reasons.append("offline-optimized graphs run as fast as online optimization at best; the gain is load time")
    return reasons


def verdict(
    variant: str,
    speed: dict[str, Any] | None,
    accuracy: dict[str, Any] | None,
    isa_flags: Sequence[str],
    error: str | None = None,
    settings: dict[str, Any] | None = None,
) -> tuple[str, list[str]]:
    """The verdict word and its reasons.

    Returns:
        (``FAILED`` | ``REJECT`` | ``SLOWER`` | ``FASTER`` | ``NO GAIN`` | ``NOT MEASURED`` | ``REFERENCE``, reasons).
        FAILED: it could not be built, loaded or run; REJECT: accuracy gate or non-finite outputs;
        the rest are speed verdicts of an accurate variant.
    """
    if variant == "fp32":
        return "REFERENCE", []
    if error:
        return "FAILED", [error]
    reasons: list[str] = []
    if accuracy is not None and not accuracy.get("passed", True):
        reasons = list(accuracy.get("reasons", []))
        if speed is not None and speed["significant"] and speed["ratio"] < 1:
            reasons.append(f"also slower ({format_speedup(speed)})")
        return "REJECT", reasons
    if accuracy is not None and not accuracy.get("predictive", True):
        reasons.append("accuracy from synthetic data: not predictive of real inputs (pass --eval-data)")
    if speed is None:
        return "NOT MEASURED", reasons + ["speed not measured (--no-measure); accuracy gates passed"]
    if speed["significant"] and speed["ratio"] < 1:
        return "SLOWER", why_slower(variant, isa_flags, settings) + reasons
    if speed["significant"]:
        return "FASTER", reasons
    return "NO GAIN", [f"speed within noise ({speed['basis']})"] + reasons
