// File: calibrate/import.h
//
// `stepcast-calibrate import`: builds or updates a rate profile from the benchmark logs a cluster
// already has, merged over a base profile (a hardware preset's reference profile, or a profile
// given with --base), every imported value's source naming its file and lines:
//   * nccl-tests (calibrate/import_nccl_tests.h): one measured curve per (collective, scope,
//     ranks, ranks per node); a point's time is the mean of the out-of-place and in-place columns
//     (both time the same collective at that size); logs of the same key are merged size by size
//     (the median over the logs);
//   * mamf-finder (import_mamf.h): GEMM points per dtype and shape (mean TFLOPS, its results
//     table's figure); several logs (GPUs) of one shape keep the slowest (a synchronous job runs at
//     its slowest GPU);
//   * TraceLens GEMM.csv (import_tracelens.h): GEMM points per dtype and shape;
//   * BabelStream (import_babelstream.h): HBM bandwidth from Copy (read + write, as stepcast's own
//     copy kernel counts it), the slowest of several logs;
//   * nvbandwidth (import_nvbandwidth.h): HBM from device_local_copy x 2 (it counts the bytes
//     once) when no BabelStream log is given; the intra-node send/recv rate from the median
//     off-diagonal device_to_device_memcpy_write_ce cell when no nccl-tests sendrecv log is.
// Imports merge, never shrink: imported GEMM points join the base's points of their dtype (an
// imported shape replaces the base's point of the same shape; a base flat rate of the dtype, which
// would answer every shape, is replaced by the imported table); collectives: see MergeCollectives.
// Every rate carries its origin (core/hardware.h RateOrigin: imported, or the base's: reference
// for a preset's reference profile, measured / imported for a profile given with --base), and the
// profile its provenance (ProfileProvenance: tool, date, the logs, their GPU, ranks and nodes).
//
// A log of another GPU than --hardware is refused naming both (an RTX 2080 Ti's HBM or an AMD
// Radeon's GEMM rates would otherwise enter an H100 profile; gpu code review 2, N3), unless
// ImportOptions::allow_other_gpu: nccl-tests rank lines' device, BabelStream's "Using <API> device
// <name>", mamf-finder's "DeviceProperties(name='<name>'", matched with proto/catalog.h
// HardwarePresetForGpuName (a device name no preset matches is another GPU; the free text of an
// excerpt's "# hardware:" line that no preset matches is noted, not refused).
// Impossible values are refused, not imported (reliability review 2, N9): an HBM rate above the
// --hardware datasheet's HBM bandwidth (x 1.02 for the datasheet's rounding: a copy that fast ran
// in cache, BabelStream's README asks for arrays far larger than the caches) or below 1% of it (no
// memory measurement: a unit or a broken run); a GEMM rate above the datasheet's dense peak of its
// dtype (x 1.02); a GEMM whose operands (m k + k n + m n elements, 1 byte each at least) do not
// fit in the GPU's memory; a BabelStream log that reports "Validation failed" (its kernels'
// results were wrong).
#ifndef STEPCAST_CALIBRATE_IMPORT_H_
#define STEPCAST_CALIBRATE_IMPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/hardware.h"
#include "stepcast/v1/hardware.pb.h"

