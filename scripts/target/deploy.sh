#!/bin/sh
# Baton target-side deploy script (POSIX sh; installed on each serving machine).
#
#   deploy.sh deploy|restore --lane L --image NAME@sha256:HEX --previous-image NAME@sha256:HEX \
#             --health-url URL --operation-key KEY [--release ID --generation N] \
#             [--phase pull|start|health|stop-old] [--health-timeout S] [--env NAME=VALUE]...
#   deploy.sh smoke --lane L --image NAME@sha256:HEX --health-url URL [--phase running|health] [--health-timeout S]
#   deploy.sh inspect --lane L --image NAME@sha256:HEX
#
# inspect is read-only (the engine asks it before a rollback, docs/lifecycle.md): one JSON line
# per check, phases access (the deploy user can use the container runtime and write the
# ledger), image (the image is on this machine and the runtime reads its config, so a restore
# needs no registry) and capacity (free space at BATON_CAPACITY_PATH, default /var/lib, at
# least BATON_MIN_FREE_MB, default 1024). Exit 0 when all pass, 1 when one failed.
#
# Phases pull -> start -> health -> stop-old, each printing one JSON line:
#   {"phase":"pull","status":"ok|failed|skipped|not_run","exit_code":0,"duration_ms":12,"message":"..."}
# After a failed phase the later ones print not_run, so the old container is never stopped
# unless the new one answered its health check (failure case F07). A new container this operation
# started is removed again when its `run` fails or it fails its health check (nothing Created or
# exited is left behind), and the start is marked undone in the ledger so that a retry starts it
# again; a container the operation found already running is left alone.
#
# Which container answers: every container deploy.sh starts gets a fresh instance id, as the
# environment variable BATON_INSTANCE_ID and the label baton.instance_id. With host networking an
# old container on the same port answers the health URL while the new one starts, so (with the
# default BATON_HEALTH_TARGET=identity) an answer counts only when it carries that id: in a
# `Baton-Instance-Id` response header or anywhere in its body. docs/runner.md says what a server
# must echo, and the fallback when it cannot.
#
# Absolute, not relative: "lane L runs image D". The container name is derived from the lane and
# the digest (baton-<lane>-<first 12 hex>), so starting twice finds the running one, and stop-old
# stops exactly one container by exact name, never by a pattern (F08).
#
# Idempotent per operation key: a phase that completed (ok/skipped) for the same operation key,
# subcommand and phase is recorded in a ledger file, and a repeat prints the recorded line with
# "replayed":true instead of doing it again. Failed phases are not recorded, so a retry retries.
#
# Generation fence (docs/state-machine.md rule 7): with --release and --generation, the highest generation
# seen per release on this lane is kept in $BATON_LEDGER.gen-<lane>, and a deploy/restore from a
# lower generation is refused before any phase runs: one line
#   {"phase":"fence","status":"refused","exit_code":3,...}
# and exit status 3. This stops a runner that outlived its callback deadline (step run
# `unknown`) from landing its forward deploy after the compensating restore of the same lane.
# Every deploy/restore holds the lane's lock ($BATON_LEDGER.lock-<lane>) while it runs, so the
# ledger lookup, the fence and the phase are one step with respect to other writers on the lane.
#
# Configuration (environment, or a sh file of VAR=value lines at $BATON_DEPLOY_CONF,
# default /etc/baton/deploy.conf):
#   BATON_CONTAINER_CLI    container CLI (default docker; e.g. podman)
#   BATON_LEDGER           ledger file (default /var/lib/baton/ledger)
#   BATON_RUN_ARGS         extra arguments for `run` (word-split), e.g. "--network host --gpus all"
#   BATON_HEALTH_TIMEOUT_S health deadline in seconds (default 60, smoke 10; --health-timeout overrides)
#   BATON_HEALTH_INTERVAL_S seconds before the second health probe (default 1; decimals allowed,
#                          e.g. 0.2); each later wait doubles, up to BATON_HEALTH_INTERVAL_MAX_S
#   BATON_HEALTH_INTERVAL_MAX_S longest wait between two health probes (default 5; never below
#                          BATON_HEALTH_INTERVAL_S). A container loading a model for minutes
#                          is then probed every 5 s, not every second: each probe starts a few
#                          processes (the runtime's inspect, curl), and the answer is reported
#                          at most that much later. The last probe is made at the deadline.
#   BATON_HEALTH_TARGET    identity (default; `url` is its former name): probe the health URL as
#                          given and pass only on a 2xx answer carrying the new container's
#                          instance id (host networking, or a router in front);
#                          container: probe the URL's port and path at the NEW container's own
#                          address (bridge networking), which proves the answer is the new one's
#                          without an id. Either way an old container answering the same URL can
#                          never pass the new one's health check.
#   BATON_LANE_LOCK_WAIT_S how long to wait for another deploy/restore on the same lane (default 900)
# Exit status: 0 all phases ok/skipped, 1 a phase failed (or the lane lock stayed busy),
# 2 bad arguments, 3 refused by the generation fence.
set -u

conf="${BATON_DEPLOY_CONF:-/etc/baton/deploy.conf}"
# shellcheck disable=SC1090
if [ -r "$conf" ]; then . "$conf"; fi

