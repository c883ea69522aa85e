#!/usr/bin/env bash
# Throughput and latency of `stepcast serve` on loopback, server and load client on the same
# machine: the empty RPC (gRPC health check), Predict and Preflight one after the other in the
# same run, so Predict and Preflight read as a ratio to the empty RPC.
# Usage: bench/service_load.sh [threads] [seconds] [writers] [searchers] [rounds]   (after scripts/setup.sh)
# writers > 0: that many threads issue ReportRun (store writes) beside the Predict load;
# searchers > 0: that many threads each keep a maximal Search in flight beside the Predict load.
# STEPCAST=path/to/stepcast picks the server binary (default build/bin/stepcast), SERVICE_LOAD the
# load client (default build/bin/service_load); RPCS=predict
# (or any comma-separated subset of health,predict,preflight) picks the kinds; SERVE_ARGS adds
# flags to `stepcast serve` (default --watchdog-ms 0, below); KEEP_LOG=FILE keeps the server's log.
# CPUS=0,1 pins the server and the load client to those cores (taskset), e.g. to measure a
# 2-core machine's figures on a larger one. PERF=PREFIX also records perf call graphs of the
# server and the load client for 4 s of the first kind's measurement (PREFIX.server.data,
# PREFIX.client.data; docs/PERFORMANCE.md "Issue 30, third pass").
set -eu
cd "$(dirname "$0")/.."
threads="${1:-8}"; seconds="${2:-10}"; writers="${3:-0}"; searchers="${4:-0}"; rounds="${5:-1}"
stepcast="${STEPCAST:-build/bin/stepcast}"
pin=(); [ -n "${CPUS:-}" ] && pin=(taskset -c "$CPUS")
work=$(mktemp -d)
# --watchdog-ms 0: before review 2's N2 fix, 8 Preflight clients (each a layout search, ~100 ms of
# CPU) saturated both cores, the watchdog's accept probe missed its 200 ms three times and it rebuilt
# the listener, and every later call on the clients' channels failed CANCELLED. Since that fix
# (busy handlers are not a dead listener) it no longer happens: 2026-11-28, 8 Preflight then 8
# Predict clients for 20 s each beside three busy loops, and 2 rounds of all three kinds, with the
# watchdog on: no rebuild, 0 errors (docs/PERFORMANCE.md "Issue 30, fourth pass"). The watchdog
# does nothing per request; it stays off here so that the figures compare with the earlier ones.
"${pin[@]}" "$stepcast" serve --listen 127.0.0.1:0 --db "$work/bench.db" --port-file "$work/port" ${SERVE_ARGS:---watchdog-ms 0} \
  2>"$work/rpc.log" >/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null; [ -n "${KEEP_LOG:-}" ] && cp "$work/rpc.log" "$KEEP_LOG"; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
echo "machine: $(nproc) cores${CPUS:+ (server and client pinned to cores $CPUS)}, $(lscpu | sed -n 's/^Model name: *//p'); load average: $(cut -d' ' -f1-3 /proc/loadavg); server $stepcast logs one line per RPC to a file"
"${pin[@]}" "${SERVICE_LOAD:-build/bin/service_load}" --server "127.0.0.1:$(cat "$work/port")" --threads "$threads" --seconds "$seconds" \
  --job examples/llama3-70b-h100.yaml --writers "$writers" --searchers "$searchers" --rounds "$rounds" \
  --rpcs "${RPCS:-health,predict,preflight}" --server-pid "$pid" &
client=$!
if [ -n "${PERF:-}" ]; then
  # 3 s in (past the first kind's 2 s warm-up), 4 s of call graphs of the server and of the load
  # client: $PERF.server.data and $PERF.client.data (perf report -i ...). Sampling costs both a few %.
  sleep 3
  perf record -q -F 999 --call-graph dwarf,16384 -o "$PERF.server.data" -p "$pid" -- sleep 4 >/dev/null 2>&1 &
  perf record -q -F 999 --call-graph dwarf,16384 -o "$PERF.client.data" -p "$client" -- sleep 4 >/dev/null 2>&1 &
fi
wait "$client"
echo "server log lines: $(wc -l < "$work/rpc.log"); server CPU: $(ps -o times= -p $pid) s; server peak RSS: $(sed -n 's/^VmHWM:[[:space:]]*//p' /proc/$pid/status)"
