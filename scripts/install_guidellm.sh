#!/usr/bin/env bash
# Install GuideLLM (vllm-project/guidellm) in its OWN virtual environment (issue 30 item 5). GuideLLM requires
# torch; the venv gets the CPU-only wheel, as the test extra does (pyproject.toml: torch==2.13.0 resolved to
# the +cpu wheel), never PyPI's default CUDA build (~6 GB): from $PIP_FIND_LINKS when a torch-*+cpu wheel lies
# there (this machine's /opt/wheels), else from PyTorch's CPU index. The benchmarks and tests run `guidellm`
# from this venv as a subprocess, offline (HF_HUB_OFFLINE=1, --tokenizer naming the local directory of
# scripts/make_tokenizer.py).
#
# Idempotent: a second run only checks. Usage:
#   bash scripts/install_guidellm.sh        # venv at $INFERPERF_GUIDELLM_VENV or <repo>/.venv-guidellm
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${INFERPERF_GUIDELLM_VENV:-$PWD/.venv-guidellm}"
PY="${PYTHON:-python3}"
GUIDELLM_VERSION="0.8.1"
TORCH_VERSION="2.13.0"  # the test extra's (pyproject.toml)

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    wheel=""
    for d in ${PIP_FIND_LINKS:-}; do
        for w in "$d"/torch-"$TORCH_VERSION"+cpu-*.whl; do [ -f "$w" ] && wheel="$w"; done
    done
    if [ -n "$wheel" ]; then
        PIP_CONSTRAINT="" "$VENV/bin/python" -m pip install --quiet "$wheel"
    else
        PIP_CONSTRAINT="" "$VENV/bin/python" -m pip install --quiet "torch==$TORCH_VERSION" \
            --index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple
    fi
fi
if ! "$VENV/bin/python" -c "import guidellm" 2>/dev/null; then
    PIP_CONSTRAINT="" "$VENV/bin/python" -m pip install --quiet "guidellm==$GUIDELLM_VERSION"
fi
if "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.version.cuda is None)"; then
    echo "$VENV holds a CUDA build of torch; remove the venv and rerun (the CPU wheel is wanted)" >&2
    exit 1
fi
if ! out="$(HF_HUB_OFFLINE=1 "$VENV/bin/guidellm" run --help 2>&1)" || ! grep -q -- '--tokenizer' <<<"$out"; then
    echo "guidellm run --help failed:" >&2
    echo "$out" | tail -20 >&2
    exit 1
fi
echo "GuideLLM ready in $VENV (guidellm $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("guidellm"))'), torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)'))"
