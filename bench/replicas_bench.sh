#!/usr/bin/env bash
# The PostgreSQL store against SQLite, side by side in one run (issue 27; docs/SERVICE.md):
#   1. Predict throughput of one replica on a SQLite store and one on a PostgreSQL store
#      (Predict reads no store: the target is >= 90%), alternated ROUNDS times, same load.
#   2. Predict beside 8 ReportRun writers against the same alone, on each store (the read path
#      never blocked by writes: the target is >= 80%, as on SQLite).
#   3. ReportRun throughput: 8 writers on the single SQLite server, then 8 writers over two
#      replicas on one PostgreSQL (each report its own request id, inline job).
# PostgreSQL is a throwaway server in a temporary directory (tests/pg_server.sh; fsync and
# synchronous_commit on, as Debian configures it), on the same machine.
#   bench/replicas_bench.sh [predict_threads] [seconds] [rounds]     (after scripts/setup.sh
#   and scripts/setup_test_deps.sh; CPUS=0,1 pins servers and clients to those cores)
set -eu
cd "$(dirname "$0")/.."
threads="${1:-8}"; seconds="${2:-5}"; rounds="${3:-2}"
bin="${STEPCAST:-build/bin/stepcast}"; pin=(); [ -n "${CPUS:-}" ] && pin=(taskset -c "$CPUS")
job=examples/llama3-70b-h100.yaml
work=$(mktemp -d /tmp/stepcast-rbench.XXXXXX); chmod 711 "$work"; mkdir -p "$work/pg"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; bash tests/pg_server.sh stop "$work/pg" >/dev/null 2>&1; rm -rf "$work"' EXIT
uri=$(bash tests/pg_server.sh start "$work/pg" $$)
serve() {  # serve NAME STORE: a server on a free port; its address in addr_NAME (not in a
           # subshell: the EXIT trap stops what pids holds)
  "${pin[@]}" "$bin" serve --listen 127.0.0.1:0 --store "$2" --port-file "$work/port.$1" --quiet \
    >"$work/serve.$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$work/port.$1" ] && break; sleep 0.1; done
  eval "addr_$1=127.0.0.1:$(cat "$work/port.$1")"
}
# service_load runs health, predict and preflight in turn where it knows --rpcs: Predict only.
rpcs=(); build/bin/service_load --help 2>&1 | grep -q -- --rpcs && rpcs=(--rpcs predict)
load() { "${pin[@]}" build/bin/service_load "${rpcs[@]}" --threads "$threads" --seconds "$seconds" --job "$job" "$@"; }
rate() { sed -n 's/.*requests [0-9]* in [0-9.]* s: \([0-9]*\) req\/s.*/\1/p' | head -1; }
serve sqlite "$work/bench.db"; serve pga "$uri"; serve pgb "$uri"
S=$addr_sqlite; A=$addr_pga; B=$addr_pgb
echo "machine: $(nproc) cores${CPUS:+ (pinned to $CPUS)}, $(lscpu | sed -n 's/^Model name: *//p'); $(psql -X -A -t -q "$uri" -c 'SHOW server_version')"
echo "== Predict, $threads client threads, $seconds s per round (req/s)"
sq=(); pg=()
for r in $(seq "$rounds"); do
  s=$(load --server "$S" | rate)
  p=$(load --server "$A" | rate)
  echo "round $r: sqlite $s, postgresql $p"
  sq+=("$s"); pg+=("$p")
done
python3 -c "import sys; s=[float(x) for x in sys.argv[1].split()]; p=[float(x) for x in sys.argv[2].split()]; print(f'Predict on the PostgreSQL replica: {sum(p)/len(p):.0f} req/s = {100*sum(p)/sum(s):.1f}% of the SQLite one ({sum(s)/len(s):.0f} req/s)')" "${sq[*]}" "${pg[*]}"
echo "== Predict beside 8 ReportRun writers (service_load --writers 8), each store after its alone run"
for name in sqlite postgresql; do
  addr=$S; [ $name = postgresql ] && addr=$A
  alone=$(load --server "$addr" | rate)
  out=$(load --server "$addr" --writers 8)
  beside=$(rate <<<"$out"); w=$(sed -n 's/.*writers: \([0-9]*\) writes\/s.*/\1/p' <<<"$out")
  python3 -c "import sys; a,b=float(sys.argv[2]),float(sys.argv[3]); print(f'{sys.argv[1]}: {a:.0f} req/s alone, {b:.0f} beside {sys.argv[4]} writes/s ({100*b/a:.0f}%)')" $name "$alone" "$beside" "$w"
done
echo "== ReportRun, 8 writers, $seconds s"
echo -n "single SQLite server:       "; "${pin[@]}" build/bin/report_writers --servers "$S" --writers 8 --seconds "$seconds" --job "$job" | head -1
echo -n "2 replicas on PostgreSQL:   "; "${pin[@]}" build/bin/report_writers --servers "$A,$B" --writers 8 --seconds "$seconds" --job "$job" | head -1
echo -n "1 replica on PostgreSQL:    "; "${pin[@]}" build/bin/report_writers --servers "$A" --writers 8 --seconds "$seconds" --job "$job" | head -1
