#!/usr/bin/env bash
# The README's first command: installs the local demo services (searx over Debian's Python and
# PostgreSQL documentation, and the small Qwen2.5-Coder-0.5B model), then researches a question
# with `quarry run` and prints the report. Everything runs on 127.0.0.1; no API key needed.
#
# Usage: scripts/demo.sh [--keep] ["your question"]
#        scripts/demo.sh --stop
#
#   --keep  leave the demo services (docs server, searx, model server) running in the background
#           when done: their pid goes to .work/demo-services.pid, their log to
#           .work/demo-services.log. While they run, every scripts/demo.sh "another question"
#           reuses them: no installs, no model load, straight to `quarry run`.
#   --stop  stop the services left running by --keep.
# Without --keep (and with none left running), the services stop when the script ends.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
work="$repo/.work"
pidfile="$work/demo-services.pid"
profile="$work/demo-profile.yaml"
log="$work/demo-services.log"
report="$work/demo-report.md"

usage() { sed -n '6,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

keep=0
stop=0
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1; shift ;;
    --stop) stop=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) echo "scripts/demo.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) break ;;
  esac
done
question="${1:-How do I decode JSON with the json module in Python?}"
mkdir -p "$work"

# The pid of the services a --keep run left running, if they are still up (and the pid was not
# reused by another program since).
kept_pid() {
  local pid
  pid="$(cat "$pidfile" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q demo-services || return 1
  echo "$pid"
}

# Interrupts demo-services (it stops searx, the docs server and the model server on the way out)
# and waits up to 30 s for it to go.
stop_services() {
  local pid="$1"
  kill -INT "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 30); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 1
  done
  echo "demo services (pid $pid) did not stop within 30 s; sending SIGTERM" >&2
  kill -TERM "$pid" 2>/dev/null || true
}

if [ "$stop" = 1 ]; then
  if pid="$(kept_pid)"; then
    echo "==> stopping the demo services (pid $pid)"
    stop_services "$pid"
  else
    echo "==> no demo services running"
  fi
  rm -f "$pidfile" "$profile"
  exit 0
fi

bin="${CARGO_TARGET_DIR:-$repo/target}/debug"
services=""      # demo-services started by this run
leave_running=0  # 1 once --keep's services are ready: they outlive the script
tailer=""
cleanup() {
  if [ -n "$tailer" ]; then kill "$tailer" 2>/dev/null || true; fi
  if [ -n "$services" ] && [ "$leave_running" = 0 ]; then
    stop_services "$services"
    wait "$services" 2>/dev/null || true
    if [ "$keep" = 1 ]; then rm -f "$pidfile"; fi
  fi
}
trap cleanup EXIT

if pid="$(kept_pid)" && [ -s "$profile" ]; then
  echo "==> reusing the demo services left running by --keep (pid $pid; stop them with scripts/demo.sh --stop)"
  echo "==> cargo build -p quarry --bin quarry (nothing to do unless the sources changed)"
  cargo build -p quarry --bin quarry
else
  if pid="$(kept_pid)"; then
    echo "==> the demo services (pid $pid) lost their profile $profile; restarting them"
    stop_services "$pid"
    rm -f "$pidfile"
  elif [ -f "$pidfile" ]; then
    echo "==> the demo services recorded in $pidfile are gone; starting new ones"
    rm -f "$pidfile"
  fi
  scripts/install-test-deps.sh --demo
  scripts/install-real-model.sh

  # Cargo's own progress shows. The first build compiles about 390 crates: 5 m 17 s measured on
  # 2 cores that another build was sharing; later builds only recompile what changed.
  echo "==> cargo build (the first build takes about 5 minutes on 2 cores; later ones, seconds to a minute)"
  cargo build -p quarry --bin quarry -p quarry-e2e --bin demo-services

  rm -f "$profile"
  if [ "$keep" = 1 ]; then
    echo "==> starting the demo services in the background (log: $log)"
    # setsid: the services outlive this script and its terminal; they stop with --stop.
    : >"$log"
    setsid "$bin/demo-services" "$profile" >"$log" 2>&1 </dev/null &
    services=$!
    echo "$services" >"$pidfile"
    tail -n +1 -f "$log" &
    tailer=$!
  else
    "$bin/demo-services" "$profile" &
    services=$!
  fi
  waited=0
  until [ -s "$profile" ]; do
    kill -0 "$services" 2>/dev/null || { echo "demo services failed to start" >&2; exit 1; }
    if [ "$waited" -ge 600 ]; then
      echo "demo services did not become ready within 600 s" >&2
      exit 1
    fi
    sleep 1
    waited=$((waited + 1))
    if [ $((waited % 15)) = 0 ]; then
      echo "==> still starting the demo services (${waited} s)"
    fi
  done
  if [ -n "$tailer" ]; then
    sleep 1 # let tail print the "ready" line
    kill "$tailer" 2>/dev/null || true
    tailer=""
  fi
  echo "==> demo services ready after ${waited} s"
  if [ "$keep" = 1 ]; then leave_running=1; fi
fi

rm -f "$report"
echo "==> quarry run \"$question\""
echo "    (the 0.5B model takes 15 to 30 s on 2 idle cores, longer when they are busy;"
echo "     quarry prints a line at least every 15 s)"
started=$SECONDS
status=0
# The demo's model, search and pages are on 127.0.0.1, which the egress guard refuses unless the
# operator (here: whoever runs quarry) exempts it.
"$bin/quarry" run "$question" --mode quick --profile "$profile" --out "$report" --timeout 30m \
  --egress-exempt-hosts 127.0.0.1 || status=$?
took=$((SECONDS - started))
echo
# A run that found nothing relevant still writes its short "unable to research" report.
if [ -s "$report" ]; then cat "$report"; fi
echo
echo "==> quarry run took $((took / 60)) m $((took % 60)) s (exit status $status)"
if pid="$(kept_pid)"; then
  echo "==> the demo services are still running (pid $pid): ask again with scripts/demo.sh \"another question\"; stop them with scripts/demo.sh --stop"
fi
echo "==> quarry itself is $bin/quarry; to type just \`quarry\`: export PATH=\"$bin:\$PATH\""
exit "$status"
