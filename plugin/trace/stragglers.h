// File: plugin/trace/stragglers.h
//
// Communication wait that is another rank's lateness, from the traces of several ranks of one job
// (`stepcast trace rank*.json.gz`).
//
// A collective kernel (NCCL/RCCL, DeepEP) cannot complete on any rank before every rank of its
// group has started it: a rank that starts early spins inside the kernel until the last one
// arrives, so that part of its kernel's duration is waiting, not transfer. HolisticTraceAnalysis
// uses the same premise for its straggler analysis (facebookresearch/HolisticTraceAnalysis @
// f4d0062c, hta/analyzers/straggler.py, _compute_normalized_start_time_of_significant_comm_kernels:
// "candidate GPU communication kernels ... will involve a blocking all-to-all synchronization and
// thus end at about the same time. Therefore, the later a kernel start, the bigger overall delay it
// likely causes"); HTA ranks the ranks by the start of one chosen kernel per iteration. Here every
// collective instance is matched across the ranks and its waits are measured and attributed:
//
//   - Matching: a rank's communication kernels are grouped by (group, kind) where group is the
//     kernel's "Process Group Name" argument when the trace carries it (Kineto with PyTorch >= 2.2
//     writes it on NCCL kernels) and else its CUDA stream (PyTorch's ProcessGroupNCCL gives each
//     process group its own stream), and kind is probe::CommunicationKind (the collective, or
//     DeepEP's dispatch / combine / notify). The i-th kernel of a (group, kind) on each rank that
//     has that (group, kind) is instance i: NCCL requires every rank of a communicator to issue its
//     collectives in the same order. A (group, kind) whose kernel count differs between ranks is
//     not matched (a note says so).
//   - Arrival: the start of the rank's collective kernel on the GPU, not its CPU
//     record_param_comms / nccl:<coll> op: the CPU op only enqueues the kernel, which starts when
//     the stream reaches it (after earlier work and cross-stream event waits), and it is the
//     running kernel that the peers wait for.
//   - Wait of rank r in instance i: min(max(0, latest arrival - r's start), r's kernel duration),
//     attributed to the latest-arriving rank (ties: the lowest rank). The latest rank waits 0.
//   - Step: an instance belongs to step j when its latest arrival lies in the latest rank's step j
//     window (TraceSummary.steps[j].start_ns/end_ns); instances outside every measured step are
//     left out of the figures (counted in a note).
//   - Critical lateness of a step: the sum over its instances of the instance's largest wait (how
//     long the first rank to arrive sat waiting for the last one), i.e. the communication time of
//     the step that was lateness rather than transfer.
//
// Timestamps of different ranks are compared as they are: right when the ranks share a clock (one
// host) or their clocks agree to well under the waits measured. Instances where a rank's kernel
// ended before the latest rank's kernel started, which cannot happen on a shared clock, are counted
// in a note.
#ifndef STEPCAST_PLUGIN_TRACE_STRAGGLERS_H_
#define STEPCAST_PLUGIN_TRACE_STRAGGLERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "plugin/trace/kineto_trace.h"
#include "stepcast/v1/trace.pb.h"

namespace stepcast::trace {

// One communication kernel of one rank: GPU start and end (ns, the trace's clock), and the
// (group, kind) it is matched by ("pg 0 all_reduce", "stream 84 all_to_all").
struct CollectiveKernel {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::string key;
};

// One measured step of a rank: its number (StepMeasurement.step) and window [start_ns, end_ns).
struct StepWindow {
  int32_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// What the straggler analysis keeps of one rank: its communication kernels by start and its
// measured steps in order.
struct RankCollectives {
  int32_t rank = -1;
  std::vector<CollectiveKernel> kernels;
  std::vector<StepWindow> steps;
};

// The communication kernels of one trace with their keys, and the step windows of its summary.
RankCollectives CollectivesOfRank(const KinetoTrace& trace, const v1::TraceSummary& summary);

// Matches the collective instances across the ranks and measures and attributes the waits (the
// method above). `ranks` holds one entry per rank, rank ids distinct and >= 0. InvalidArgument
// when fewer than two ranks are given or two share a rank id. Seconds throughout.
absl::StatusOr<v1::StragglerReport> AttributeCollectiveWaits(const std::vector<RankCollectives>& ranks);

}  // namespace stepcast::trace

#endif  // STEPCAST_PLUGIN_TRACE_STRAGGLERS_H_