namespace stepcast::calibrate {

enum class LogKind { kNcclTests, kMamfFinder, kBabelStream, kNvbandwidth, kTraceLensGemm };
const char* LogKindName(LogKind k);
// The kind of a log from its content. InvalidArgument naming the file and its first line when it
// is none of them.
absl::StatusOr<LogKind> DetectLogKind(absl::string_view text, const std::string& path);

struct ImportOptions {
  std::string name;              // the profile's name (default "<hardware>-imported")
  std::string hardware;          // the preset name the profile is for ("h100-sxm")
  std::string collective;        // nccl-tests binary for every nccl-tests log (when they do not say)
  int64_t ranks = 0;             // nccl-tests ranks override
  int64_t ranks_per_node = 0;    // nccl-tests ranks per node override
  bool allow_other_gpu = false;  // import logs of another GPU than `hardware` (noted in the profile)
  std::string base_name;         // for the provenance: what the base is ("" = the preset's reference profile)
};

struct ImportResult {
  v1::RateProfile profile;
  std::vector<std::string> summary;  // one line per imported value, for the user
};

// Imports `logs` ((path, text) pairs) over `base`: `base_is_reference` marks every value kept from
// it as "reference profile (<hardware>): <source>". `hw` gives the node size (ranks per node when
// a log does not say) and the name checks (a log naming other hardware is noted). Errors: the
// first log that cannot be read (file and line), or a profile that does not validate.
absl::StatusOr<ImportResult> ImportLogTexts(const std::vector<std::pair<std::string, std::string>>& logs,
                                            const Hardware& hw, const RateProfile& base, bool base_is_reference,
                                            const ImportOptions& options);
// The same, reading each path.
absl::StatusOr<ImportResult> ImportLogFiles(const std::vector<std::string>& paths, const Hardware& hw,
                                            const RateProfile& base, bool base_is_reference,
                                            const ImportOptions& options);

// Merges measured or imported collective curves (`curves`, each point's origin set) into `base`
// entries. Merge, never shrink (gpu code review 2, N1: a 256 MiB-2 GiB log replaced the reference's
// 8 B-16 GiB curve, and the model held the 256 MiB time below it: a 1-16 MiB all-reduce 9-40x too
// slow). Each curve covers the union of its sizes and the base's:
//  * inside the curve's sizes [smallest, largest] its points alone (they are what was measured);
//  * outside them, what the base gave: the points of the base curve of the same (collective,
//    scope, group size, ranks per node), unchanged; without one, intra-node, the base's estimate
//    for that group (the entry the step model reads, core/step_time.cc StepModel::Comm:
//    the alpha-beta form, or a curve of another group size scaled by EstimateCollective) sampled
//    on the curve's grid continued by factors of 2, down to 8 B (nccl-tests' smallest message)
//    and up to 16 GiB (the largest size of the reference curves); inter-node without a base curve
//    of that layout, nothing is added (the step model stripes the alpha-beta entry over a group's
//    members per node, which a sampled curve cannot carry);
//  * at each junction, going outwards from the curve, base points whose time would not grow with
//    size across it by more than the curve's own repeat spread `tolerance[i]` (below the curve: a
//    time above the curve's smallest time x (1 + tolerance); above it: below its largest time x
//    (1 - tolerance)) are dropped, up to the first that agrees (points further out are kept as
//    they are, the base's own spikes included): on one
//    cluster a larger message does not take less time, so such a point is the other cluster's (a
//    faster reference above a slower log), said in `notes`. The import's tolerance is the largest
//    relative difference of a log's out-of-place and in-place times (two timings of the same
//    collective and size: what the log itself calls the same); measured curves have none (0);
//  * each point keeps its origin; alpha = the floor of the merged sizes <= 4 KiB (0, "not
//    measured", when there is none), busbw = nccl-tests busbw of the largest size.
// Then:
//  * intra-node: the curves come first and the base's alpha-beta entry of that collective is
//    dropped (a curve of this cluster, scaled to other group sizes, beats a published figure);
//  * inter-node: the base's alpha-beta entry stays first (the step model stripes it over a group's
//    members per node; a curve is exact only for its own ranks and ranks per node), the curves
//    follow (RateProfile::FindCollective(c, s, n, members_per_node) finds them).
// `notes`, when given, receives one line per merged curve (what was kept and dropped, and the
// ratio of the curve to the base at its smallest and largest sizes).
std::vector<CollectiveRate> MergeCollectives(const std::vector<CollectiveRate>& base,
                                             const std::vector<CollectiveRate>& curves,
                                             std::vector<std::string>* notes = nullptr,
                                             const std::vector<double>& tolerance = {});

// A profile curve from measured points (size ascending, median time): alpha = the floor (the
// smallest time) of the sizes <= 4 KiB, 0 when the points have none (a 256 MiB time is no
// latency: gpu code review 2, N1); busbw = nccl-tests busbw of the largest size.
CollectiveRate CurveFromPoints(Collective c, Scope s, int64_t ranks, int64_t ranks_per_node,
                               const std::vector<CollectivePoint>& points, const std::string& source);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_IMPORT_H_
