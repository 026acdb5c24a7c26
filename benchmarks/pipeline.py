"""The OCR pipeline (examples/ocr) run by ``inferperf pipeline`` against a hand-written sequential loop of
the same stage functions and ONNX Runtime sessions, and the worker count it recommends, in interleaved rounds.

Run: ``python benchmarks/pipeline.py [--rounds 3] [--seconds 6]``

Arms, each round in a shuffled order (seeded), each given ``--seconds`` of measurement:

* RAW: one thread calls decode -> det -> boxes -> cls -> orient -> rec -> ctc on one item after another
  (the sessions with the pipeline's own settings: one intra-op thread each, and with ``--raw-threads``
  the effective CPUs); items/s = items / wall time. What a hand-written timing loop would report.
* PIPELINE: ``run_pipeline`` on examples/ocr/pipeline.yaml as committed (one worker per stage, queues 4,
  closed loop); items/s = its throughput (completions in the window / window).
* RECOMMENDED: the same with the worker counts the first PIPELINE run recommended (``run.pipeline.workers``).

Per round the ratios PIPELINE/RAW and RECOMMENDED/PIPELINE; printed per round and as the median with its
min..max, plus the bottleneck each pipeline run named and the recommendation's own estimate. The machine
is noisy: only ratios from the same round are compared.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "examples" / "ocr"))

from inferperf.pipeline.engine import StopRule  # noqa: E402
from inferperf.pipeline.run import PipelineOptions, run_pipeline, source_items  # noqa: E402
from inferperf.pipeline.spec import load  # noqa: E402

YAML = ROOT / "examples" / "ocr" / "pipeline.yaml"


def raw(items: list, seconds: float, threads: int) -> float:
    """Items/s of a plain sequential loop over the stage functions and sessions."""
    import copy

    import onnxruntime as ort
    import ocr_stages as o

    from inferperf.zoo import resolve

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = {k: ort.InferenceSession(str(resolve(f"zoo:ppocr-{k}")), so, providers=["CPUExecutionProvider"])
            for k in ("det", "cls", "rec")}

    def one(item: dict) -> dict:
        """One item through the seven stages."""
        item = o.decode(item)
        item["det_output"] = sess["det"].run(None, {"x": item["det_input"]})
        item = o.boxes(item)
        item["cls_output"] = sess["cls"].run(None, {"x": item["cls_input"]}) if item["crops"] else []
        item = o.orient(item)
        item["rec_output"] = sess["rec"].run(None, {"x": item["rec_input"]}) if item["crops"] else []
        return o.ctc(item)

    for it in items[:4]:  # warm-up
        one(copy.deepcopy(it))
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        one(copy.deepcopy(items[n % len(items)]))
        n += 1
    return n / (time.perf_counter() - t0)


def pipe(seconds: float, workers: dict[str, int] | None = None) -> tuple[float, dict]:
    """One ``run_pipeline`` (no standalone runs): items/s and its ``run.pipeline`` block."""
    opts = PipelineOptions(stop=StopRule(min_items=20, min_duration_s=seconds, max_duration_s=4 * seconds),
                           workers=workers or {}, standalone=False)
    [r] = run_pipeline(load(YAML), opts, source=str(YAML))
    return r.metrics.throughput.queries_per_s, r.run["pipeline"]


def main() -> None:
    """Interleaved rounds of the three arms; prints per-round figures and median ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--raw-threads", type=int, default=1, help="intra-op threads of RAW's sessions")
    a = ap.parse_args()
    items = source_items(load(YAML), 64)
    _, first = pipe(a.seconds)
    rec = {n: w for n, w in first["workers"]["workers"].items() if w != 1}
    print(f"recommended workers (first run): {first['workers']['rerun'] or 'as configured'};"
          f" its estimate {first['workers']['items_per_s']:.3g} items/s ({first['workers']['limited_by']})")
    rng = random.Random(0)
    r_pipe, r_rec = [], []
    for k in range(a.rounds):
        arms = ["raw", "pipeline", "recommended"]
        rng.shuffle(arms)
        got: dict[str, float] = {}
        for arm in arms:
            if arm == "raw":
                got[arm] = raw(items, a.seconds, a.raw_threads)
            else:
                got[arm], p = pipe(a.seconds, rec if arm == "recommended" else None)
                got[arm + "_bottleneck"] = p["bottleneck"]  # type: ignore[assignment]
        r_pipe.append(got["pipeline"] / got["raw"])
        r_rec.append(got["recommended"] / got["pipeline"])
        print(f"round {k + 1} ({', '.join(arms)}): raw {got['raw']:.2f}, pipeline {got['pipeline']:.2f}"
              f" (bottleneck {got['pipeline_bottleneck']}), recommended {got['recommended']:.2f}"
              f" (bottleneck {got['recommended_bottleneck']}) items/s;"
              f" pipeline/raw {r_pipe[-1]:.3f}, recommended/pipeline {r_rec[-1]:.3f}")
    for name, xs in (("pipeline/raw", r_pipe), ("recommended/pipeline", r_rec)):
        print(f"{name}: median {statistics.median(xs):.3f} (min {min(xs):.3f}, max {max(xs):.3f}) over {len(xs)} rounds")


if __name__ == "__main__":
    main()
