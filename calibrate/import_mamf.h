// File: calibrate/import_mamf.h
//
// Reads the log of ml-engineering's mamf-finder.py (Maximum Achievable Matmul FLOPS finder;
// stas00/ml-engineering compute/accelerator/benchmarks/mamf-finder.py), every version:
//  * per-shape rows, as its output file keeps them:
//      "    12 |  794.5(mean)  795.0(median)  801.0(max) @ 2048x2048x13312 | best: ..."
//    and, in later versions, "#  MxNxK  mean median max best [W MHz]" scout rows:
//      "    18  3072x2816x20480     828.4  828.6  831.6  828.4   506  1980  <- best mean";
//  * the summary "Tried N shapes => the best outcomes were:" with "mean: / median: / max:" lines,
//    or the later "MAMF (max achievable, boost burst): 842 TFLOPS @ 3072x2816x20480 (MxNxK)" and
//    "MSMF (max sustainable, saturated): 722 TFLOPS @ ..." lines.
// The dtype comes from its "** Dtype: torch.bfloat16" header (or --dtype in the command line).
// TFLOPS = 1e12 FLOP/s; FLOPs = 2 m n k (mamf-finder's flos).
//
// mamf-finder prints each shape's row with end="\r" (mamf-finder.py:501 @ 744d01e1); only its
// --output_file Tee turns the "\r" into newlines (:243-249). A stdout capture (`| tee log`) holds
// every row on one line joined by "\r", a terminal copy only the last row. Rows are split at "\r"
// too; when the log holds fewer rows than its summary's "Tried N shapes", the summary's best shape
// is what the log measured (MamfLog::use_summary), not the rows it happens to keep.
// Plain token scans, no regular expressions (reliability review 2, N4: std::regex recursed per
// character and crashed on a 100 KB line).
#ifndef STEPCAST_CALIBRATE_IMPORT_MAMF_H_
#define STEPCAST_CALIBRATE_IMPORT_MAMF_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"

namespace stepcast::calibrate {

struct MamfShape {
  int line = 0;
  int64_t m = 0, n = 0, k = 0;
  double mean_flops_per_s = 0;    // mamf-finder's "mean" (its results table's figure)
  double median_flops_per_s = 0;  // 0 where the row has none
  double max_flops_per_s = 0;     // from the fastest iteration
};

struct MamfLog {
  std::string path;
  DType dtype = DType::kBF16;
  std::string device;            // the header's device line, when present
  std::vector<MamfShape> shapes;  // per-shape rows (may be empty: summary only)
  // The summary's headline: "mean:" of the old summary, or MSMF (sustained) of the new one, else
  // MAMF. line 0 when the log has no summary (an interrupted run keeps its rows).
  MamfShape headline;
  std::string headline_kind;  // "mean", "MSMF", "MAMF"
  int64_t tried_shapes = 0;   // the summary's "Tried N shapes"; 0 when absent
  // The import uses the headline, not the rows: the log holds a summary and fewer rows than the
  // shapes it tried (a terminal copy), or no rows.
  bool use_summary = false;
  std::string device_name;  // the device's name (from "name='...'" of the properties line), when printed
};

bool LooksLikeMamfFinder(absl::string_view text);

// Errors "<path>:<line>: ...": no dtype, an unknown dtype, a malformed shape or rate, no rows and
// no summary (nothing measured).
absl::StatusOr<MamfLog> ParseMamfFinderLog(absl::string_view text, const std::string& path);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_IMPORT_MAMF_H_
