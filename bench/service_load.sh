#!/usr/bin/env bash
# Throughput and latency of `stepcast serve` on loopback, server and load client on the same
# machine: the empty RPC (gRPC health check), Predict and Preflight one after the other in the
# same run, so Predict and Preflight read as a ratio to the empty RPC.
# Usage: bench/service_load.sh [threads] [seconds] [writers] [rounds]   (after scripts/setup.sh)
# writers > 0: that many threads issue ReportRun (store writes) beside the Predict load.
# STEPCAST=path/to/stepcast picks the server binary (default build/bin/stepcast); RPCS=predict
# (or any comma-separated subset of health,predict,preflight) picks the kinds.
set -eu
cd "$(dirname "$0")/.."
threads="${1:-8}"; seconds="${2:-10}"; writers="${3:-0}"; rounds="${4:-1}"
stepcast="${STEPCAST:-build/bin/stepcast}"
work=$(mktemp -d)
"$stepcast" serve --listen 127.0.0.1:0 --db "$work/bench.db" --port-file "$work/port" 2>"$work/rpc.log" >/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null; [ -n "${KEEP_LOG:-}" ] && cp "$work/rpc.log" "$KEEP_LOG"; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); load average: $(cut -d' ' -f1-3 /proc/loadavg); server $stepcast logs one line per RPC to a file"
build/bin/service_load --server "127.0.0.1:$(cat "$work/port")" --threads "$threads" --seconds "$seconds" \
  --job examples/llama3-70b-h100.yaml --writers "$writers" --rounds "$rounds" --rpcs "${RPCS:-health,predict,preflight}"
echo "server log lines: $(wc -l < "$work/rpc.log"); server CPU: $(ps -o times= -p $pid) s"
