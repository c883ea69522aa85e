#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .carry/ carried (scripts/carry_calibrate.sh):
# the GPU tests, a --quick and a full calibration (timed), and the torch references side by side;
# then the SDPA attention backends' rates (attention_bench.py) for the framework presets, and the
# new profile beside the previous one of the same hardware (examples/profiles, carried).
# Everything lands in ${OUT:-out}/; the last lines printed are the comparison table. One command:
#   OUT=$OUT bash .carry/device_calibrate.sh
set -u
out=${OUT:-out}; mkdir -p "$out"
source .carry/env.sh   # defines stepcast_env and STEPCAST_BIN; exports nothing
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
{ date -u +%FT%TZ; hostname; nvidia-smi --query-gpu=index,pci.bus_id,uuid,name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } | tee "$out/machine.txt"
if stepcast_env ldd "$STEPCAST_BIN/stepcast-calibrate" | grep "not found"; then
  echo "device_calibrate: missing libraries (above)"; exit 1
fi
for t in calibrate_gpu_test probe_gpu_test; do
  [ -x "$STEPCAST_BIN/$t" ] && { stepcast_env "$STEPCAST_BIN/$t" >"$out/$t.txt" 2>&1; tail -15 "$out/$t.txt"; }
done
t0=$(now); stepcast_env "$STEPCAST_BIN/stepcast-calibrate" --quick --out "$out/quick.json" >"$out/quick.txt" 2>&1; rq=$?; t1=$(now)
stepcast_env "$STEPCAST_BIN/stepcast-calibrate" --out "$out/profile.json" >"$out/full.txt" 2>&1; rf=$?; t2=$(now)
tail -40 "$out/full.txt"
python3 .carry/torch_reference.py --run "$out/profile.json.run.json" --sustain-s 30 --json "$out/torch_reference.json" | tee "$out/reference.txt"
printf 'wall time: --quick %s s (exit %d), full %s s (exit %d)\n' "$(elapsed "$t0" "$t1")" $rq "$(elapsed "$t1" "$t2")" $rf \
  | tee -a "$out/reference.txt"
python3 .carry/attention_bench.py --json "$out/attention.json" | tee "$out/attention.txt"
# The new profile against the previous measured one of the same hardware (issue 25): per GEMM
# shape both have, new/old rate (median, min, max over the shapes, per dtype); HBM new/old.
python3 .carry/compare_profiles.py "$out/profile.json" .carry/profiles/*.json | tee "$out/against_previous.txt"
