#!/usr/bin/env bash
# Bundle stepcast-calibrate, stepcast and the GPU tests with the shared libraries they need that a
# bare CUDA image lacks (abseil, protobuf, yaml-cpp, OpenMPI, ...), into .carry/ for a GPU machine
# that has the CUDA toolkit and PyTorch but no Debian -dev packages (docs/CALIBRATION.md).
# Left out, found there instead: the driver (libcuda), glibc, and the CUDA libraries (cuBLASLt,
# cudart, CUPTI, NCCL: 0.7 GiB together), which .carry/env.sh finds in the toolkit or in the
# nvidia-* Python wheels PyTorch brings.
# Usage: scripts/carry_calibrate.sh [BUILD_DIR [OUT_DIR]]   (default build/ and .carry/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${2:-$root/.carry}
rm -rf "$out"; mkdir -p "$out/bin" "$out/lib"
bins=(stepcast-calibrate stepcast calibrate_gpu_test)
for b in "${bins[@]}"; do
  [ -x "$build/bin/$b" ] || { echo "carry_calibrate: $build/bin/$b not built (run scripts/setup.sh first)" >&2; exit 1; }
  cp "$build/bin/$b" "$out/bin/"
done
skip='^(libc|libm|libdl|librt|libpthread|libutil|ld-linux.*|libcuda|libcudart|libcublas|libcublasLt|libcupti|libnccl|libnvrtc)\.so'
for b in "${bins[@]}"; do
  ldd "$out/bin/$b" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] || cp -L "$path" "$out/lib/$name"
done
cp "$root/scripts/device_calibrate.sh" "$root/scripts/torch_reference.py" "$out/"
cat > "$out/env.sh" <<'ENV'
# Source on the GPU machine: the carried libraries, then CUDA's (toolkit, or PyTorch's wheels).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
wheels=$(python3 -c 'import nvidia, os; p = nvidia.__path__[0]; print(":".join(os.path.join(r, d) for r, ds, _ in os.walk(p) for d in ds if d == "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$here/lib:${CUDA_HOME:-/usr/local/cuda}/lib64:${CUDA_HOME:-/usr/local/cuda}/extras/CUPTI/lib64:${wheels}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$here/bin:$PATH"
ENV
echo "carry_calibrate: $(du -sh "$out" | cut -f1) in $out (name it in the device call's carry)"
