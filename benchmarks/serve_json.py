"""JSON request decoding in `inferperf serve`: simdjson fast path vs orjson vs the stdlib, interleaved rounds.

One KServe v2 JSON request per shape (FP32, random values rounded as a client's float formatting would leave
them), decoded the way the server does (:func:`inferperf.serve.protocol.decode_request`, validation included):

* ``simdjson``: bodies over 64 KiB through :mod:`inferperf.serve.json_tensors` (the server's default);
* ``orjson``: the same function with the fast path turned off (``json_tensors.MIN_BYTES`` raised);
* ``stdlib``: ``json.loads`` + ``np.asarray(data, float32)``, what a minimal per-request app does.

Each round times every arm once over ``--reps`` decodes, in a shuffled order; ratios are per round, with the
median and the range over rounds.

    python benchmarks/serve_json.py [--rounds 7] [--reps 20]
"""

from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np
import orjson

from inferperf.serve import json_tensors
from inferperf.serve.protocol import decode_request
from inferperf.serve.tensor_types import TensorSpec

SHAPES = {"1x3x224x224": (1, 3, 224, 224), "1x3x64x64": (1, 3, 64, 64), "1x128": (1, 128)}


def body_for(shape: tuple[int, ...]) -> bytes:
    """One KServe v2 JSON request (flat FP32 ``data``, seed 0, 6 decimals) for input ``x`` of ``shape``."""
    x = np.random.default_rng(0).standard_normal(int(np.prod(shape))).astype(np.float32)
    return orjson.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(shape),
                                     "data": np.round(x.astype(np.float64), 6).tolist()}]})


def main() -> None:
    """Time the three decoders per shape in shuffled rounds and print ms per decode and the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    rng = random.Random(0)
    out_spec = [TensorSpec("y", "FP32", (-1, 1000))]
    for label, shape in SHAPES.items():
        body = body_for(shape)
        spec = [TensorSpec("x", "FP32", tuple(-1 if i == 0 else d for i, d in enumerate(shape)))]
        default_min = json_tensors.MIN_BYTES

        def server(min_bytes: int) -> None:
            json_tensors.MIN_BYTES = min_bytes
            try:
                decode_request(body, None, spec, out_spec, 8)
            finally:
                json_tensors.MIN_BYTES = default_min

        def stdlib() -> None:
            d = json.loads(body)
            np.asarray(d["inputs"][0]["data"], dtype=np.float32).reshape(d["inputs"][0]["shape"])

        arms = {"simdjson": lambda: server(default_min), "orjson": lambda: server(1 << 40), "stdlib": stdlib}
        ref = decode_request(body, None, spec, out_spec, 8).inputs["x"]
        json_tensors.MIN_BYTES = 1 << 40
        assert np.array_equal(ref, decode_request(body, None, spec, out_spec, 8).inputs["x"])  # same arrays
        json_tensors.MIN_BYTES = default_min
        times: dict[str, list[float]] = {a: [] for a in arms}
        for _ in range(args.rounds):
            order = list(arms)
            rng.shuffle(order)
            for a in order:
                arms[a]()  # warm
                t0 = time.perf_counter_ns()
                for _ in range(args.reps):
                    arms[a]()
                times[a].append((time.perf_counter_ns() - t0) / args.reps / 1e6)
        print(f"{label} ({len(body):,} bytes of JSON): ms per decode, median [min, max] over {args.rounds} rounds")
        for a, ts in times.items():
            print(f"  {a:<9} {np.median(ts):8.3f} [{min(ts):.3f}, {max(ts):.3f}]")
        for num, den in (("stdlib", "simdjson"), ("orjson", "simdjson"), ("stdlib", "orjson")):
            r = [x / y for x, y in zip(times[num], times[den])]
            print(f"  {num}/{den}: {np.median(r):.2f} [{min(r):.2f}, {max(r):.2f}]")


if __name__ == "__main__":
    main()
