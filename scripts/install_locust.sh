#!/usr/bin/env bash
# Install Locust in its OWN virtual environment (issue 13, item 9): Locust pins its own Flask, gevent and
# geventhttpclient, and gevent monkey-patches the standard library when locust is imported, so it must never
# be installed into, or imported by, the test process. The tests run `locust` from this venv as a subprocess.
#
# Idempotent: a second run only checks. Usage:
#   bash scripts/install_locust.sh                    # venv at $INFERPERF_LOCUST_VENV or <repo>/.venv-locust
#   <venv>/bin/locust -f src/inferperf/loadgen/locust.py --headless -u 4 -r 4 -t 10s \
#       --host http://127.0.0.1:8000 --model-name NAME --csv out/run
#
# What the venv holds (decision, see BENCHMARKS.md "Load generator"): locust==LOCUST_VERSION, numpy (the
# payload pool), pydantic (what `import inferperf` itself needs), and THIS checkout's src/ on sys.path through
# a .pth file (no copy, no build, no other inferperf dependency: no onnxruntime, scipy or plotly), so the
# locustfile imports inferperf's own payload builder from the checkout it was run from.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${INFERPERF_LOCUST_VENV:-$PWD/.venv-locust}"
PY="${PYTHON:-python3}"
LOCUST_VERSION="2.47.0"

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import locust, numpy, pydantic" 2>/dev/null; then
    # PIP_CONSTRAINT is emptied so the machine-wide constraints do not leak into this venv.
    PIP_CONSTRAINT="" "$VENV/bin/python" -m pip install --quiet "locust==$LOCUST_VERSION" numpy pydantic
fi
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$PWD/src" >"$SITE/inferperf-src.pth"

# The locustfile must load and find its User class (a --list of user classes imports it without running).
out="$("$VENV/bin/locust" -f src/inferperf/loadgen/locust.py --list 2>&1 || true)"
if ! grep -q 'KServeUser' <<<"$out"; then
    echo "locust -f src/inferperf/loadgen/locust.py --list failed:" >&2
    echo "$out" | tail -20 >&2
    exit 1
fi
echo "Locust ready in $VENV (locust $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("locust"))'), src: $PWD/src)"
