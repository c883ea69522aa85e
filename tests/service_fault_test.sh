#!/usr/bin/env bash
# Fault test of `stepcast serve` (reliability review H1, L1): a burst of idle TCP connections up
# to the process's open-file limit, then kill -9 under concurrent writers. Before the fix the listener never accepted again (gRPC 1.51
# does not re-arm it after accept4 fails with EMFILE); now the watchdog rebuilds it and the
# service answers again within seconds after the burst ends.
#   usage: STEPCAST=build/bin/stepcast tests/service_fault_test.sh SOURCE_DIR
set -euo pipefail
SRC=${1:?source dir}
S=${STEPCAST:?path to stepcast}
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# A low fd limit (soft and hard) so that 400 connections reach it.
( ulimit -n 256; exec "$S" serve --listen 127.0.0.1:0 --db "$tmp/x.db" --port-file "$tmp/port" --quiet \
    --watchdog-ms 500 ) > "$tmp/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
job="$SRC/examples/llama3-70b-h100.yaml"

# Exit 0/3/4 is a verdict (PASS/WARN/FAIL); 1 is "unreachable".
answers() {
  local rc=0
  "$S" preflight "$job" --server "127.0.0.1:$port" --deadline-ms "$1" > /dev/null 2>&1 || rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 3 ] || [ $rc -eq 4 ]
}
answers 3000 || { echo "FAIL: no answer before the burst"; cat "$tmp/serve.log"; exit 1; }

# The burst: 400 idle connections (no handshake), held 3 s, then closed.
python3 - "$port" <<'PY'
import socket, sys, time
port = int(sys.argv[1]); held = []
for _ in range(400):
    try:
        s = socket.socket(); s.settimeout(1); s.connect(("127.0.0.1", port)); held.append(s)
    except OSError:
        break
print(f"burst: {len(held)} connections held", flush=True)
time.sleep(3)
for s in held: s.close()
PY
t0=$(date +%s.%N)
ok=0
for _ in $(seq 30); do
  if answers 1000; then ok=1; break; fi
  sleep 0.5
done
t1=$(date +%s.%N)
recovery=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
if [ $ok -ne 1 ]; then
  echo "FAIL: the service did not answer within 30 tries after the burst"; cat "$tmp/serve.log"; exit 1
fi
echo "connection burst: answered again ${recovery} s after the burst ended"
grep -h "listener" "$tmp/serve.log" || true
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""

# kill -9 under concurrent writers with idempotent retries: 4 writers each report 12 runs, each
# retried with the same --request-id until acknowledged, while the server is killed with SIGKILL
# and restarted on the same port every 0.7 s. Then every acknowledged report is stored exactly
# once (0 lost, 0 duplicated).
start_server() {
  "$S" serve --listen "127.0.0.1:$port" --db "$tmp/k.db" --quiet > "$tmp/k.log" 2>&1 &
  pid=$!
}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_server
for _ in $(seq 50); do answers 500 && break; sleep 0.1; done
: > "$tmp/acked"
writer() {
  local w=$1
  for i in $(seq 12); do
    for _ in $(seq 200); do
      if "$S" report --server "127.0.0.1:$port" --job "$job" --step-time-s 15 --label "w=$w-$i" \
           --request-id "w$w-r$i" --deadline-ms 2000 > /dev/null 2>&1; then
        echo "$w-$i" >> "$tmp/acked"; break
      fi
      sleep 0.1
    done
  done
}
for w in 1 2 3 4; do writer $w & done
writers_done() { [ "$(wc -l < "$tmp/acked" 2>/dev/null || echo 0)" -ge 48 ]; }
kills=0
for _ in $(seq 120); do
  writers_done && break
  sleep 0.7
  kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  kills=$((kills + 1))
  start_server
done
wait_writers=0
for _ in $(seq 300); do writers_done && break; sleep 0.1; done
for _ in $(seq 50); do answers 500 && break; sleep 0.1; done
"$S" runs --server "127.0.0.1:$port" --all --page-size 1000 --json > "$tmp/runs.json"
python3 - "$tmp/runs.json" "$tmp/acked" "$kills" <<'PY'
import json, sys, collections
runs = json.load(open(sys.argv[1])).get("runs", [])
acked = set(open(sys.argv[2]).read().split())
labels = collections.Counter(r.get("labels", {}).get("w") for r in runs)
lost = [a for a in acked if labels[a] == 0]
dups = {k: n for k, n in labels.items() if n > 1}
print(f"kill -9: {sys.argv[3]} kills, {len(acked)} acknowledged, {len(runs)} stored, "
      f"{len(lost)} lost, {sum(n - 1 for n in dups.values())} duplicated")
sys.exit(1 if lost or dups or len(acked) < 48 else 0)
PY
echo "PASS"
