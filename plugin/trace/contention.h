// File: plugin/trace/contention.h
//
// Contention measured from a trace: how much slower a kernel runs while a communication kernel
// (NCCL/RCCL, DeepEP, symmetric memory) runs beside it on another stream than the same kernel
// does alone. Communication kernels run on SMs and share HBM, L2 and the memory fabric with the
// computation beside them; the overlap efficiencies of a performance model rest on this
// slowdown (issue 28). `stepcast trace --contention` (docs/TRACES.md "Contention").
#ifndef STEPCAST_PLUGIN_TRACE_CONTENTION_H_
#define STEPCAST_PLUGIN_TRACE_CONTENTION_H_

#include <string>

#include "absl/status/statusor.h"
#include "plugin/trace/kineto_trace.h"
#include "stepcast/v1/trace.pb.h"

namespace stepcast::trace {

struct ContentionOptions {
  // What makes two instances "the same kernel":
  //   "shape"    its name and launch configuration (Kineto's args grid and block): the same
  //              shape for kernels whose grid follows the problem (cuBLAS, cuDNN, CUTLASS
  //              non-persistent GEMMs, FlashAttention);
  //   "position" also the innermost annotation it was launched in (else its ProfilerStep) and
  //              its occurrence among the kernels of that name and shape there: needed for
  //              persistent kernels (DeepGEMM, CUTLASS persistent and grouped GEMMs, whose grid
  //              is the SM count whatever the shape), and right when each step or layer
  //              repeats the same shapes.
  std::string key = "shape";
  // An instance is overlapped when communication kernels on other streams cover at least this
  // share of its duration and no other kernel or copy runs beside it.
  double min_overlap_fraction = 0.9;
  // Kernels whose alone median is shorter are not measured: Kineto's older traces write integer
  // microseconds (the DeepSeek-V3 and HTA traces), so a 5 us kernel's duration is known to +-20%.
  int64_t min_duration_ns = 20'000;
};

// Every kernel of a computation category (GEMM, attention, convolution, elementwise) is
//   alone         when no other GPU record runs at any moment of it;
//   overlapped    when communication kernels cover >= min_overlap_fraction of it and no other
//                 kernel or copy runs beside it (its kind: the communication kind with the most
//                 overlap, probe::CommunicationKind);
//   partly / beside other work otherwise (counted, not measured).
// Each overlapped instance whose kernel (key) has an alone instance, with an alone median of at
// least min_duration_ns, gives
//   ratio = duration / median(alone durations of that kernel).
// Groups of (category, communication kind, GPU) report the median, p10, p90, min and max of the
// ratio, the time-weighted ratio, the instances and kernels behind it, and the alone spread
// (median |alone / median(alone) - 1| over kernels with two or more alone instances: the
// noise a ratio must clear). Groups sorted by category, then instances, the most first.
// Errors: InvalidArgument for an unknown key or a fraction outside (0, 1].
absl::StatusOr<v1::ContentionReport> MeasureContention(const KinetoTrace& trace, const ContentionOptions& options = {});

}  // namespace stepcast::trace

#endif  // STEPCAST_PLUGIN_TRACE_CONTENTION_H_