CLI="${BATON_CONTAINER_CLI:-docker}"
LEDGER="${BATON_LEDGER:-/var/lib/baton/ledger}"
RUN_ARGS="${BATON_RUN_ARGS:-}"
HEALTH_TIMEOUT="${BATON_HEALTH_TIMEOUT_S:-}"
HEALTH_INTERVAL="${BATON_HEALTH_INTERVAL_S:-1}"
HEALTH_INTERVAL_MAX="${BATON_HEALTH_INTERVAL_MAX_S:-5}"
HEALTH_TARGET="${BATON_HEALTH_TARGET:-identity}"
LOCK_WAIT="${BATON_LANE_LOCK_WAIT_S:-900}"
NL='
'

now_ms() {
  n=$(date +%s%N 2>/dev/null)
  case "$n" in
    '' | *N*) echo $(($(date +%s) * 1000)) ;;
    *) echo $((n / 1000000)) ;;
  esac
}

# JSON string body: drop control characters (newlines become spaces), escape \ and ".
json_str() {
  printf '%s' "$1" | tr '\n\t\r' '   ' | tr -d '\000-\037' | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | cut -c1-400
}

# emit PHASE STATUS EXIT_CODE DURATION_MS MESSAGE [RUNNING_IMAGE] [EXTRA_JSON]
# RUNNING_IMAGE (name@sha256:…, as the runtime reports the container's image) adds "image";
# EXTRA_JSON (already escaped, starting with a comma) adds fields, e.g. a failed health check's
# "http_status" and "body".
emit() {
  extra="${7:-}"
  [ -n "${6:-}" ] && extra=$(printf ',"image":"%s"%s' "$(json_str "$6")" "$extra")
  printf '{"phase":"%s","status":"%s","exit_code":%s,"duration_ms":%s,"message":"%s"%s}\n' \
    "$1" "$2" "$3" "$4" "$(json_str "$5")" "$extra"
}

usage_fail() {
  emit args failed 2 0 "[deploy.sh] $1"
  exit 2
}

# matches VALUE EXTENDED-REGEX [SHORT-REGEX SHORT-MAX]: whole value, single line. A value of at
# most SHORT-MAX characters is checked against SHORT-REGEX instead: the same pattern without the
# counted repetitions ({0,254}, {1,512}) that make grep build a large automaton (40-60 ms of
# CPU a check, several checks a call), and the same answer for a value that short.
matches() {
  case "$1" in *"$NL"*) return 1 ;; esac
  if [ $# -ge 4 ] && [ "${#1}" -le "$4" ]; then
    printf '%s\n' "$1" | grep -Eqx "$3"
  else
    printf '%s\n' "$1" | grep -Eqx "$2"
  fi
}

# plain VALUE FIRST REST MAX: 0 when VALUE has 1 to MAX characters, the first one of FIRST and
# every one of REST (lists of characters, no ranges: the same in every locale and shell). No
# process: a sure "yes" for the usual values before `matches` (grep -E, a fork and an exec, a
# dozen a call); every value it accepts the field's regex accepts too, and any other value is
# still decided by the regex.
LOWER=abcdefghijklmnopqrstuvwxyz UPPER=ABCDEFGHIJKLMNOPQRSTUVWXYZ DIGITS=0123456789
plain() {
  [ -n "$1" ] && [ "${#1}" -le "$4" ] || return 1
  case "$1" in [$2]*) ;; *) return 1 ;; esac
  case "$1" in *[!$3]*) return 1 ;; esac
}

# plain_image VALUE: plain for an image name@sha256:<64 hex> (no tag, name of at most 255
# characters of [a-z0-9._/:-], starting with [a-z0-9]), which IMAGE_RE and IMAGE_SHORT_RE accept.
plain_image() {
  case "$1" in *@sha256:*) ;; *) return 1 ;; esac
  name="${1%@sha256:*}" digest="${1##*@sha256:}"
  [ "$name@sha256:$digest" = "$1" ] && [ "${#digest}" -eq 64 ] &&
    plain "$digest" "${DIGITS}abcdef" "${DIGITS}abcdef" 64 &&
    plain "$name" "$LOWER$DIGITS" "$LOWER$DIGITS._/:-" 255
}

# plain_url VALUE: plain for http(s)://<1 to 400 of [A-Za-z0-9._~:/?&=%+-]> (URL_RE).
plain_url() {
  case "$1" in
    http://*) plain "${1#http://}" "$UPPER$LOWER$DIGITS._~:/?&=%+-" "$UPPER$LOWER$DIGITS._~:/?&=%+-" 400 ;;
    https://*) plain "${1#https://}" "$UPPER$LOWER$DIGITS._~:/?&=%+-" "$UPPER$LOWER$DIGITS._~:/?&=%+-" 400 ;;
    *) return 1 ;;
  esac
}

