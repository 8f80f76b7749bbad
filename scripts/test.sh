#!/usr/bin/env bash
# The test command (`npm test`): makes sure the services the tests need exist, runs vitest,
# and prints "N passed, N failed, N skipped" from vitest's JSON report. Extra arguments go
# to vitest (e.g. `npm test -- test/unit`).
set -uo pipefail
cd "$(dirname "$0")/.."
export NO_COLOR=1

need=0
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need=1
[ -x /usr/sbin/sshd ] || need=1
[ -x /usr/bin/chromium ] || need=1
# The real container target: podman (+ runc), a loopback registry, busybox-static for images.
for b in /usr/bin/podman /usr/sbin/runc /usr/bin/docker-registry /bin/busybox; do [ -x "$b" ] || need=1; done
# The migration tool (migrate-table) and the demo's migration run the sqlite3 CLI.
[ -x /usr/bin/sqlite3 ] || need=1
# The action's https test makes a throwaway certificate with the openssl CLI.
[ -x /usr/bin/openssl ] || need=1
if [ "$need" = 1 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "[test] installing Debian packages: postgresql openssh-server chromium podman runc docker-registry busybox-static sqlite3 openssl"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      postgresql openssh-server chromium podman runc docker-registry busybox-static sqlite3 openssl >/tmp/baton-apt.log 2>&1 \
      || { tail -20 /tmp/baton-apt.log; echo "[test] apt-get install failed"; exit 1; }
  else
    echo "[test] missing Debian packages; run as root: apt-get install -y postgresql openssh-server chromium podman runc docker-registry busybox-static sqlite3" >&2
    exit 1
  fi
fi

# The evidence gate's e2e reads a real Prometheus (docs/gate.md).
if [ ! -x /usr/bin/prometheus ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "[test] installing Debian package prometheus"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends prometheus >/tmp/baton-apt-prom.log 2>&1 \
      || { tail -20 /tmp/baton-apt-prom.log; echo "[test] apt-get install prometheus failed"; exit 1; }
  else
    echo "[test] missing Debian package; run as root: apt-get install -y --no-install-recommends prometheus" >&2
    exit 1
  fi
fi

if [ -z "${BATON_TEST_DATABASE_URL:-}" ]; then
  eval "$(scripts/ci/pg-start.sh "${BATON_TEST_PG_PORT:-55433}")" || { echo "[test] could not start Postgres"; exit 1; }
  trap 'scripts/ci/pg-stop.sh "$BATON_PG_DIR"' EXIT
fi

mkdir -p test-results
rm -f test-results/vitest.json
npx vitest run --reporter=default --reporter=json --outputFile.json=test-results/vitest.json "$@"
status=$?
node scripts/ci/count-tests.mjs test-results/vitest.json || status=1
exit $status
