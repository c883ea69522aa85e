#!/usr/bin/env bash
# CI's reliability stage (issue 14, docs/RELIABILITY.md): the reliability tests (the review's
# reproducers and the service fault test) under ASan+UBSan (scripts/sanitize_tests.sh -L
# reliability, building only reliability_tests, reliability2_tests, stepcast and the Python stubs), inside what is left of CI's 90
# minutes after the README's test command; then the fuzz smoke (scripts/fuzz_smoke.sh: the
# libFuzzer targets built with clang, ASan+UBSan, 45 s each with a fixed seed) likewise.
#   scripts/ci_reliability.sh USED_S      USED_S: seconds CI has already spent
# The stage runs only when the time it needs, as measured on the 2-core development machine
# (docs/RELIABILITY.md "In CI"), fits in what is left; when it does not fit, one line says it was
# skipped and why. When it runs, any sanitizer report or failing test fails CI.
set -euo pipefail
cd "$(dirname "$0")/.."
used=${1:-0}
limit=${STEPCAST_CI_LIMIT_S:-5400}
margin=600
need_sanitize=$((30 * 60))  # ASan+UBSan build of the two targets ~12-20 min + the tests ~1 min (2 cores)

# g++'s own ASan/UBSan runtimes (libasan8, libubsan1) come with scripts/setup.sh's g++.
left() { echo $((limit - used - SECONDS)); }
if [ "$(left)" -gt $((need_sanitize + margin)) ]; then
  echo "ci_reliability: sanitizer suite (ASan+UBSan), $(left) s of CI time left"
  SANITIZE_TARGETS="reliability_tests reliability2_tests stepcast stepcast_python_stubs" scripts/sanitize_tests.sh -L reliability
else
  echo "ci_reliability: sanitizer suite SKIPPED: $(left) s of CI time left, it needs about ${need_sanitize} s (run scripts/sanitize_tests.sh)"
fi

# The fuzz smoke: clang's build of the tree with fuzzer+ASan+UBSan instrumentation took 19 min on
# the 2-core machine without ccache, the 9 targets x 45 s 7 min. A finding fails CI (the
# reproducer is in build-fuzz/artifacts/, replayable: FUZZ_SEED=1). Should the machine be slower
# than measured, the stage stops at CI's limit less the margin and says so: running out of time is
# not a finding.
need_fuzz=$((30 * 60))
if [ "$(left)" -gt $((need_fuzz + margin)) ]; then
  echo "ci_reliability: fuzz smoke, $(left) s of CI time left"
  scripts/setup_test_deps.sh --fuzz
  rc=0
  FUZZ_SECONDS=45 FUZZ_SEED=1 FUZZ_JOBS=$(nproc) timeout $(($(left) - margin)) scripts/fuzz_smoke.sh || rc=$?
  if [ $rc -eq 124 ]; then
    echo "ci_reliability: fuzz smoke STOPPED at CI's time limit (not a finding); run scripts/fuzz_smoke.sh"
  elif [ $rc -ne 0 ]; then
    exit $rc
  fi
else
  echo "ci_reliability: fuzz smoke SKIPPED: $(left) s of CI time left, it needs about ${need_fuzz} s (run scripts/fuzz_smoke.sh)"
fi
