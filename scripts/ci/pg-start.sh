#!/usr/bin/env bash
# Start a throwaway Postgres cluster on 127.0.0.1 for integration tests.
# Usage: eval "$(scripts/ci/pg-start.sh [port])"  -> exports BATON_TEST_DATABASE_URL, BATON_PG_DIR
# Stop it with scripts/ci/pg-stop.sh "$BATON_PG_DIR".
# BATON_PG_OPTIONS adds server options, e.g. "-c shared_preload_libraries=pg_stat_statements".
set -euo pipefail
port="${1:-55432}"
bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
[ -n "$bindir" ] || { echo "[ci] postgresql is not installed: apt-get install -y postgresql" >&2; exit 1; }
dir="$(mktemp -d /tmp/baton-pg.XXXXXX)"
chown postgres:postgres "$dir"
runuser -u postgres -- "$bindir/initdb" -D "$dir/data" -A trust --no-sync -U postgres >"$dir/initdb.log" 2>&1
# On failure, the server's own reason (e.g. "Address already in use": callers that chose the
# port may try another).
runuser -u postgres -- "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start \
  -o "-p $port -c listen_addresses=127.0.0.1 -k $dir -c fsync=off -c max_connections=200 ${BATON_PG_OPTIONS:-}" >/dev/null \
  || { tail -n 5 "$dir/server.log" >&2; rm -rf "$dir"; exit 1; }
runuser -u postgres -- "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres baton_test
echo "export BATON_PG_DIR=$dir"
echo "export BATON_PG_BIN=$bindir"
echo "export BATON_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$port/baton_test"