# secs_ms SECONDS: sets MS to the whole milliseconds of a decimal number of seconds (1, 0.2,
# 2.75; digits after the third decimal are dropped). Non-zero status for anything else (a sign,
# a unit, empty). No subshell: it runs in this shell.
secs_ms() {
  case "$1" in '' | . | *[!0-9.]* | *.*.* | ??????????*) return 1 ;; esac
  whole="${1%%.*}" frac=""
  [ "$whole" = "$1" ] || frac="${1#*.}"
  frac="${frac}000"
  # Digit by digit, and the whole part without leading zeros: sh arithmetic reads 010 as octal.
  d1="${frac%"${frac#?}"}" frac="${frac#?}"
  d2="${frac%"${frac#?}"}" frac="${frac#?}"
  d3="${frac%"${frac#?}"}"
  while :; do case "$whole" in 0?*) whole="${whole#0}" ;; *) break ;; esac; done
  MS=$((${whole:-0} * 1000 + d1 * 100 + d2 * 10 + d3))
}

sub="${1:-}"
[ $# -gt 0 ] && shift
LANE="" IMAGE="" PREV="" URL="" KEY="" ONLY="" RELEASE="" GEN="" ENV_ARGS=""
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage_fail "option $1 needs a value"
  case "$1" in
    --lane) LANE="$2" ;;
    --image) IMAGE="$2" ;;
    --previous-image) PREV="$2" ;;
    --health-url) URL="$2" ;;
    --operation-key) KEY="$2" ;;
    --phase) ONLY="$2" ;;
    --release) RELEASE="$2" ;;
    --generation) GEN="$2" ;;
    --health-timeout) HEALTH_TIMEOUT="$2" ;;
    # Declared environment for the new container (deploy only), e.g. a shadow-safe lane's
    # BATON_CACHE_NAMESPACE=shadow-x: a BATON_ name and a plain value, so word-splitting is safe.
    --env)
      case "$2" in
        *"$NL"* | *[!A-Za-z0-9._:=-]* | *=*=* | =*) usage_fail "--env must be NAME=VALUE: a BATON_ name of capitals and '_', a value of letters, digits, '.', '_', ':' or '-'" ;;
        BATON_*=?*) ;;
        *) usage_fail "--env must be NAME=VALUE: a BATON_ name of capitals and '_', a value of letters, digits, '.', '_', ':' or '-'" ;;
      esac
      case "${2%%=*}" in *[!A-Z_]*) usage_fail "--env name ${2%%=*} must be capitals and '_' only" ;; esac
      ENV_ARGS="$ENV_ARGS -e $2"
      ;;
    *) usage_fail "unknown option $1; see the usage at the top of deploy.sh" ;;
  esac
  shift 2
done

# Smoke checks a lane that should already be healthy: a short default deadline.
if [ -z "$HEALTH_TIMEOUT" ]; then
  if [ "$sub" = smoke ]; then HEALTH_TIMEOUT=10; else HEALTH_TIMEOUT=60; fi
fi
case "$HEALTH_TARGET" in
  identity | container) ;;
  url) HEALTH_TARGET=identity ;;
  *) usage_fail "BATON_HEALTH_TARGET must be identity (the default) or container (got '$HEALTH_TARGET')" ;;
esac
case "$sub" in
  deploy | restore | smoke | inspect) ;;
  *) usage_fail "subcommand must be deploy, restore, smoke or inspect (got '$sub')" ;;
esac
# The field rules of engine/src/protocol/fields.ts, verbatim (LANE_ID_PATTERN, IMAGE_PATTERN,
# HEALTH_URL_PATTERN and its 400-character limit); test/unit/field-schemas.test.ts compares them.
LANE_RE='[a-z0-9][a-z0-9._-]{0,63}'
IMAGE_RE='[a-z0-9][a-z0-9._/:-]{0,254}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[a-f0-9]{64}'
URL_RE='https?://[A-Za-z0-9._~:/?&=%+-]{1,400}'
URL_MAX=400
# The same languages for shorter values (see matches): an image whose name[:tag] has at most 128
# characters (so name <= 255 and tag <= 128 hold), a URL of at most URL_MAX characters, an
# operation key of at most 512.
IMAGE_SHORT_RE='[a-z0-9][a-z0-9._/:-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?@sha256:[a-f0-9]{64}'
IMAGE_SHORT_MAX=200
URL_SHORT_RE='https?://[A-Za-z0-9._~:/?&=%+-]+'
KEY_RE='[A-Za-z0-9._:=/@+-]{1,512}'
KEY_SHORT_RE='[A-Za-z0-9._:=/@+-]+'
plain "$LANE" "$LOWER$DIGITS" "$LOWER$DIGITS._-" 64 || matches "$LANE" "$LANE_RE" || usage_fail "--lane must be a lane id such as lane-a"
plain_image "$IMAGE" || matches "$IMAGE" "$IMAGE_RE" "$IMAGE_SHORT_RE" "$IMAGE_SHORT_MAX" || usage_fail "--image must be pinned by digest: name[:tag]@sha256:<64 hex>"
[ "$sub" = inspect ] || { { plain_url "$URL" || matches "$URL" "$URL_RE" "$URL_SHORT_RE" "$URL_MAX"; } && [ "${#URL}" -le "$URL_MAX" ]; } || usage_fail "--health-url must be an http(s) URL of at most $URL_MAX characters"
plain "$HEALTH_TIMEOUT" "$DIGITS" "$DIGITS" 5 || matches "$HEALTH_TIMEOUT" '[0-9]{1,5}' || usage_fail "--health-timeout must be whole seconds"
if [ "$sub" != inspect ]; then
  secs_ms "$HEALTH_INTERVAL" && [ "$MS" -gt 0 ] ||
    usage_fail "BATON_HEALTH_INTERVAL_S must be seconds above 0, such as 1 or 0.2 (got '$HEALTH_INTERVAL')"
  INTERVAL_MS=$MS
  secs_ms "$HEALTH_INTERVAL_MAX" ||
    usage_fail "BATON_HEALTH_INTERVAL_MAX_S must be seconds, such as 5 or 0.5 (got '$HEALTH_INTERVAL_MAX')"
  INTERVAL_MAX_MS=$MS
  [ "$INTERVAL_MAX_MS" -ge "$INTERVAL_MS" ] || INTERVAL_MAX_MS=$INTERVAL_MS
