// File: plugin/trace/kineto_trace.h
//
// Kineto / torch.profiler Chrome-trace JSON (what `torch.profiler.profile(...).export_chrome_trace`
// and `tensorboard_trace_handler` write; one file per rank, plain or gzip) read as a stream and
// analysed per training step, the way HolisticTraceAnalysis (HTA) does it.
//
// Reading (ReadKinetoTrace): RapidJSON's SAX Reader over a zlib stream (gzread also reads plain
// files), numbers taken as text so timestamps convert exactly to integer nanoseconds whether the
// trace writes integer microseconds (Kineto before 2023) or fractional ones ("ts":
// 4458676522690.655). Nothing but these compact records is kept:
//   - GPU records (cat "kernel", "gpu_memcpy", "gpu_memset"; older "Kernel", "Memcpy",
//     "Memset"): start, end, name id, launch shape id (grid and block), stream, device,
//     correlation: 48 bytes each, plus the distinct names and shapes;
//   - launches (cat "cuda_runtime", "cuda_driver", "runtime", "driver" with args.correlation):
//     correlation, CPU time, thread: 24 bytes each;
//   - CPU ranges: ProfilerStep#N, user annotations (the step-named ones and every other, the
//     "module" annotations of AnnotationBreakdown), and "nccl:<coll>" annotations: 32 bytes each;
//   - the "Process Group Name" of communication kernels that carry one (a few per step);
// so peak memory is about 2 x (52 bytes x GPU records + 24 bytes x launches + 32 bytes x
// annotations) + names + a 64 KiB read buffer, whatever the size of the JSON text (CPU ops,
// their arguments and call stacks are skipped as they stream by). docs/TRACES.md has the
// measured figures.
//
// Bounds (KinetoOptions, each refused with an error naming the limit): only regular files; at most
// max_json_bytes of JSON and, past 64 MiB, at most max_decompression_ratio times the file's size
// (a gzip bomb); no JSON string longer than max_string_bytes (kernel and annotation names are
// kept up to 4 KiB); at most max_records GPU records, max_launches launches and max_annotations
// CPU ranges; every start and end within +-(2^62 - 1) ns (146 years around the clock's zero: Kineto
// counts microseconds since the Unix epoch), so no difference or sum of them overflows int64.
//
// Steps (AnalyzeKinetoTrace): a GPU record belongs to the iteration whose ProfilerStep#N (else
// the outermost user annotation named like a step, IsStepRangeName) contains its *launch*, found
// through the correlation id (HTA: hta/common/trace.py add_iteration), never through its GPU
// timestamp. Step j is the window from the first GPU record of iteration j to the first of
// iteration j+1, so the last ProfilerStep only closes the one before it (HTA drops it too). A
// file with a single iteration (one ProfilerStep, as a profiler schedule with active=1 writes)
// is one step: from its first GPU record to the end of its last. Without step markers (or with
// use_markers false), steps come from the period of the compute stream's kernel sequence
// (StepStartsFromPeriod).
#ifndef STEPCAST_PLUGIN_TRACE_KINETO_TRACE_H_
#define STEPCAST_PLUGIN_TRACE_KINETO_TRACE_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "plugin/probe/trace_analysis.h"
#include "stepcast/v1/trace.pb.h"

