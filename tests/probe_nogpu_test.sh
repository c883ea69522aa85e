#!/usr/bin/env bash
# The probe's failure path: without a usable GPU/driver (this machine), InitializeInjection
# says why once on stderr, returns 1, and the process runs on untouched. Skipped (77) where a
# GPU is present (the GPU test covers that case).
set -u
probe="$1"
# gpu code review item 18 / issue 25 item 5: the library exports only CUDA's injection entry point,
# and loads no gRPC into the training process (it reports through the stepcast CLI). Before: 3,663
# exported symbols; libgrpc++, libgrpc, libssl, libcrypto, libcares, libre2 among its libraries.
exports=$(nm -D --defined-only "$probe" | awk '{print $3}' | sort | tr '\n' ' ')
[ "$exports" = "InitializeInjection " ] || { echo "FAIL: exported symbols: $(echo "$exports" | wc -w) ($(echo "$exports" | cut -c1-200))"; exit 1; }
echo "ok   exports only InitializeInjection"
if ldd "$probe" | grep -Eq 'libgrpc|libgpr|libssl|libcrypto|libcares'; then
  echo "FAIL: gRPC loaded with the probe:"; ldd "$probe" | grep -E 'libgrpc|libgpr|libssl|libcrypto|libcares'; exit 1
fi
echo "ok   no gRPC library loaded with the probe"
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
