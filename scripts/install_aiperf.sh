#!/usr/bin/env bash
# Install NVIDIA AIPerf (the successor of GenAI-Perf) in its OWN virtual environment (issue 30 item 5): it pins
# its own aiohttp, pydantic-settings, transformers and ~50 more, so it is never installed into, or imported by,
# the test process. benchmarks/generate_agreement.py, benchmarks/generate_ceiling.py and
# tests/e2e/test_generate_peers.py run `aiperf` from this venv as a subprocess, offline (HF_HUB_OFFLINE=1,
# --tokenizer naming the local directory of scripts/make_tokenizer.py).
#
# Idempotent: a second run only checks. Usage:
#   bash scripts/install_aiperf.sh          # venv at $INFERPERF_AIPERF_VENV or <repo>/.venv-aiperf
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${INFERPERF_AIPERF_VENV:-$PWD/.venv-aiperf}"
PY="${PYTHON:-python3}"
AIPERF_VERSION="0.13.0"

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import aiperf" 2>/dev/null; then
    # PIP_CONSTRAINT is emptied so the machine-wide constraints do not leak into this venv.
    PIP_CONSTRAINT="" "$VENV/bin/python" -m pip install --quiet "aiperf==$AIPERF_VERSION"
fi
if ! out="$(HF_HUB_OFFLINE=1 "$VENV/bin/aiperf" profile --help 2>&1)" || ! grep -q -- '--tokenizer' <<<"$out"; then
    echo "aiperf profile --help failed:" >&2
    echo "$out" | tail -20 >&2
    exit 1
fi
echo "AIPerf ready in $VENV (aiperf $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("aiperf"))'))"
