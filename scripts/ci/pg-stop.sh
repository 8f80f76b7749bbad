#!/usr/bin/env bash
# Stop a cluster started by pg-start.sh. Usage: scripts/ci/pg-stop.sh "$BATON_PG_DIR"
set -u
dir="${1:?pg dir}"
bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
[ -d "$dir/data" ] && runuser -u postgres -- "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1
rm -rf "$dir"
