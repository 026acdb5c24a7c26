"""One honest verdict per variant: from its measured speed against fp32, its accuracy, and the CPU.

Speed: the speed-up is mean throughput(variant) / mean throughput(fp32) over the interleaved rounds
(:func:`inferperf.measure.speedup.compare_throughput`). A difference counts only when the 95 %
intervals over runs separate; with fewer than 3 runs an undecided comparison is UNDECIDED ("too
few runs to decide: slower in 2 of 2 rounds; use --repeat >= 3"), with more it is "within noise".
A slower variant is named slower ("0.66x slower") with the likely reason read from the CPU's ISA
flags and the variant kind. Accuracy: a failed gate or non-finite outputs reject the variant
whatever its speed; on synthetic data the default gates judge output closeness only (cosine, max abs
error: :data:`~inferperf.optimize.spec.SYNTHETIC_GATES`) and the figures are flagged as not predictive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..measure.speedup import MIN_RUNS, describe, rounds_text, speedup_of
from ..results.model import Result
from .convert import has_vnni


#: The reason every accurate variant carries when its accuracy comes from synthetic inputs.
SYNTHETIC_REASON = ("accuracy from synthetic data: judged by output closeness (cosine, max abs error), not"
                    " predictive of real inputs; top-1 agreement on synthetic inputs is not an accuracy (pass --eval-data)")


def speedup(ref: Result, var: Result) -> dict[str, Any]:
    """Speed-up of ``var`` over ``ref``: ratio of mean throughputs, whether the intervals over runs separate,
    and how the rounds went (run *i* of each is from interleaved round *i*).

    Returns:
        :func:`~inferperf.measure.speedup.compare_throughput`'s dict: ``ratio`` > 1 = faster,
        ``significant``, ``direction``, ``runs``, ``slower_rounds``, ``faster_rounds``, ``too_few_runs``,
        the raw intervals and ``basis`` (which intervals decided).
    """
    return speedup_of(ref, var)


def format_speedup(s: dict[str, Any]) -> str:
    """``1.42x faster``, ``0.66x slower``, ``0.98x (within noise; slower in 2 of 3 rounds)``,
    ``0.16x (too few runs to decide: slower in 2 of 2 rounds; use --repeat >= 3)``; ``-`` without a ratio."""
    return describe(s)


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
        (``FAILED`` | ``REJECT`` | ``SLOWER`` | ``FASTER`` | ``NO GAIN`` | ``UNDECIDED`` | ``NOT MEASURED`` |
        ``REFERENCE``, reasons). FAILED: it could not be built, loaded or run; REJECT: accuracy gate or
        non-finite outputs; the rest are speed verdicts of an accurate variant (UNDECIDED: the intervals
        overlap and the runs are too few for them to decide).
    """
    if variant == "fp32":
        return "REFERENCE", []
    if error:
        return "FAILED", [error]
    reasons: list[str] = []
    if accuracy is not None and not accuracy.get("passed", True):
        reasons = list(accuracy.get("reasons", []))
        if speed is not None and speed["significant"] and speed["ratio"] < 1:
            reasons.append(f"also slower ({speed['ratio']:.2f}x fp32's throughput, intervals separate)")
        return "REJECT", reasons
    if accuracy is not None and not accuracy.get("predictive", True):
        reasons.append(SYNTHETIC_REASON)
    if speed is None:
        return "NOT MEASURED", reasons + ["speed not measured (--no-measure); accuracy gates passed"]
    if speed["significant"] and speed["ratio"] < 1:
        return "SLOWER", why_slower(variant, isa_flags, settings) + reasons
    if speed["significant"]:
        return "FASTER", reasons
    if speed.get("too_few_runs"):
        n = speed.get("runs", 0)
        said = f"; {rounds_text(speed)}" if n >= 2 else ""
        return "UNDECIDED", [f"too few runs to decide ({n} per variant{said}): rerun with"
                             f" --repeat >= {MIN_RUNS}"] + reasons
    return "NO GAIN", [f"speed within noise ({speed['basis']}; {rounds_text(speed)})"] + reasons
