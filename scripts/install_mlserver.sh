#!/usr/bin/env bash
# Install the serving benchmark's peers and tools outside inferperf's environment (issue 12):
#   - MLServer (its pins clash with ours) with ONNX Runtime, in its own venv, for benchmarks/serve_peers/mlserver/;
#   - py-spy in the same venv (a standalone profiler binary) for profiling a server under load;
#   - Debian's wrk, the one neutral HTTP load client of benchmarks/serve.py.
# Idempotent: a second run only checks. Venv at $INFERPERF_MLSERVER_VENV or <repo>/.venv-mlserver.
# Usage: bash scripts/install_mlserver.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${INFERPERF_MLSERVER_VENV:-$PWD/.venv-mlserver}"
PY="${PYTHON:-python3}"

if ! command -v wrk >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wrk >/dev/null 2>&1 \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wrk; }
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if [ ! -x "$VENV/bin/mlserver" ] || [ ! -x "$VENV/bin/py-spy" ] || ! "$VENV/bin/python" -c "import onnxruntime" 2>/dev/null; then
    PIP_CONSTRAINT="" "$VENV/bin/python" -m pip install --quiet mlserver onnxruntime numpy py-spy
fi
"$VENV/bin/mlserver" --help >/dev/null
echo "MLServer $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mlserver"))') ready in $VENV; wrk: $(command -v wrk); py-spy: $VENV/bin/py-spy"
