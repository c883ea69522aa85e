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
// Imported GEMM points of a dtype replace the base's points of that dtype. Collectives: see
// MergeCollectives.
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

// Merges measured or imported collective curves (`curves`) into `base` entries:
//  * an entry of `base` with the same (collective, scope, group size, ranks per node) is replaced;
//  * intra-node: the curves come first and the base's alpha-beta entry of that collective is
//    dropped (a curve of this cluster, scaled to other group sizes, beats a published figure);
//  * inter-node: the base's alpha-beta entry stays first (the step model stripes it over a group's
//    members per node; a curve is exact only for its own ranks and ranks per node), the curves
//    follow (RateProfile::FindCollective(c, s, n, members_per_node) finds them).
std::vector<CollectiveRate> MergeCollectives(const std::vector<CollectiveRate>& base,
                                             const std::vector<CollectiveRate>& curves);

// A profile curve from measured points (size ascending, median time): alpha = the floor of the
// sizes <= 4 KiB (calibrate/fits.h FitAlphaBeta), busbw = nccl-tests busbw of the largest size.
CollectiveRate CurveFromPoints(Collective c, Scope s, int64_t ranks, int64_t ranks_per_node,
                               const std::vector<CollectivePoint>& points, const std::string& source);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_IMPORT_H_
