#!/usr/bin/env bash
# Bundle stepcast-calibrate, stepcast, the GPU tests and the run probe with the shared libraries
# they need that a bare CUDA image lacks (abseil, protobuf, yaml-cpp, gRPC, ...), into .carry/ for
# a GPU machine that has the CUDA toolkit and PyTorch but no Debian -dev packages
# (docs/CALIBRATION.md). Left out, found there instead: the driver (libcuda), glibc, the CUDA
# libraries (cuBLASLt, cudart, CUPTI), NCCL (dlopen'ed by stepcast-calibrate only when it measures
# collectives) and MPI (the MPI module lib/libstepcast_calibrate_mpi.so is carried and links the
# machine's libmpi.so.40 when --mpi asks for it: mpirun / srun come from the cluster anyway).
# The binaries find .carry/lib through their RUNPATH ($ORIGIN/../lib); .carry/env.sh adds the CUDA
# libraries for them only (stepcast_env CMD...), never for python3 / torch.
# Usage: scripts/carry_calibrate.sh [BUILD_DIR [OUT_DIR]]   (default build/ and .carry/)
# CARRY_LEAN=1: stepcast-calibrate and calibrate_gpu_test only, stripped (15 MiB instead of 52 on
# 2026-11-27): the device tool carries at most 64 MiB with the working tree (18 MiB).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${2:-$root/.carry}
rm -rf "$out"; mkdir -p "$out/bin" "$out/lib"
bins=(stepcast-calibrate stepcast)
optional_bins=(calibrate_gpu_test probe_gpu_program probe_gpu_test)
libs=(libstepcast_calibrate_mpi.so libstepcast_probe.so)
if [ "${CARRY_LEAN:-0}" = 1 ]; then
  bins=(stepcast-calibrate); optional_bins=(calibrate_gpu_test); libs=(libstepcast_calibrate_mpi.so)
fi
for b in "${bins[@]}"; do
  [ -x "$build/bin/$b" ] || { echo "carry_calibrate: $build/bin/$b not built (run scripts/setup.sh first)" >&2; exit 1; }
  cp "$build/bin/$b" "$out/bin/"
done
for b in "${optional_bins[@]}"; do
  if [ -x "$build/bin/$b" ]; then cp "$build/bin/$b" "$out/bin/"; else echo "carry_calibrate: $b not built, not carried" >&2; fi
done
for l in "${libs[@]}"; do
  if [ -f "$build/lib/$l" ]; then cp "$build/lib/$l" "$out/lib/"; else echo "carry_calibrate: $l not built, not carried" >&2; fi
done
skip='^(libc|libm|libdl|librt|libpthread|libutil|ld-linux.*|libcuda|libcudart|libcublas|libcublasLt|libcupti|libnccl|libnvrtc|libnvToolsExt|libmpi|libmpi_cxx|libopen-pal|libopen-rte|libpmix|libhwloc|libevent_core|libevent_pthreads|libfabric|libucp|libucs|libuct|libucm|libpsm2|libibverbs|librdmacm|libnl-3|libnl-route-3)\.so'
for f in "$out"/bin/* "$out"/lib/libstepcast_probe.so; do
  [ -e "$f" ] || continue
  ldd "$f" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] || cp -L "$path" "$out/lib/$name"
done
cp "$root/scripts/device_calibrate.sh" "$root/scripts/device_contention.sh" "$root/scripts/compare_profiles.py" "$root/scripts/torch_reference.py" "$root/scripts/attention_bench.py" "$out/"
# The previous measured profiles, for device_calibrate.sh's comparison with the new one.
mkdir -p "$out/profiles"; cp "$root"/examples/profiles/*.json "$out/profiles/"
cat > "$out/env.sh" <<'ENV'
# Source on the GPU machine. Defines stepcast_env CMD...: runs CMD with the CUDA libraries of the
# toolkit or of PyTorch's nvidia-* wheels (cuBLASLt, cudart, CUPTI, NCCL) on LD_LIBRARY_PATH. Only
# the stepcast binaries get it; python3 / torch keep their own libraries.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
wheels=$(python3 -c 'import nvidia, os; p = nvidia.__path__[0]; print(":".join(os.path.join(r, d) for r, ds, _ in os.walk(p) for d in ds if d == "lib"))' 2>/dev/null || true)
STEPCAST_LD_LIBRARY_PATH="$here/lib:${CUDA_HOME:-/usr/local/cuda}/lib64:${CUDA_HOME:-/usr/local/cuda}/extras/CUPTI/lib64:${wheels}"
stepcast_env() { LD_LIBRARY_PATH="$STEPCAST_LD_LIBRARY_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
STEPCAST_BIN="$here/bin"
ENV
if [ "${CARRY_LEAN:-0}" = 1 ]; then strip --strip-unneeded "$out"/bin/* "$out"/lib/*.so* 2>/dev/null || true; fi
echo "carry_calibrate: $(du -sm "$out" | cut -f1) MiB in $out (name it in the device call's carry)"
