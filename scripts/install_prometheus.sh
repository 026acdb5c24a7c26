#!/usr/bin/env bash
# Prometheus and promtool (Debian's `prometheus` package) for tests/integration/test_prometheus.py, which starts
# its own Prometheus on an ephemeral 127.0.0.1 port (the package's own service is not needed and not started).
# Idempotent.
set -euo pipefail
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
prometheus --version 2>&1 | head -1
