"""Variant tables of ``inferperf optimize`` for BENCHMARKS.md.

PP-OCRv4 det at 1x3x640x640 with generated text images (seeded, Pillow) for calibration and
evaluation, ImageNet mean/std preprocessing; zoo:resnet50 for speed only (constant weights: its
accuracy figures mean nothing). Every variant runs in its own worker process, in interleaved
shuffled rounds, exactly as ``inferperf optimize`` does; the equivalent command is printed.

    python benchmarks/optimize.py [--rounds 3] [--seconds 3] [--size 640] [--models zoo:ppocr-det,zoo:resnet50]
        [--variants fp16,int8-dynamic,int8-static] [--out /tmp/inferperf-optimize-bench]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from rich.console import Console

from inferperf import BenchConfig
from inferperf.cli.optimize import print_report
from inferperf.optimize.data import make_text_images
from inferperf.optimize.run import optimize
from inferperf.optimize.spec import ImagePrep, OptimizeOptions
from inferperf.system import collect_system


def main() -> int:
    """Build the inputs, run ``optimize`` per model and print its table; returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--size", type=int, default=640, help="PP-OCR det input H = W (multiple of 32)")
    ap.add_argument("--models", default="zoo:ppocr-det,zoo:resnet50")
    ap.add_argument("--variants", default="fp16,int8-dynamic,int8-static")
    ap.add_argument("--images", type=int, default=8, help="generated calibration and eval images each")
    ap.add_argument("--out", type=Path, default=Path("/tmp/inferperf-optimize-bench"))
    args = ap.parse_args()
    s = collect_system()
    print(f"# {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC  {s.cpu_model}  effective CPUs {s.effective_cpus}"
          f"  ISA {','.join(s.isa_flags)}")
    calib, evald = args.out / "images" / "calib", args.out / "images" / "eval"
    make_text_images(calib, args.images, size=(args.size, args.size), seed=1)
    make_text_images(evald, args.images, size=(args.size, args.size), seed=2)
    bench = BenchConfig.model_validate({"repeat": args.rounds, "stop": {"min_iterations": 10,
                                        "min_duration_s": args.seconds, "max_duration_s": args.seconds * 4}})
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        det = model == "zoo:ppocr-det"
        b = bench
        if det:
            b = bench.model_copy(update={"workload": bench.workload.model_copy(
                update={"shapes": {"x": [1, 3, args.size, args.size]}})})
        opts = OptimizeOptions(
            variants=args.variants.split(","), bench=b,
            calibration_data=calib if det else None, eval_data=evald if det else None,
            calibration_samples=args.images, eval_samples=args.images,
            image=ImagePrep(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        )
        cmd = (f"inferperf optimize {model} --variants {args.variants} --repeat {args.rounds}"
               f" --duration-s {args.seconds} -o {args.out / model.replace(':', '_')}")
        if det:
            cmd += (f" --shape x:1x3x{args.size}x{args.size} --calibration-data {calib} --eval-data {evald}"
                    " --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225")
        print(f"\n$ {cmd}")
        report = optimize(model, opts, output=args.out / model.replace(":", "_"), command=cmd.split(),
                          progress=lambda m: print(f"  {m}", file=sys.stderr))
        print_report(report, Console(width=200))
    return 0


if __name__ == "__main__":
    sys.exit(main())
