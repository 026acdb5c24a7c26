"""Serving instances: a session each vs one shared session (concurrent runs), in interleaved rounds.

Both arms are a :class:`~inferperf.serve.model.ServedModel` with
``instance_count`` instances and dynamic batching off (each request its own
batch), loaded once, driven by ``clients`` closed-loop asyncio clients for
``seconds`` per round. Every round runs both arms, in an order shuffled with a
fixed seed, so machine drift spreads over both. Throughput CIs are Student's t
over rounds; the ratio is shared / a session each, paired within each round (median, its
CI and range).

    python benchmarks/serve_instances.py [--rounds 5] [--seconds 3] [--instances 2] [--clients 4]
        [--models zoo:squeezenet,zoo:tiny-cnn]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import random
import sys
import time

import numpy as np

from inferperf.config import BenchConfig, WarmupOptions
from inferperf.serve.model import ServedModel
from inferperf.serve.options import ServeOptions
from inferperf.stats import intervals_separate, mean_ci, median_ci
from inferperf.system import collect_system

ARMS = {"a session each": False, "one shared session": True}


async def drive(served: ServedModel, feeds: list[dict[str, np.ndarray]], clients: int, seconds: float) -> float:
    """Closed-loop ``clients`` for ``seconds`` s against ``served``; return completed requests per second."""
    done = 0
    stop = time.perf_counter() + seconds

    async def client(k: int) -> None:
        nonlocal done
        i = k
        while time.perf_counter() < stop:
            feed = feeds[i % len(feeds)]
            await served.infer(feed, next(iter(feed.values())).shape[0] if served.max_batch_size else 1)
            done += 1
            i += clients

    t0 = time.perf_counter()
    await asyncio.gather(*[client(k) for k in range(clients)])
    return done / (time.perf_counter() - t0)


def feeds_for(served: ServedModel, n: int = 16, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """``n`` distinct seeded 1-row requests matching the served model's metadata (free dims -> 1)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        feed = {}
        for t in served.metadata.inputs:
            shape = [1 if d < 0 else d for d in t.shape]
            feed[t.name] = rng.standard_normal(shape).astype(np.float32)
        out.append(feed)
    return out


def measure(model: str, rounds: int, seconds: float, instances: int, clients: int, rng: random.Random) -> None:
    """Load both arms of ``model``, run the interleaved rounds and print one Markdown table."""
    cfg = BenchConfig(warmup=WarmupOptions(iterations=5))
    options = ServeOptions(instance_count=instances)
    served = {arm: ServedModel.load(model, cfg, options, shared_session=shared) for arm, shared in ARMS.items()}
    feeds = feeds_for(next(iter(served.values())))
    rates: dict[str, list[float]] = {arm: [] for arm in ARMS}

    async def run_rounds() -> None:
        for _ in range(rounds):
            order = list(ARMS)
            rng.shuffle(order)
            for arm in order:
                rates[arm].append(await drive(served[arm], feeds, clients, seconds))
        for s in served.values():
            await s.close()

    asyncio.run(run_rounds())
    threads = next(iter(served.values())).effective.get("intra_op_num_threads")
    print(f"\n### {model}: {instances} instances x intra-op {threads}, {clients} clients, batching off\n")
    print("| arm | requests/s (mean, 95% CI over rounds) | per round |")
    print("|---|---|---|")
    cis: dict[str, tuple[float, float] | None] = {}
    for arm, xs in rates.items():
        lo, hi = mean_ci(xs) if len(xs) > 1 else (float("nan"), float("nan"))
        cis[arm] = (lo, hi) if len(xs) > 1 else None  # one round: no interval, no claim
        print(f"| {arm} | {np.mean(xs):.1f} [{lo:.1f}, {hi:.1f}] | {', '.join(f'{x:.1f}' for x in xs)} |")
    ratio = [s / e for s, e in zip(rates["one shared session"], rates["a session each"], strict=True)]
    sep = intervals_separate(cis["one shared session"], cis["a session each"])
    rlo, rhi = median_ci(ratio) if len(ratio) > 2 else (float("nan"), float("nan"))
    print(f"\nshared / each, paired per round: median {np.median(ratio):.3f} (95% CI [{rlo:.3f}, {rhi:.3f}],"
          f" range {min(ratio):.3f}-{max(ratio):.3f}); throughput CIs {'separate' if sep else 'overlap'}")


def main() -> None:
    """Parse flags, print the machine line, and measure each model."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--models", default="zoo:squeezenet,zoo:tiny-cnn")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    s = collect_system()
    print(f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {s.cpu_model}; effective CPUs {s.effective_cpus};"
          f" python {sys.version.split()[0]}; {' '.join(sys.argv)}")
    rng = random.Random(a.seed)
    for model in a.models.split(","):
        measure(model, a.rounds, a.seconds, a.instances, a.clients, rng)


if __name__ == "__main__":
    main()
