#!/usr/bin/env bash
# Install Triton's HTTP clients (the tritonclient Python package and the perf_analyzer binary) in their
# OWN virtual environment: tritonclient 2.40.0 pins geventhttpclient<=2.0.2 and an old protobuf, which
# clash with inferperf's dependencies.
#
# Idempotent: a second run only checks. Usage:
#   bash scripts/install_triton_clients.sh            # venv at $INFERPERF_TRITON_VENV or <repo>/.venv-triton
#   source <venv>/bin/triton-env                      # puts perf_analyzer on PATH and libcudart on LD_LIBRARY_PATH
#
# What it does (issue 12): apt-get installs Debian's libb64-0d (perf_analyzer links libb64.so.0d), creates
# the venv, pip installs 'tritonclient[http]==2.40.0' (the wheel's data bin/ folder ships perf_analyzer) and
# nvidia-cuda-runtime-cu12 (perf_analyzer needs libcudart.so.12 even on a CPU-only machine), the grpc extra
# pillow and attrdict (Triton's example image_client.py imports them), writes
# <venv>/bin/perf_analyzer-env (perf_analyzer with the right LD_LIBRARY_PATH) and <venv>/bin/triton-env,
# then checks that `perf_analyzer --help` runs.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${INFERPERF_TRITON_VENV:-$PWD/.venv-triton}"
PY="${PYTHON:-python3}"

if ! ldconfig -p 2>/dev/null | grep -q 'libb64\.so\.0d'; then
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libb64-0d >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libb64-0d
    fi
fi

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import importlib.util as u, tritonclient.http, tritonclient.grpc, PIL; assert u.find_spec('attrdict')" 2>/dev/null || [ ! -x "$VENV/bin/perf_analyzer" ] \
        || ! "$VENV/bin/python" -c "import nvidia.cuda_runtime" 2>/dev/null; then
    # PIP_CONSTRAINT is emptied so the machine-wide constraints (torch caps) do not leak into this venv.
    # grpc, pillow, attrdict: Triton's example image_client.py imports tritonclient.grpc's model_config_pb2,
    # PIL, and attrdict for HTTP metadata.
    PIP_CONSTRAINT="" "$VENV/bin/python" -m pip install --quiet 'tritonclient[http,grpc]==2.40.0' pillow attrdict \
        nvidia-cuda-runtime-cu12
fi

CUDART_DIR="$("$VENV/bin/python" - <<'EOF'
import pathlib, nvidia.cuda_runtime as m
paths = list(m.__path__)
for p in paths:
    hits = sorted(pathlib.Path(p).rglob("libcudart.so.12*"))
    if hits:
        print(hits[0].parent)
        break
else:
    raise SystemExit("libcudart.so.12 not found in the nvidia-cuda-runtime-cu12 wheel under " + ", ".join(paths))
EOF
)"

cat >"$VENV/bin/triton-env" <<EOF
# Source this file: Triton's clients from $VENV (written by scripts/install_triton_clients.sh).
export PATH="$VENV/bin:\$PATH"
export LD_LIBRARY_PATH="$CUDART_DIR\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
EOF
cat >"$VENV/bin/perf_analyzer-env" <<EOF
#!/usr/bin/env bash
# perf_analyzer with libcudart.so.12 on LD_LIBRARY_PATH (written by scripts/install_triton_clients.sh).
export LD_LIBRARY_PATH="$CUDART_DIR\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "$VENV/bin/perf_analyzer" "\$@"
EOF
chmod +x "$VENV/bin/perf_analyzer-env"

# perf_analyzer prints its usage and exits 99 on --help; a missing shared library prints no usage.
out="$("$VENV/bin/perf_analyzer-env" --help 2>&1 || true)"
if ! grep -q -- '--concurrency-range' <<<"$out"; then
    echo "perf_analyzer --help failed:" >&2
    echo "$out" | tail -20 >&2
    exit 1
fi
echo "Triton clients ready in $VENV (tritonclient $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("tritonclient"))'), perf_analyzer: $VENV/bin/perf_analyzer-env)"
