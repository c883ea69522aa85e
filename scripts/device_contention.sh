#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .carry/ carried (scripts/carry_calibrate.sh):
# the GPU tests (the contention sweep's among them), a --quick calibration and a full one on this
# one GPU (collectives skipped: NCCL needs two), each with the contention sweep, and the new
# profile's GEMM points against the previous measured profile of the same hardware. At most 8 files
# come back: log.txt (machine, tests, comparison), quick.txt, quick.json.run.json, full.txt,
# profile.json, profile.json.run.json. One command:
#   OUT=$OUT bash .carry/device_contention.sh
set -u
out=${OUT:-out}; mkdir -p "$out"
source .carry/env.sh
log="$out/log.txt"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader; } | tee "$log"
for t in calibrate_gpu_test probe_gpu_test; do
  [ -x "$STEPCAST_BIN/$t" ] && { timeout 150 bash -c "source .carry/env.sh; stepcast_env $STEPCAST_BIN/$t" >"$out/$t.log" 2>&1; echo "$t exit $?" | tee -a "$log"; grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|Expected|Which is|actual" "$out/$t.log" | head -40 | tee -a "$log"; rm -f "$out/$t.log"; }
done
timeout 120 bash -c "source .carry/env.sh; stepcast_env $STEPCAST_BIN/stepcast-calibrate --quick --skip-collectives --out $out/quick.json" >"$out/quick.txt" 2>&1
echo "quick exit $?" | tee -a "$log"; grep -E "^contention|^GEMM|^HBM|warning|FAILED" "$out/quick.txt" | tee -a "$log"
rm -f "$out/quick.json"
timeout 300 bash -c "source .carry/env.sh; stepcast_env $STEPCAST_BIN/stepcast-calibrate --skip-collectives --out $out/profile.json" >"$out/full.txt" 2>&1
echo "full exit $?" | tee -a "$log"; grep -E "^contention|^GEMM|^HBM|warning|FAILED|half rate" "$out/full.txt" | tee -a "$log"
python3 .carry/compare_profiles.py "$out/profile.json" .carry/profiles/*.json 2>&1 | tee -a "$log"