fi

if [ "$sub" = inspect ]; then
  failed=0
  t0=$(now_ms)
  if ! err=$("$CLI" ps 2>&1 >/dev/null); then
    emit access failed 1 $(($(now_ms) - t0)) "[deploy.sh] $(id -un) cannot use the container runtime ($CLI ps): $err; fix: give the deploy user access to $CLI (docs/runner.md)"
    failed=1
  elif ! (: >>"$LEDGER") 2>/dev/null; then
    emit access failed 1 $(($(now_ms) - t0)) "[deploy.sh] ledger $LEDGER is not writable by $(id -un); fix: create it for the deploy user (docs/runner.md)"
    failed=1
  else
    emit access ok 0 $(($(now_ms) - t0)) "$(id -un) can use $CLI and write the ledger"
  fi
  t0=$(now_ms)
  if id=$("$CLI" image inspect -f '{{.Id}}' "$IMAGE" 2>&1); then
    emit image ok 0 $(($(now_ms) - t0)) "image $IMAGE is on this machine (id $id)"
  else
    emit image failed 1 $(($(now_ms) - t0)) "image $IMAGE is not on this machine: $id"
    failed=1
  fi
  t0=$(now_ms)
  cap="${BATON_CAPACITY_PATH:-/var/lib}"
  [ -d "$cap" ] || cap=/
  min_mb="${BATON_MIN_FREE_MB:-1024}"
  matches "$min_mb" '[0-9]{1,9}' || usage_fail "BATON_MIN_FREE_MB must be whole megabytes"
  free_kb=$(df -Pk "$cap" 2>/dev/null | awk 'NR == 2 { print $4 }')
  if ! matches "${free_kb:-}" '[0-9]{1,15}'; then
    emit capacity failed 1 $(($(now_ms) - t0)) "cannot read the free space at $cap (df -Pk)"
    failed=1
  elif [ $((free_kb / 1024)) -lt "$min_mb" ]; then
    emit capacity failed 1 $(($(now_ms) - t0)) "$((free_kb / 1024)) MB free at $cap, less than $min_mb MB (BATON_MIN_FREE_MB)" "" ",\"free_mb\":$((free_kb / 1024))"
    failed=1
  else
    emit capacity ok 0 $(($(now_ms) - t0)) "$((free_kb / 1024)) MB free at $cap (at least $min_mb MB)" "" ",\"free_mb\":$((free_kb / 1024))"
  fi
  exit "$failed"
fi
if [ "$sub" != smoke ]; then
  plain "$KEY" "$UPPER$LOWER$DIGITS._:=/@+-" "$UPPER$LOWER$DIGITS._:=/@+-" 512 || matches "$KEY" "$KEY_RE" "$KEY_SHORT_RE" 512 || usage_fail "--operation-key must be set (letters, digits, ._:=/@+-)"
  [ -z "$PREV" ] || plain_image "$PREV" || matches "$PREV" "$IMAGE_RE" "$IMAGE_SHORT_RE" "$IMAGE_SHORT_MAX" || usage_fail "--previous-image must be name[:tag]@sha256:<64 hex>"
  case "$ONLY" in '' | pull | start | health | stop-old) ;; *) usage_fail "--phase must be pull, start, health or stop-old" ;; esac
fi
# Both or neither: a release without a generation cannot be fenced, and the reverse means nothing.
if [ -n "$RELEASE$GEN" ]; then
  plain "$RELEASE" "$UPPER$LOWER$DIGITS" "$UPPER$LOWER$DIGITS._-" 64 || matches "$RELEASE" '[A-Za-z0-9][A-Za-z0-9._-]{0,63}' || usage_fail "--release must be the release id (e.g. r12) and comes with --generation"
  # No leading zeros: one spelling per generation, and sh arithmetic would read 010 as octal.
  [ "$GEN" = 0 ] || plain "$GEN" 123456789 "$DIGITS" 9 || matches "$GEN" '0|[1-9][0-9]{0,8}' || usage_fail "--generation must be the release generation (a whole number) and comes with --release"
fi

