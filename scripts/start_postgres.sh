#!/usr/bin/env bash
# A local PostgreSQL for the shared-study tests (tests/integration/test_tune_storage.py): Debian's package,
# its default cluster started with pg_ctlcluster, ready within 30 s (pg_isready), a role and a database
# for inferperf. Idempotent. Prints the URL the tests read from INFERPERF_TEST_POSTGRES_URL.
set -euo pipefail
if ! command -v pg_ctlcluster >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
read -r ver cluster _ < <(pg_lsclusters -h | head -1) || true
if [ -z "${ver:-}" ]; then
  ver=$(ls /usr/lib/postgresql | sort -n | tail -1); cluster=main
  pg_createcluster "$ver" "$cluster" >/dev/null
fi
pg_ctlcluster "$ver" "$cluster" start >/dev/null 2>&1 || true  # already running is fine (stdout is the URL only)
port=$(pg_lsclusters -h | awk -v v="$ver" -v c="$cluster" '$1==v && $2==c {print $3}')
for _ in $(seq 1 30); do
  pg_isready -q -h 127.0.0.1 -p "$port" && break
  sleep 1
done
pg_isready -h 127.0.0.1 -p "$port" >/dev/null || { echo "postgresql $ver/$cluster not ready after 30 s" >&2; exit 1; }
psql_su() { su postgres -c "psql -p $port -v ON_ERROR_STOP=1 -qtA $*"; }
[ "$(psql_su "-c \"SELECT 1 FROM pg_roles WHERE rolname='inferperf'\"")" = 1 ] ||
  psql_su "-c \"CREATE ROLE inferperf LOGIN PASSWORD 'inferperf'\""
[ "$(psql_su "-c \"SELECT 1 FROM pg_database WHERE datname='inferperf_tune'\"")" = 1 ] ||
  psql_su "-c \"CREATE DATABASE inferperf_tune OWNER inferperf\""
echo "postgresql+psycopg://inferperf:inferperf@127.0.0.1:$port/inferperf_tune"
