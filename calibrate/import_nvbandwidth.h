// File: calibrate/import_nvbandwidth.h
//
// Reads NVIDIA nvbandwidth's text output (NVIDIA/nvbandwidth, README "Example output"): per test
//   Running device_to_device_memcpy_write_ce.
//   memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)
//              0         1 ...
//    0       N/A    389.12 ...
//   SUM device_to_device_memcpy_write_ce 2723.84
// nvbandwidth times `loopCount` copies between events behind a spin kernel and reports the median
// of its trials (README; memcpy.cpp). GB = 1e9 B. A device_local_copy counts the bytes once
// (nvbandwidth issue #48): the HBM traffic is twice the figure.
#ifndef STEPCAST_CALIBRATE_IMPORT_NVBANDWIDTH_H_
#define STEPCAST_CALIBRATE_IMPORT_NVBANDWIDTH_H_

#include <map>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace stepcast::calibrate {

struct NvbandwidthTest {
  std::string name;
  std::string title;  // "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)"
  int line = 0;       // of "Running <name>."
  std::vector<std::vector<std::optional<double>>> matrix;  // cells in the printed unit; N/A empty
  std::optional<double> sum;
  // The median of the numeric cells (the off-diagonal ones where the matrix is square and the
  // diagonal is N/A or 0), in bytes/s for bandwidth tests; 0 when there is none.
  double MedianCellBytesPerS() const;
};

struct NvbandwidthLog {
  std::string path;
  std::map<std::string, NvbandwidthTest> tests;  // by name
};

bool LooksLikeNvbandwidth(absl::string_view text);

// Errors "<path>:<line>: ...": a matrix row that is not numeric or "N/A", a test that starts but
// never prints its SUM line (a truncated log), no test.
absl::StatusOr<NvbandwidthLog> ParseNvbandwidthLog(absl::string_view text, const std::string& path);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_IMPORT_NVBANDWIDTH_H_
