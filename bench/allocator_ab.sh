#!/usr/bin/env bash
# tcmalloc against glibc malloc, side by side (docs/PERFORMANCE.md "Allocator"): two builds of the
# same commit, one configured with -DSTEPCAST_TCMALLOC=AUTO (tcmalloc linked), one with OFF, run
# alternately, ROUNDS times, so that both see the same load on a noisy machine. Each round, for each
# build: predict_bench (the bare model and the request path, median of 3), the one-shot CLI
# (`perf stat -r 20 stepcast predict --json`), and bench/service_load.sh (health / Predict /
# Preflight with that build's server and load client; it prints the server's peak RSS).
# Usage: bench/allocator_ab.sh [TCMALLOC_BUILD] [GLIBC_BUILD] [ROUNDS] [SERVICE_ARGS...]
#   defaults: build build-notcm 3, service_load.sh 8 8 0
set -eu
cd "$(dirname "$0")/.."
on="${1:-build}"; off="${2:-build-notcm}"; rounds="${3:-3}"; shift $(( $# < 3 ? $# : 3 ))
service_args=("$@"); [ ${#service_args[@]} -eq 0 ] && service_args=(8 8 0)
for b in "$on" "$off"; do
  for t in stepcast predict_bench service_load; do
    [ -x "$b/bin/$t" ] || { echo "allocator_ab: $b/bin/$t is missing (build it first)" >&2; exit 2; }
  done
done
ldd "$on/bin/stepcast" | grep -q tcmalloc || { echo "allocator_ab: $on/bin/stepcast does not link tcmalloc" >&2; exit 2; }
! ldd "$off/bin/stepcast" | grep -q tcmalloc || { echo "allocator_ab: $off/bin/stepcast links tcmalloc" >&2; exit 2; }
one() {   # one() BUILD LABEL
  local b=$1 label=$2
  echo "=== $label ($b) $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$b/bin/predict_bench" --benchmark_filter='BM_PredictDense$|BM_RequestPath$|BM_RequestPathWire$' \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null | grep median
  if command -v perf >/dev/null && perf stat -e task-clock true >/dev/null 2>&1; then
    perf stat -r 20 -e task-clock "$b/bin/stepcast" predict --json examples/llama3-70b-h100.yaml 2>&1 >/dev/null |
      grep -E 'task-clock|elapsed' || true
  else   # no perf here: the mean wall time of 20 runs
    local t0; t0=$(date +%s%N)
    for _ in $(seq 20); do "$b/bin/stepcast" predict --json examples/llama3-70b-h100.yaml >/dev/null; done
    echo "stepcast predict: $(( ($(date +%s%N) - t0) / 20000 )) us elapsed per run (mean of 20)"
  fi
  STEPCAST="$b/bin/stepcast" SERVICE_LOAD="$b/bin/service_load" bench/service_load.sh "${service_args[@]}"
}
for r in $(seq "$rounds"); do
  echo "##### round $r"
  # Alternate which build goes first, so neither always runs in the other's wake.
  if [ $((r % 2)) -eq 1 ]; then one "$on" tcmalloc; one "$off" glibc; else one "$off" glibc; one "$on" tcmalloc; fi
done
