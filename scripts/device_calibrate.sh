#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .carry/ carried (scripts/carry_calibrate.sh):
# the GPU tests, a --quick and a full calibration (timed), and the torch references side by side.
# Everything lands in ${OUT:-out}/; the last lines printed are the comparison table.
set -u
out=${OUT:-out}; mkdir -p "$out"
source .carry/env.sh
{ date -u +%FT%TZ; hostname; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } | tee "$out/machine.txt"
if ldd .carry/bin/stepcast-calibrate | grep "not found"; then echo "device_calibrate: missing libraries (above)"; exit 1; fi
calibrate_gpu_test 2>&1 | tail -15 | tee "$out/gpu_test.txt"
t0=$(date +%s.%N); stepcast-calibrate --quick --out "$out/quick.json" >"$out/quick.txt" 2>&1; rq=$?; t1=$(date +%s.%N)
stepcast-calibrate --out "$out/profile.json" >"$out/full.txt" 2>&1; rf=$?; t2=$(date +%s.%N)
tail -40 "$out/full.txt"
python3 .carry/torch_reference.py --run "$out/profile.json.run.json" --json "$out/torch_reference.json" | tee "$out/reference.txt"
printf 'wall time: --quick %.1f s (exit %d), full %.1f s (exit %d)\n' "$(echo "$t1 - $t0" | bc)" $rq "$(echo "$t2 - $t1" | bc)" $rf | tee -a "$out/reference.txt"
