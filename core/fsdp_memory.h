// File: core/fsdp_memory.h
//
// Seed 003: Stanford CS336 (Spring 2025) Assignment 2, "communication_accounting" (a), (b):
// memory of an FFN-only 126-block model (d_model 16384, d_ff 53248) and the FSDP degree needed
// to fit. Units: bytes (the seed prints GiB = 2^30 bytes and calls them GB).
#ifndef STEPCAST_CORE_FSDP_MEMORY_H_
#define STEPCAST_CORE_FSDP_MEMORY_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace stepcast::seed003 {

struct FfnModelMemory {
  double params = 0;                  // blocks x 2 x d_model x d_ff
  double params_bytes = 0;            // fp32 master weights
  double grads_bytes = 0;             // fp32 accumulated gradients
  double optimizer_bytes = 0;         // AdamW m and v, fp32
  double static_bytes = 0;            // sum of the three
  double activation_bytes = 0;        // blocks x (d_model + d_ff) x tokens x 2 (bf16 GEMM inputs)
};
FfnModelMemory FfnMemory(int64_t blocks, int64_t d_model, int64_t d_ff, double tokens);

// Devices needed to hold everything unsharded: ceil((static + activations) / capacity).
int64_t DevicesToFitUnsharded(const FfnModelMemory& m, double capacity_bytes);

// Part (b): static state and `sharded_activation_fraction` of the activations sharded over
// n devices; the rest of the activations stays on every device:
//   per device = (static + f x act) / n + (1 - f) x act.
double PerDeviceBytes(const FfnModelMemory& m, double sharded_activation_fraction, int64_t n);
// Smallest n with PerDeviceBytes <= capacity. FailedPrecondition when the unsharded part alone
// exceeds the capacity (the question's case: 1071 GiB of unsharded activations > 95 GB v5p;
// the seed's 46 divides everything by n and drops the unsharded half).
absl::StatusOr<int64_t> FsdpDegreeToFit(const FfnModelMemory& m, double sharded_activation_fraction,
                                        double capacity_bytes);

}  // namespace stepcast::seed003

#endif  // STEPCAST_CORE_FSDP_MEMORY_H_
