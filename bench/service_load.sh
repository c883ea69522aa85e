#!/usr/bin/env bash
# Predict throughput and latency of `stepcast serve` on loopback, server and load client on the
# same machine. Usage: bench/service_load.sh [threads] [seconds] [writers] [searchers]
# (after scripts/setup.sh). writers > 0: that many threads issue ReportRun (store writes) beside
# the Predict load; searchers > 0: that many threads each keep a maximal Search in flight.
# CPUS=0,1 pins the server and the load client to those cores (taskset), e.g. to measure a
# 2-core machine's figures on a larger one.
set -eu
cd "$(dirname "$0")/.."
threads="${1:-8}"; seconds="${2:-10}"; writers="${3:-0}"; searchers="${4:-0}"
pin=(); [ -n "${CPUS:-}" ] && pin=(taskset -c "$CPUS")
work=$(mktemp -d)
"${pin[@]}" "${STEPCAST:-build/bin/stepcast}" serve --listen 127.0.0.1:0 --db "$work/bench.db" --port-file "$work/port" \
  2>"$work/rpc.log" >/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
echo "machine: $(nproc) cores${CPUS:+ (server and client pinned to cores $CPUS)}, $(lscpu | sed -n 's/^Model name: *//p'); server logs one line per RPC to a file"
"${pin[@]}" build/bin/service_load --server "127.0.0.1:$(cat "$work/port")" --threads "$threads" --seconds "$seconds" \
  --job examples/llama3-70b-h100.yaml --writers "$writers" --searchers "$searchers"
echo "server log lines: $(wc -l < "$work/rpc.log")"
