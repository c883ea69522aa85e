// File: kernels/pattern.h
//
// The data pattern of the collective checks, one definition for the device fill kernel
// (kernels/stream.cu LaunchFillPattern) and the host check (calibrate/collective_check.cc):
// element j of rank r's send buffer for the size with index `salt` is a small integer 1..31, so
// that sums over up to 2^19 ranks stay exact in fp32 (24-bit mantissa), and it differs between
// sizes (salt), ranks and neighbouring elements, so a stale buffer from the previous size, a
// buffer from the wrong rank or a shifted one fails (nccl-tests re-initialises its data per
// check for the same reason: src/common.cu initData).
#ifndef STEPCAST_KERNELS_PATTERN_H_
#define STEPCAST_KERNELS_PATTERN_H_

#include <cstddef>

#if defined(__CUDACC__)
#define STEPCAST_HOST_DEVICE __host__ __device__
#else
#define STEPCAST_HOST_DEVICE
#endif

namespace stepcast::kernels {

STEPCAST_HOST_DEVICE inline float PatternValue(int rank, int salt, size_t j) {
  const size_t v = static_cast<size_t>(rank) * 7 + static_cast<size_t>(salt) * 13 + j * 3 + (j >> 7) * 5;
  return static_cast<float>(1 + v % 31);
}

}  // namespace stepcast::kernels

#endif  // STEPCAST_KERNELS_PATTERN_H_