# The ledger's folder, created when missing (dirname without a process).
ledger_dir() {
  case "$LEDGER" in */*) d="${LEDGER%/*}" ;; *) d=. ;; esac
  [ -d "${d:-/}" ] || mkdir -p "${d:-/}" 2>/dev/null
}

# Idempotency depends on the ledger: refuse to act when it cannot be written.
if [ "$sub" != smoke ]; then
  ledger_dir
  # A subshell: a failed redirection on the special built-in `:` would end this shell (POSIX).
  if ! (: >>"$LEDGER") 2>/dev/null; then
    emit ledger failed 2 0 "[deploy.sh] ledger $LEDGER is not writable by $(id -un); create it for the deploy user (docs/runner.md)"
    exit 2
  fi
fi

container_name() { # IMAGE -> baton-<lane>-<12 hex>
  digest="${1##*@sha256:}"
  printf 'baton-%s-%.12s' "$LANE" "$digest"
}
NEW_NAME=$(container_name "$IMAGE")
OUT=$(mktemp "${TMPDIR:-/tmp}/baton-deploy.XXXXXX") || exit 1
LOCK="" LOCKED=0
# The lock is released on a normal exit; a shell killed by a signal leaves it behind with its
# dead pid, and the next writer breaks it (lane_lock). No TERM trap on purpose: dash would defer
# it until the running container command returns, and a signal must end this script at once.
trap 'rm -f "$OUT" "$OUT.body" "$OUT.head"; [ "$LOCKED" = 1 ] && rm -f "$LOCK"' EXIT

last_line() { tail -n 3 "$OUT" | tr '\n' ' '; }

is_running() { # NAME -> 0 when running; sets EXISTS=1 when the container exists at all
  EXISTS=0
  state=$("$CLI" inspect -f '{{.State.Running}}' "$1" 2>/dev/null) || return 1
  EXISTS=1
  [ "$state" = true ]
}

ledger_get() { # PHASE -> recorded JSON line (empty when none, or when the last record is "-": undone)
  [ -r "$LEDGER" ] || return 0
  awk -F '\t' -v k="$KEY" -v s="$sub" -v p="$1" '$1 == k && $2 == s && $3 == p { line = $4 } END { if (line != "" && line != "-") print line }' "$LEDGER"
}

ledger_has_all() { # -> 0 when every phase this run would do is already recorded for the key
  for p in pull start health stop-old; do
    [ -z "$ONLY" ] || [ "$ONLY" = "$p" ] || continue
    [ -n "$(ledger_get "$p")" ] || return 1
  done
  return 0
}

pid_alive() { # PID -> 0 when a process with that pid exists
  if [ -d /proc/1 ]; then [ -d "/proc/$1" ]; else kill -0 "$1" 2>/dev/null; fi
}

# Takes the lane lock: a file created by `ln` (atomic, fails when it exists) holding our pid.
# A lock whose pid is gone (a deploy killed by a signal) is broken. Bounded by LOCK_WAIT seconds.
lane_lock() {
  LOCK="$LEDGER.lock-$LANE"
  mine="$LOCK.$$"
  printf '%s\n' "$$" >"$mine" || return 1
  deadline=$(($(date +%s) + LOCK_WAIT))
  nolock=0
  while :; do
    if ln "$mine" "$LOCK" 2>/dev/null; then
      rm -f "$mine"
      LOCKED=1
      return 0
    fi
    # `ln` failed with no lock there (e.g. a file system without hard links): not contention.
    if [ ! -e "$LOCK" ]; then
      nolock=$((nolock + 1))
      if [ "$nolock" -ge 3 ]; then
        rm -f "$mine"
        LOCK_NOLINK=1
        return 1
      fi
      continue
    fi
    owner=$(cat "$LOCK" 2>/dev/null)
    if [ -n "$owner" ] && ! pid_alive "$owner"; then
      # Rename first so that of two writers breaking the same stale lock only one removes it.
      mv "$LOCK" "$LOCK.stale.$$" 2>/dev/null && rm -f "$LOCK.stale.$$"
      continue
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      rm -f "$mine"
      LOCK_OWNER="$owner"
      return 1
    fi
    sleep 1
  done
}

gen_file() { printf '%s.gen-%s' "$LEDGER" "$LANE"; }

gen_seen() { # -> highest generation recorded for RELEASE on this lane (empty when none); 1 = unreadable
  f=$(gen_file)
  [ -e "$f" ] || return 0
  { [ -f "$f" ] && [ -r "$f" ]; } || return 1
  awk -F '\t' -v r="$RELEASE" '$1 == r { g = $2 } END { if (g != "") print g }' "$f"
}

gen_record() { # writes GEN as the release's highest generation on this lane (temp file + rename)
  f=$(gen_file)
  tmp="$f.tmp.$$"
  {
    [ -r "$f" ] && awk -F '\t' -v r="$RELEASE" '$1 != r' "$f"
    printf '%s\t%s\n' "$RELEASE" "$GEN"
  } >"$tmp" && mv -f "$tmp" "$f" && [ "$(gen_seen)" = "$GEN" ]
}

ledger_put() { # PHASE JSON
  ledger_dir
  printf '%s\t%s\t%s\t%s\n' "$KEY" "$sub" "$1" "$2" >>"$LEDGER"
}

phase_pull() {
  "$CLI" pull "$IMAGE" >"$OUT" 2>&1
  rc=$?
  [ $rc -eq 0 ] && MSG="pulled $IMAGE" || MSG="pull failed: $(last_line)"
  return $rc
}

# A fresh instance id: 32 hex digits from the kernel's random source (the time and pid when it
# cannot be read). It only has to differ from every other container's on the lane.
new_instance_id() {
  id=$(od -An -N16 -tx1 /dev/urandom 2>/dev/null | tr -d ' \n')
  [ "${#id}" -eq 32 ] || id=$(printf '%016x%016x' "$(now_ms)" "$$")
  printf '%s' "$id"
}

# A label of a container (empty when it has none or the container is missing).
label_of() { # NAME LABEL
  "$CLI" inspect -f "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null | head -n 1
}

# The instance id the container was started with (label baton.instance_id), or empty.
instance_id() { # NAME
  id=$(label_of "$1" baton.instance_id)
  plain "$id" "${DIGITS}abcdef" "${DIGITS}abcdef" 64 && printf '%s' "$id"
}

phase_start() {
  if is_running "$NEW_NAME"; then
    MSG="$NEW_NAME already running"
    IMG_NOW=$(running_image "$NEW_NAME")
    return 0
  fi
  if [ "$EXISTS" = 1 ]; then "$CLI" rm -f "$NEW_NAME" >/dev/null 2>&1; fi
  id=$(new_instance_id)
  # RUN_ARGS is word-split on purpose (operator-set configuration).
  # shellcheck disable=SC2086
  "$CLI" run -d --name "$NEW_NAME" --label "baton.lane=$LANE" --label "baton.operation_key=$KEY" \
    --label "baton.instance_id=$id" -e "BATON_INSTANCE_ID=$id" \
    -e "BATON_HEALTH_URL=$URL" $ENV_ARGS $RUN_ARGS "$IMAGE" >"$OUT" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    MSG="started $NEW_NAME (instance id $id)"
    IMG_NOW=$(running_image "$NEW_NAME")
    return 0
  fi
  MSG="start failed: $(last_line)"
  # A runtime may keep a container that failed to start (podman: state Created): remove it, so
  # nothing is left behind and a retry starts from a clean name.
  "$CLI" rm -f "$NEW_NAME" >/dev/null 2>&1
  return $rc
}

# The image the container runs, as the runtime reports it (name@sha256:… when started by digest).
running_image() { # NAME
  "$CLI" inspect -f '{{.Config.Image}}' "$1" 2>/dev/null | head -n 1
}

# Why a container stopped: its exit code and the tail of its log (best effort).
exit_reason() { # NAME
  code=$("$CLI" inspect -f '{{.State.ExitCode}}' "$1" 2>/dev/null | head -n 1)
  logs=$("$CLI" logs --tail 5 "$1" 2>&1 | tail -n 5 | tr '\n' ' ')
  printf 'exit code %s%s' "${code:-?}" "${logs:+; last log lines: $logs}"
}

# The URL to probe: as given, or its port and path at the new container's address.
probe_url() {
  [ "$HEALTH_TARGET" = container ] || {
    printf '%s' "$URL"
    return 0
  }
  ip=$("$CLI" inspect -f '{{.NetworkSettings.IPAddress}}' "$NEW_NAME" 2>/dev/null | head -n 1)
  [ -n "$ip" ] || return 1
  scheme="${URL%%://*}"
  rest="${URL#*://}"
  hostport="${rest%%/*}"
  path="/${rest#*/}"
  [ "$rest" = "$hostport" ] && path="/"
  case "$hostport" in
    \[*\]:*) port="${hostport##*]:}" ;;
    \[*) port="" ;;
    *:*) port="${hostport##*:}" ;;
    *) port="" ;;
  esac
  printf '%s://%s%s%s' "$scheme" "$ip" "${port:+:$port}" "$path"
}

