#!/usr/bin/env bash
# The probe's failure path: without a usable GPU/driver (this machine), InitializeInjection
# says why once on stderr, returns 1, and the process runs on untouched. Skipped (77) where a
# GPU is present (the GPU test covers that case).
set -u
probe="$1"
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then echo "SKIP: a GPU is present"; exit 77; fi
out=$(python3 - "$probe" 2>&1 <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
print("returned", lib.InitializeInjection())
print("returned", lib.InitializeInjection())
print("still running")
PY
)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: the process died ($rc)"; exit 1; }
grep -q "returned 1" <<<"$out" || { echo "FAIL: InitializeInjection did not return 1"; exit 1; }
grep -q "still running" <<<"$out" || { echo "FAIL: the process did not continue"; exit 1; }
[ "$(grep -c 'stepcast probe: disabled' <<<"$out")" -eq 1 ] || { echo "FAIL: the probe must say why exactly once"; exit 1; }
echo "ok   probe disabled itself once and the process ran on"
