#!/usr/bin/env bash
# Regenerates this example's Results: real `inferperf bench` runs of the null backend (scripted latency, no model),
# 3 runs each in fresh workers. results/: 10 runs at 1.15 ms per query, then 6 at 1.0 ms (a planted speed-up at
# run 11); slowdown/: one later run at 1.3 ms (a planted 30 % slowdown against the newest segment).
set -euo pipefail
cd "$(dirname "$0")"
rm -rf results slowdown
run() { inferperf bench --backend null --null-latency-ms "$1" --repeat 3 --iterations 100 --duration-s 0.5 \
          --max-duration-s 1 --no-sampler -o "$2" >/dev/null; }
for i in $(seq -w 1 16); do
  if [ "$i" -le 10 ]; then run 1.15 "results/run$i.json"; else run 1.0 "results/run$i.json"; fi
done
run 1.3 slowdown/run17.json