# One probe. Keeps the answer's HTTP status in HTTP_CODE, its body in $OUT.body (the excerpt a
# failed health check reports) and its headers in $OUT.head; non-zero unless the status is 2xx.
health_probe() { # URL
  HTTP_CODE=""
  : >"$OUT.body"
  : >"$OUT.head"
  if command -v curl >/dev/null 2>&1; then
    HTTP_CODE=$(curl -sS -o "$OUT.body" -D "$OUT.head" -w '%{http_code}' --max-time 5 "$1" 2>"$OUT")
    rc=$?
    [ $rc -eq 0 ] || return $rc
  else
    # wget (busybox too) keeps no status portably (-S prints the headers, indented, on stderr):
    # the message says what it printed.
    wget -q -S -O "$OUT.body" -T 5 "$1" 2>"$OUT.head" >"$OUT"
    rc=$?
    [ $rc -eq 0 ] || cp "$OUT.head" "$OUT" 2>/dev/null
    return $rc
  fi
  case "$HTTP_CODE" in
    2??) return 0 ;;
    ???) printf 'HTTP %s\n' "$HTTP_CODE" >"$OUT" ;;
  esac
  return 22
}

# 0 when the last answer carries instance id ID: a Baton-Instance-Id header with exactly that
# value, or the id anywhere in the body. ID is hex, so it is matched as it is.
answer_has_id() { # ID
  grep -qF -- "$1" "$OUT.body" 2>/dev/null && return 0
  tr -d '\r' <"$OUT.head" 2>/dev/null | grep -qiE "^[[:space:]]*baton-instance-id:[[:space:]]*$1[[:space:]]*\$"
}

