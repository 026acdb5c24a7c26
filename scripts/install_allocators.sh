#!/usr/bin/env bash
# jemalloc and tcmalloc (Debian's libjemalloc2 and libtcmalloc-minimal4) for `--allocator`
# (tests/integration/test_allocator_runs.py). Idempotent.
set -euo pipefail
libs=$(/sbin/ldconfig -p 2>/dev/null || true)
if ! grep -q 'libjemalloc\.so\.2 ' <<<"$libs" || ! grep -q 'libtcmalloc_minimal\.so\.4 ' <<<"$libs"; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    libjemalloc2 libtcmalloc-minimal4 >/dev/null
fi