namespace stepcast::trace {

// A CPU-side range (ProfilerStep#N, a user annotation, or an nccl:<collective> annotation).
struct CpuRange {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t tid = 0;         // hash of the trace's tid (number or string)
  uint32_t name_id = 0;     // index into KinetoTrace::annotation_names (user annotations)
  uint8_t collective = 0;   // probe::CollectiveIndex for nccl:<coll> annotations
};

struct Launch {
  int64_t correlation = 0;
  int64_t t_ns = 0;
  uint64_t tid = 0;
};

struct KinetoTrace {
  std::string path;
  int32_t rank = -1, world_size = 0;
  std::vector<std::string> device_names;  // by device id
  std::vector<std::string> names;         // GPU record names by name_id
  // Launch shapes by KernelRecord::shape_id ("grid 112x1x1 block 384x1x1"; [0] is "" = unknown).
  std::vector<std::string> shapes;
  // GPU records sorted by start; collective already resolved (kernel name, then the trace's
  // "Collective name" argument or the nccl:<coll> annotation around the launch for SendRecv).
  std::vector<probe::KernelRecord> records;
  std::vector<CpuRange> profiler_steps;  // ProfilerStep#N, by start
  std::vector<CpuRange> step_ranges;     // other step-named annotations (outermost), by start
  // Every CPU user annotation but ProfilerStep#N (step-named ones included), by start; names in
  // annotation_names.
  std::vector<CpuRange> annotations;
  std::vector<std::string> annotation_names;
  std::vector<CpuRange> collective_ranges;
  std::vector<Launch> launches;          // by correlation
  // Communication kernels' "Process Group Name" argument (Kineto with PyTorch >= 2.2), by
  // correlation id (up to 256 bytes each; absent in older traces).
  std::unordered_map<int64_t, std::string> process_group_of;
  int64_t trace_events = 0, json_bytes = 0, file_bytes = 0;
};

struct KinetoOptions {
  // Names of step annotations when there is no ProfilerStep#N (IsStepRangeName).
  std::string step_pattern = "step";
  // Input bounds (reliability review 2, N6). Real traces compress 13-20x (docs/TRACES.md);
  // the JSON may be at most max_decompression_ratio x the file's size once past 64 MiB.
  int64_t max_json_bytes = int64_t{64} << 30;
  double max_decompression_ratio = 100;
  int64_t max_string_bytes = int64_t{16} << 20;
  int64_t max_records = 50'000'000;
  int64_t max_launches = 100'000'000;
  int64_t max_annotations = 20'000'000;
  // Distinct kernel and annotation names (each kept up to 4 KiB), with 64 bytes of overhead each.
  int64_t max_name_bytes = int64_t{256} << 20;
};

// Reads one trace file. Errors: NotFound (no file), InvalidArgument naming the file and the byte
// offset for malformed JSON, a truncated gzip stream, a file that is not regular (a FIFO, a
// device, a directory), or a bound of KinetoOptions passed (naming the bound);
// FailedPrecondition when it has no GPU record (a profile without ProfilerActivity.CUDA).
absl::StatusOr<KinetoTrace> ReadKinetoTrace(const std::string& path, const KinetoOptions& options = {});

struct AnalyzeOptions {
  // false: ignore ProfilerStep / step annotations and find steps from the kernel period.
  bool use_markers = true;
  // Steps left out at the start (a profiler's schedule already skips its warm-up: 0).
  int warmup_steps = 0;
  // Fill TraceSummary.annotations (AnnotationBreakdown) and TraceSummary.contention
  // (MeasureContention, with these options).
  bool annotations = false;
  bool contention = false;
  std::string contention_key = "shape";
  double min_overlap_fraction = 0.9;
  int64_t min_kernel_ns = 20'000;
};

// Per-step breakdown (probe::AnalyzeWindow per window) and the whole-trace HTA figures.
// step_source names what gave the steps ("ProfilerStep (launch correlation)", "annotation
// 'train_step' (launch correlation)", "one ProfilerStep: its first GPU record to the end of its
// last", "period:<P> on stream <S>"). FailedPrecondition when no step is found.
absl::StatusOr<v1::TraceSummary> AnalyzeKinetoTrace(const KinetoTrace& trace, const AnalyzeOptions& options = {});

// One GPU record of a measured step, for the measured stream timeline of `stepcast compare --html`.
struct StepInterval {
  int32_t stream = -1;          // KernelRecord::stream (-1 unknown)
  int64_t start_ns = 0, end_ns = 0;  // clipped to the step's window
  probe::KernelCategory category = probe::KernelCategory::kElementwise;  // the classifier's
  uint32_t name_id = 0;         // into StepTimeline::names
};
// The GPU records of one step of one trace file, in the order of KinetoTrace::records (by start).
struct StepTimeline {
  std::string path;
  int32_t rank = -1;
  int32_t step = -1;               // StepMeasurement::step of the chosen step
  int32_t steps = 0;               // steps the analysis measured in the file
  int64_t start_ns = 0, end_ns = 0;  // the step's window (StepMeasurement start_ns, end_ns)
  double step_time_s = 0;          // its StepMeasurement::step_time_s
  std::string step_source;         // TraceSummary::step_source
  std::vector<StepInterval> intervals;
  std::vector<std::string> names;  // KinetoTrace::names (GPU record names)
};

// Index into s.steps() of the median-length step: the steps sorted by step_time_s (ties by
// position), the one at (n - 1) / 2, so with an odd count its step time is the median step time
// (MedianStep) and with an even count the lower of the two middle ones. -1 when s has no step.
int MedianLengthStepIndex(const v1::TraceSummary& s);

// The records of step s.steps(step_index) that overlap its window [start_ns, end_ns), each clipped
// to it (a record running across the window's start, as AnalyzeWindow clips it), with zero-length
// records dropped. InvalidArgument when step_index is out of range. Linear in the records.
absl::StatusOr<StepTimeline> StepTimelineOf(const KinetoTrace& t, const v1::TraceSummary& s, int step_index);

// Reads and analyses each file (one per rank) and merges the ranks (probe::MergeRanks). With two
// or more files, also the communication wait for other ranks (TraceReport.stragglers,
// AttributeCollectiveWaits in plugin/trace/stragglers.h; a file without distributedInfo is the rank
// of its position in `paths`; a rank id given twice leaves only a note there). Each trace is dropped after its analysis: what the straggler
// analysis keeps of it is its communication kernels and step windows.
// `timeline` (may be null, the default: nothing more is kept): the first file's median-length
// step (MedianLengthStepIndex, StepTimelineOf), taken before that trace is dropped.
absl::StatusOr<v1::TraceReport> AnalyzeKinetoTraces(const std::vector<std::string>& paths,
                                                    const KinetoOptions& read_options = {},
                                                    const AnalyzeOptions& options = {},
                                                    StepTimeline* timeline = nullptr);

// Whether a file looks like a Kineto trace rather than a probe report: the name ends in .json.gz
// / .pt.trace.json, or its first KiB holds "traceEvents".
bool LooksLikeKinetoTrace(const std::string& path);

// Microseconds as JSON number text ("1669783687464181", "4458676522690.655", "1.5e3") to
// integer nanoseconds, rounding to the nearest. InvalidArgument when not a number or outside
// +-kMaxAbsNs (reliability review 2, N13: 9,223,372,036,854,779 us overflowed the x1000).
constexpr int64_t kMaxAbsNs = (int64_t{1} << 62) - 1;
absl::StatusOr<int64_t> MicrosTextToNs(const char* text, size_t length);

}  // namespace stepcast::trace

#endif  // STEPCAST_PLUGIN_TRACE_KINETO_TRACE_H_
