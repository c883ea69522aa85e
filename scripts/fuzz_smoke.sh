#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang, ASan+UBSan) in build-fuzz/ and runs each for a
# bounded time, seeded from examples/, tests/data/ and the reliability reproducers.
#   scripts/fuzz_smoke.sh                 every target, 60 s each
#   FUZZ_SECONDS=600 scripts/fuzz_smoke.sh fuzz_megatron   one target, longer
#   FUZZ_SEED=1 ...                       libFuzzer's -seed (CI: a fixed seed, so a finding replays;
#                                         0, the default, lets libFuzzer pick one)
# Exit 1 on the first crash, leak, sanitizer report, timeout or OOM; the reproducer is left in
# build-fuzz/artifacts/. Prints one line per target: executions, corpus size, outcome.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
B=build-fuzz
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ ! -f "$B/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTEPCAST_FUZZ=ON \
    -DSTEPCAST_WITH_CUDA=OFF -DSTEPCAST_BUILD_TESTS=OFF -DSTEPCAST_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
fi
cmake --build "$B" -j"${FUZZ_JOBS:-$(nproc)}" --target fuzzers

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_spec_yaml fuzz_spec_json fuzz_spec_textproto fuzz_hf_config fuzz_megatron
                                     fuzz_torchtitan fuzz_validation_csv fuzz_nccl_tests fuzz_kineto)
R=tests/data/reliability_inputs
seeds() {  # the seed files of a target
  case $1 in
    fuzz_spec_yaml) ls examples/*.yaml $R/*.yaml fuzz/seeds/spec_*.yaml ;;
    fuzz_spec_json) ls examples/*.json $R/*.json 2>/dev/null || true ;;
    fuzz_spec_textproto) ls examples/*.textproto $R/*.textproto 2>/dev/null || true ;;
    fuzz_hf_config) ls tests/data/real_inputs/hf/*.json examples/hf/*.json $R/*.json fuzz/seeds/hf_*.json ;;
    fuzz_megatron) ls $R/megatron_*.bin fuzz/seeds/megatron_*.txt ;;
    fuzz_torchtitan) ls tests/data/real_inputs/torchtitan/*.toml $R/*.toml ;;
    fuzz_validation_csv) ls $R/*.csv; head -c 60000 tests/data/validation/published_runs.csv > "$B/seed_published_runs.csv"; echo "$B/seed_published_runs.csv" ;;
    fuzz_nccl_tests) find tests/data/real_data/microbench/nccl -type f -size -64k; ls fuzz/seeds/nccl_*.txt ;;
    fuzz_kineto) ls fuzz/seeds/kineto_*.json ;;
  esac
}
mkdir -p "$B/artifacts"
status=0
for t in "${targets[@]}"; do
  corpus="$B/corpus/$t"
  mkdir -p "$corpus"
  for f in $(seeds "$t"); do [ -f "$f" ] && cp "$f" "$corpus/" ; done
  log="$B/$t.log"
  rc=0
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$PWD/scripts/ubsan.supp \
    "$B/bin/$t" -seed="${FUZZ_SEED:-0}" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$B/artifacts/$t-" -print_final_stats=1 "$corpus" > "$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  ncorpus=$(ls "$corpus" | wc -l)
  if [ $rc -eq 0 ]; then
    echo "$t: ${execs} executions in ${SECONDS_EACH} s, corpus ${ncorpus}: no finding"
  else
    echo "$t: FINDING (exit $rc) after ${execs} executions; see $log and $B/artifacts/"
    grep -m3 -E 'ERROR|runtime error|SUMMARY' "$log" || true
    status=1
  fi
done
exit $status