# The body excerpt of the last probe for JSON: its first 2 KiB, control characters dropped
# (newlines and tabs become spaces), \ and " escaped.
body_excerpt() {
  head -c 2048 "$OUT.body" 2>/dev/null | tr '\n\t\r' '   ' | tr -d '\000-\037\177' |
    sed -e 's/\\/\\\\/g' -e 's/"/\\"/g'
}

# Probes until the health URL answers 2xx or the deadline passes: the first probe at once, the
# next after BATON_HEALTH_INTERVAL_S, each later wait twice the one before up to
# BATON_HEALTH_INTERVAL_MAX_S (a model that loads for minutes costs a probe every few seconds,
# not several a second), and never past the deadline: the last probe is made at it.
phase_health() {
  deadline=$(($(now_ms) + HEALTH_TIMEOUT * 1000))
  wait_ms=$INTERVAL_MS
  tries=0
  # The id the answer must carry (identity): read once, it is the container's for its lifetime.
  ID=""
  HTTP_CODE="" # unset until a probe is made (container mode with no address makes none)
  [ "$HEALTH_TARGET" = identity ] && ID=$(instance_id "$NEW_NAME")
  while :; do
    tries=$((tries + 1))
    # A new container that has stopped can never become healthy: fail now, with its reason,
    # instead of waiting out the deadline (or passing on an old container's answer).
    if [ "$sub" != smoke ] && ! is_running "$NEW_NAME"; then
      MSG="$NEW_NAME is not running (it exited before answering $URL): $(exit_reason "$NEW_NAME")"
      return 1
    fi
    if [ "$HEALTH_TARGET" = identity ] && [ -z "$ID" ]; then
      MSG="cannot tell an answer of $NEW_NAME from another container's on $URL: it has no instance id (label baton.instance_id; a container started by hand or by an earlier deploy.sh has none, or it does not exist); remove it and deploy again, or see BATON_HEALTH_TARGET in docs/runner.md"
      return 1
    fi
    OTHER=0
    if target=$(probe_url); then
      health_probe "$target"
      rc=$?
      if [ $rc -eq 0 ] && [ -n "$ID" ] && ! answer_has_id "$ID"; then
        # A 2xx that is not the new container's (or a server that does not echo the id).
        OTHER=1 rc=21
        printf '%s answered %s without the instance id %s of %s\n' "$target" "${HTTP_CODE:-2xx}" "$ID" "$NEW_NAME" >"$OUT"
      fi
    else
      printf 'no address for %s\n' "$NEW_NAME" >"$OUT"
      rc=1
    fi
    if [ $rc -eq 0 ]; then
      MSG="$target healthy after $tries probe(s)"
      [ -z "$ID" ] || MSG="$MSG, answered with instance id $ID"
      [ "$target" = "$URL" ] || MSG="$MSG (container $NEW_NAME for $URL)"
      IMG_NOW=$(running_image "$NEW_NAME")
      return 0
    fi
    now=$(now_ms)
    if [ "$now" -ge "$deadline" ]; then
      MSG="${target:-$URL} not healthy within ${HEALTH_TIMEOUT}s ($tries probes): $(last_line)"
      case "$HTTP_CODE" in
        [1-9]??)
          BODY=$(body_excerpt)
          MSG="${target:-$URL} not healthy within ${HEALTH_TIMEOUT}s ($tries probes): $HTTP_CODE: $BODY"
          HEALTH_EXTRA=$(printf ',"http_status":%s,"body":"%s"' "$HTTP_CODE" "$BODY")
          ;;
      esac
      if [ "$OTHER" = 1 ]; then
        MSG="$target answered ${HTTP_CODE:-2xx} without the instance id $ID of $NEW_NAME ($tries probes within ${HEALTH_TIMEOUT}s): another container answers on this port (host networking: the old one), or the server does not echo BATON_INSTANCE_ID (docs/runner.md); its body: $(body_excerpt)"
      fi
      return $rc
    fi
    [ $((now + wait_ms)) -le "$deadline" ] || wait_ms=$((deadline - now))
    ms=$((wait_ms % 1000 + 1000)) # seconds with three decimals, e.g. 1.250, without a subshell
    sleep "$((wait_ms / 1000)).${ms#1}"
    wait_ms=$((wait_ms * 2))
    [ "$wait_ms" -le "$INTERVAL_MAX_MS" ] || wait_ms=$INTERVAL_MAX_MS
  done
}

# After a failed health check: removes the new container when this operation started it (its
# label baton.operation_key is this key), and marks the start undone in the ledger so that a
# retry with the same key starts it again. A container found running is left alone.
drop_unhealthy() {
  [ "$(label_of "$NEW_NAME" baton.operation_key)" = "$KEY" ] || return 0
  if "$CLI" rm -f "$NEW_NAME" >/dev/null 2>&1; then
    ledger_put start -
    MSG="$MSG; removed $NEW_NAME (this step started it)"
  else
    MSG="$MSG; could not remove $NEW_NAME"
  fi
}

