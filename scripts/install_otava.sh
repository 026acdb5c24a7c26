#!/usr/bin/env bash
# Install Apache Otava in its OWN virtual environment (issue 28 item 6): apache-otava pins numpy 2.2 and
# scipy < 1.17, which must not replace inferperf's. benchmarks/history_otava.py runs Otava through
# benchmarks/otava_cp.py in this venv (JSON in, JSON out), never importing it into inferperf's process.
#
# Idempotent: a second run only checks. Usage:
#   bash scripts/install_otava.sh            # venv at $INFERPERF_OTAVA_VENV or <repo>/.venv-otava
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${INFERPERF_OTAVA_VENV:-$PWD/.venv-otava}"
PY="${PYTHON:-python3}"
OTAVA_VERSION="0.8.0"

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import otava.analysis" 2>/dev/null; then
    # PIP_CONSTRAINT is emptied so the machine-wide constraints do not leak into this venv.
    PIP_CONSTRAINT="" "$VENV/bin/python" -m pip install --quiet "apache-otava==$OTAVA_VERSION"
fi
"$VENV/bin/python" -c "from otava.analysis import compute_change_points; print(len(compute_change_points([1.0]*20 + [2.0]*20)[0]))" | grep -qx 1
echo "Otava ready in $VENV (apache-otava $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("apache-otava"))'))"
