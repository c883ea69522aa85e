// File: plugin/trace/annotations.h
//
// Where the GPU time of a Kineto trace went, per user annotation (record_function / NVTX-style
// ranges a framework puts around its modules: DeepSeek's attn(F) / mlp(B) / dispatch(F),
// Megatron's and torchtitan's layer names, a user's own). The per-module view a per-layer
// performance model is checked against (docs/TRACES.md "Per annotation").
#ifndef STEPCAST_PLUGIN_TRACE_ANNOTATIONS_H_
#define STEPCAST_PLUGIN_TRACE_ANNOTATIONS_H_

#include <cstdint>
#include <vector>

#include "plugin/trace/kineto_trace.h"
#include "stepcast/v1/trace.pb.h"

namespace stepcast::trace {

// The annotation each GPU record of `trace` was launched in: an index into trace.annotations,
// or kNoAnnotation (its launch is in no annotation) or kNoLaunch (its launch is not in the
// trace). The annotation is the innermost one open at the launch (the latest-starting of those
// containing it; at equal starts the shorter) on the launching thread; when that thread has
// none open, the innermost open on any thread (PyTorch's autograd engine launches a backward on
// its own thread while the main thread's annotation is open, as in the DeepSeek-V3 DualPipe
// trace). Found through the launch's correlation id, like the step (HTA's rule). O((A + R) log A)
// for A annotations and R records.
constexpr int64_t kNoAnnotation = -1;
constexpr int64_t kNoLaunch = -2;
std::vector<int64_t> AnnotationOfRecords(const KinetoTrace& trace);

// Per annotation name, the GPU records launched inside it (AnnotationOfRecords), over the whole
// trace: summed seconds per category, union, per-stream seconds, and overlap with communication
// (v1::AnnotationTime documents each field). The overlap of a module's computation with
// communication is |union of its non-communication records ∩ union of every communication
// record| (a stream runs one kernel at a time, so the communication beside it is on another
// stream). Sorted by summed GPU time, the largest first; records launched outside every
// annotation come as "(none)", records without a launch in the trace as "(no launch)".
std::vector<v1::AnnotationTime> AnnotationBreakdown(const KinetoTrace& trace);

}  // namespace stepcast::trace

#endif  // STEPCAST_PLUGIN_TRACE_ANNOTATIONS_H_
