#!/usr/bin/env bash
# Two `stepcast serve` replicas on one PostgreSQL store (issue 27), on loopback, on a server this
# test starts itself (tests/pg_server.sh). Exit 77 (skipped) without PostgreSQL's binaries.
#   1. What one replica stores the other serves: a report (runs, GetRun, compare run:<id>), a
#      Preflight prediction reported against on the other, a profile put on one and used by the
#      other's Preflight.
#   2. kill -9 of a replica every KILL_EVERY_S (default 1 s; the issue asks every 2 s) while 8
#      writers report through both (each report retried
#      with its request id on the other replica until acknowledged): every acknowledged report
#      is stored, none twice.
#   3. PostgreSQL restarted twice under the same load: calls fail UNAVAILABLE naming the store
#      while it is down, the replicas reconnect by themselves; nothing lost, nothing doubled.
#   4. `stepcast store migrate` copies a SQLite store in, and a second run copies nothing.
# Every wait is bounded. REPORTS (default 2000) sets the reports of phases 2 and 3.
set -u
root="$1"; bin="${STEPCAST:?}"; writers_bin="${REPORT_WRITERS:?}"
reports="${REPORTS:-2000}"
work=$(mktemp -d /tmp/stepcast-replicas.XXXXXX); fail=0
pids=()
pg() { bash "$root/tests/pg_server.sh" "$@"; }
cleanup() {
  for p in "${pids[@]}" ${pa:-} ${pb:-} ${killer:-}; do kill -9 "$p" 2>/dev/null; done
  pg stop "$work/pg" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

chmod 711 "$work"  # as root the server runs as postgres, which must reach $work/pg
mkdir -p "$work/pg"
uri=$(pg start "$work/pg" $$); rc=$?
[ $rc -eq 77 ] && { echo "SKIP: PostgreSQL server binaries not installed (scripts/setup_test_deps.sh)"; exit 77; }
[ $rc -eq 0 ] || { echo "FAIL pg_server.sh start ($rc)"; exit 1; }
q() { psql -X -A -t -q "$uri" -c "$1"; }
echo "secret-token" > "$work/token"

# start NAME PORT: a replica on 127.0.0.1:PORT (0: a free one); sets pid_NAME and port_NAME.
start() {
  local name=$1 port=$2
  rm -f "$work/port.$name"
  "$bin" serve --listen "127.0.0.1:$port" --store "$uri" --store-connections 4 --port-file "$work/port.$name" \
    --token-file "$work/token" --quiet >>"$work/serve.$name.log" 2>&1 &
  eval "pid_$name=$!"
  for _ in $(seq 100); do [ -s "$work/port.$name" ] && break; sleep 0.1; done
  [ -s "$work/port.$name" ] || { bad "replica $name did not start"; cat "$work/serve.$name.log"; exit 1; }
  eval "port_$name=$(cat "$work/port.$name")"
}
start a 0; start b 0
pa=$pid_a; pb=$pid_b
A="127.0.0.1:$port_a"; B="127.0.0.1:$port_b"
grep -q "store postgresql://postgres@/postgres?host=" "$work/serve.a.log" && ok "serve names the PostgreSQL store" \
  || { bad "serve's store line"; cat "$work/serve.a.log"; }

# 1. One store behind both.
# A measured breakdown, so that the run has something to compare per category.
printf '{"gemm_s": 9.5, "attention_s": 1.2, "elementwise_s": 1.0, "tp_comm_s": 1.5}\n' > "$work/measured.json"
out=$("$bin" report --server "$A" --token-file "$work/token" --job "$root/examples/llama3-70b-h100.yaml" \
      --step-time-s 15 --measured-breakdown "$work/measured.json" --label via=a); rc=$?
run=$(grep -o 'run-[0-9a-f]*' <<<"$out" | head -1)
[ $rc -eq 0 ] && [ -n "$run" ] && ok "report on replica A" || { bad "report on A ($rc)"; echo "$out"; }
out=$("$bin" runs --server "$B" --label via=a)
grep -q "$run" <<<"$out" && ok "ListRuns on replica B shows A's run" || { bad "ListRuns on B"; echo "$out"; }
out=$("$bin" compare "run:$run" --server "$B"); rc=$?
[ $rc -eq 0 ] && grep -q "largest difference" <<<"$out" && ok "GetRun + compare run:<id> on B" || { bad "compare on B ($rc)"; echo "$out"; }
out=$("$bin" preflight "$root/examples/llama3-70b-h100.yaml" --server "$A"); rc=$?
pred=$(grep -o 'pred-[0-9a-f]*' <<<"$out" | head -1)
[ -n "$pred" ] || bad "preflight on A gave no prediction id"
stored=""
for _ in $(seq 50); do  # A's writer thread stores it within milliseconds
  [ "$(q "SELECT count(*) FROM predictions WHERE id = '$pred'")" = "1" ] && { stored=1; break; }; sleep 0.1
done
out=$("$bin" report --server "$B" --token-file "$work/token" --prediction-id "$pred" --step-time-s 14); rc=$?
[ -n "$stored" ] && [ $rc -eq 0 ] && ok "a prediction made on A is reported against on B" || { bad "prediction across replicas ($rc)"; echo "$out"; }
cat > "$work/prof.yaml" <<'YAML'
name: shared-cluster
hbm_bandwidth_bytes_per_s: 2.9e12
gemm:
  - {dtype: bf16, flops_per_s: 6.0e14}
YAML
out=$("$bin" profile put shared-cluster "$work/prof.yaml" --server "$A" --token-file "$work/token"); rc=$?
[ $rc -eq 0 ] && ok "profile put on A" || { bad "profile put on A ($rc)"; echo "$out"; }
out=$("$bin" profile get shared-cluster --server "$B"); rc=$?
[ $rc -eq 0 ] && grep -q "2.9e+12\|2900000000000\|2.9e12" <<<"$out" && ok "profile get on B" || { bad "profile get on B ($rc)"; echo "$out"; }
"$bin" preflight "$root/examples/llama3-70b-h100.yaml" --server "$B" --profile shared-cluster >/dev/null 2>&1; rc=$?
[ $rc -eq 0 ] || [ $rc -eq 3 ] || [ $rc -eq 4 ] && ok "preflight on B with A's profile" || bad "preflight on B with the profile ($rc)"

# writer_runs: runs the writers stored (they label each run writer=N).
writer_runs() { q "SELECT count(*) FROM run_labels WHERE key = 'writer'"; }
# check NAME ACKLOG BASE: every acknowledged report stored, and the writers' runs grew by exactly
# the reports sent (a report stored twice, by a retry on the other replica, would add more).
check() {
  local name=$1 log=$2 base=$3 want=${4:-$reports} acked missing added
  acked=$(wc -l < "$log")
  cut -d' ' -f2 "$log" | sort -u > "$work/acked_runs"
  q "SELECT id FROM runs" | sort > "$work/stored_runs"
  missing=$(comm -23 "$work/acked_runs" "$work/stored_runs" | wc -l)
  added=$(( $(writer_runs) - base ))
  [ "$acked" -eq "$want" ] && [ "$(wc -l < "$work/acked_runs")" -eq "$want" ] && [ "$missing" -eq 0 ]     && [ "$added" -eq "$want" ] \
    && ok "$name: $acked acknowledged, $added stored, 0 lost, 0 duplicated" \
    || bad "$name: acknowledged $acked of $want, stored $added, acknowledged but missing $missing"
}

# 2. kill -9 of one replica every KILL_EVERY_S (alternating), restarted on its port, during the
#    writes.
# 2x the reports, the first kill after 0.2 s, then every KILL_EVERY_S: a fast machine sent 2,000
# reports in under a second, before the first kill.
base=$(writer_runs)
"$writers_bin" --servers "$A,$B" --writers 8 --reports "$((reports * 2))" --job "$root/examples/llama3-70b-h100.yaml" \
  --token secret-token --ack-log "$work/ack1" --give-up-s 60 > "$work/writers1.out" 2>&1 &
wp=$!; pids+=($wp)
kills=0
pause=0.2
while kill -0 $wp 2>/dev/null; do
  sleep "$pause"; pause="${KILL_EVERY_S:-1}"
  kill -0 $wp 2>/dev/null || break
  if [ $((kills % 2)) -eq 0 ]; then kill -9 "$pid_a"; wait "$pid_a" 2>/dev/null; start a "$port_a"; pa=$pid_a
  else kill -9 "$pid_b"; wait "$pid_b" 2>/dev/null; start b "$port_b"; pb=$pid_b; fi
  kills=$((kills + 1))
done
wait $wp; rc=$?
cat "$work/writers1.out"
echo "     replicas killed with SIGKILL: $kills"
[ $rc -eq 0 ] && [ $kills -ge 1 ] && ok "writers finished through $kills kills" || bad "writers under kill -9 ($rc, $kills kills)"
check "kill -9 every ${KILL_EVERY_S:-1} s" "$work/ack1" "$base" "$((reports * 2))"

# 3. PostgreSQL restarted twice under load. The writers send 5x the reports of part 2, so that
#    they are still writing at the second restart on a fast machine (2,000 reports took 1.7 s on
#    a 16-core one, before the second restart began).
base=$(writer_runs)
"$writers_bin" --servers "$A,$B" --writers 8 --reports "$((reports * 5))" --job "$root/examples/llama3-70b-h100.yaml" \
  --token secret-token --ack-log "$work/ack2" --give-up-s 60 > "$work/writers2.out" 2>&1 &
wp=$!; pids+=($wp)
restarts=0
for _ in 1 2; do
  sleep 0.3
  kill -0 $wp 2>/dev/null || break
  pg stop "$work/pg" || bad "pg stop"
  # While it is down: UNAVAILABLE naming the store, from both replicas.
  for s in "$A" "$B"; do
    out=$("$bin" runs --server "$s" 2>&1); rc=$?
    [ $rc -ne 0 ] && grep -q "UNAVAILABLE\|unreachable\|cannot connect" <<<"$out" && grep -q "store postgresql://" <<<"$out" \
      && ok "database down: $s answers UNAVAILABLE naming the store" || { bad "database down on $s ($rc)"; echo "$out"; }
  done
  sleep 0.5
  pg start "$work/pg" $$ >/dev/null || bad "pg start"
  restarts=$((restarts + 1))
done
wait $wp; rc=$?
cat "$work/writers2.out"
[ $rc -eq 0 ] && [ $restarts -eq 2 ] && ok "writers finished through $restarts database restarts" || bad "writers under database restarts ($rc, $restarts restarts)"
grep -q "code 14" "$work/writers2.out" && ok "writers saw UNAVAILABLE while the database was down" \
  || echo "     (no call failed while the database was down: the writers were between calls)"
check "PostgreSQL restarted twice" "$work/ack2" "$base" "$((reports * 5))"
out=$("$bin" runs --server "$A" --label via=a); rc=$?
[ $rc -eq 0 ] && grep -q "$run" <<<"$out" && ok "replica A serves again without a restart" || { bad "A after the restarts ($rc)"; echo "$out"; }
out=$("$bin" runs --server "$B" --label via=a); rc=$?
[ $rc -eq 0 ] && grep -q "$run" <<<"$out" && ok "replica B serves again without a restart" || { bad "B after the restarts ($rc)"; echo "$out"; }

# 4. store migrate: a SQLite store in, twice.
"$bin" serve --listen 127.0.0.1:0 --store "$work/old.db" --port-file "$work/port.old" --token-file "$work/token" --quiet \
  >"$work/serve.old.log" 2>&1 &
po=$!; pids+=($po)
for _ in $(seq 100); do [ -s "$work/port.old" ] && break; sleep 0.1; done
O="127.0.0.1:$(cat "$work/port.old")"
out=$("$bin" report --server "$O" --token-file "$work/token" --job "$root/examples/llama3-70b-h100.yaml" --step-time-s 16 --label via=sqlite)
orun=$(grep -o 'run-[0-9a-f]*' <<<"$out" | head -1)
"$bin" profile put old-cluster "$work/prof.yaml" --server "$O" --token-file "$work/token" >/dev/null
kill "$po"; wait "$po" 2>/dev/null
out=$("$bin" store migrate --from "sqlite:$work/old.db" --to "$uri"); rc=$?
{ [ $rc -eq 0 ] && grep -q "runs: 1 copied, 0 already there" <<<"$out" && grep -q "profile versions: 1 copied" <<<"$out"; } \
  && ok "store migrate copies a SQLite store" || { bad "store migrate ($rc)"; echo "$out"; }
out=$("$bin" store migrate --from "sqlite:$work/old.db" --to "$uri"); rc=$?
{ [ $rc -eq 0 ] && grep -q "runs: 0 copied, 1 already there" <<<"$out" && grep -q "profile versions: 0 copied, 1 already there" <<<"$out"; } \
  && ok "store migrate again copies nothing twice" || { bad "store migrate again ($rc)"; echo "$out"; }
out=$("$bin" runs --server "$B" --label via=sqlite)
grep -q "$orun" <<<"$out" && ok "the migrated run is served by replica B" || { bad "migrated run on B"; echo "$out"; }

exit $fail