phase_stop_old() {
  if [ -z "$PREV" ] || [ "$PREV" = "$IMAGE" ]; then
    MSG="no previous image to stop"
    return 3 # 3 = skipped
  fi
  old=$(container_name "$PREV")
  if ! is_running "$old"; then
    MSG="$old not running"
    return 0
  fi
  "$CLI" stop "$old" >"$OUT" 2>&1
  rc=$?
  [ $rc -eq 0 ] && MSG="stopped $old" || MSG="stop failed: $(last_line)"
  return $rc
}

phase_running() {
  if is_running "$NEW_NAME"; then
    MSG="$NEW_NAME running"
    IMG_NOW=$(running_image "$NEW_NAME")
    return 0
  fi
  MSG="$NEW_NAME is not running"
  return 1
}

FAILED=0
# run_phase NAME FUNCTION: prints one JSON line; after a failure prints not_run.
run_phase() {
  if [ "$FAILED" = 1 ]; then
    emit "$1" not_run null 0 "an earlier phase failed"
    return
  fi
  if [ "$sub" != smoke ]; then
    recorded=$(ledger_get "$1")
    if [ -n "$recorded" ]; then
      printf '%s\n' "$recorded" | sed 's/}$/,"replayed":true}/'
      return
    fi
  fi
  MSG="" IMG_NOW="" HEALTH_EXTRA=""
  t0=$(now_ms)
  "$2"
  rc=$?
  dt=$(($(now_ms) - t0))
  if [ $rc -eq 0 ]; then
    line=$(emit "$1" ok 0 "$dt" "$MSG" "$IMG_NOW")
  elif [ $rc -eq 3 ] && [ "$1" = stop-old ]; then
    line=$(emit "$1" skipped 0 "$dt" "$MSG")
  else
    FAILED=1
    [ "$1" != health ] || [ "$sub" = smoke ] || drop_unhealthy
    emit "$1" failed "$rc" "$dt" "$MSG" "" "$HEALTH_EXTRA"
    return
  fi
  [ "$sub" = smoke ] || ledger_put "$1" "$line"
  printf '%s\n' "$line"
}

if [ "$sub" != smoke ]; then
  if ! lane_lock; then
    if [ "${LOCK_NOLINK:-0}" = 1 ]; then
      emit lock failed 2 0 "[deploy.sh] cannot create the lane lock $LOCK with ln as $(id -un); keep the ledger on a local file system that supports hard links (docs/runner.md)"
      exit 2
    fi
    emit lock failed 1 0 "[deploy.sh] lane $LANE is busy: another deploy/restore (pid ${LOCK_OWNER:-?}) held $LOCK for more than ${LOCK_WAIT}s; retry the step when it has finished"
    exit 1
  fi
  # Ledger first, then fence. A key whose phases are all recorded is a replay: it does nothing
  # new, so it gets its recorded answer even from an old generation (refusing it would report as
  # failed a write that did happen, and the engine would lose that it took effect). Anything not
  # yet recorded would be a NEW effect on the lane, and from an older generation than one the lane
  # already obeyed that is exactly the stale writer rule 7 must stop. Both checks and the phases
  # run under the lane lock, so no newer writer can slip in between the check and the effect.
  if [ -n "$RELEASE" ] && ! ledger_has_all; then
    # Fail closed: a record that cannot be read or written would silently turn the fence off.
    if ! seen=$(gen_seen); then
      emit fence failed 2 0 "[deploy.sh] cannot read $(gen_file) as $(id -un); the generation fence needs it to be a readable file next to the ledger (docs/runner.md)"
      exit 2
    fi
    if [ -n "$seen" ] && [ "$GEN" -lt "$seen" ]; then
      emit fence refused 3 0 "[deploy.sh] release $RELEASE generation $GEN is stale: lane $LANE already took generation $seen of it (the release was aborted or is compensating); nothing was done. Do not retry this step run: the newer generation's steps own this lane"
      exit 3
    fi
    if [ "$seen" != "$GEN" ] && ! gen_record; then
      rm -f "$(gen_file).tmp.$$"
      emit fence failed 2 0 "[deploy.sh] cannot write $(gen_file) as $(id -un); the generation fence needs it writable next to the ledger (docs/runner.md)"
      exit 2
    fi
  fi
fi

if [ "$sub" = smoke ]; then
  case "$ONLY" in '' | running | health) ;; *) usage_fail "--phase must be running or health for smoke" ;; esac
  { [ -z "$ONLY" ] || [ "$ONLY" = running ]; } && run_phase running phase_running
  { [ -z "$ONLY" ] || [ "$ONLY" = health ]; } && run_phase health phase_health
else
  for p in pull start health stop-old; do
    [ -z "$ONLY" ] || [ "$ONLY" = "$p" ] || continue
    case "$p" in
      pull) run_phase pull phase_pull ;;
      start) run_phase start phase_start ;;
      health) run_phase health phase_health ;;
      stop-old) run_phase stop-old phase_stop_old ;;
    esac
  done
fi
exit "$FAILED"
