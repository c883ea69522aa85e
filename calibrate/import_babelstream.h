// File: calibrate/import_babelstream.h
//
// Reads BabelStream's output (UoB-HPC/BabelStream src/main.cpp, versions 3-5): the table
//   Function    MBytes/sec  Min (sec)   Max         Average
//   Copy        1394588.665 0.00038     0.00039     0.00039
// (MiBytes/sec with --mibibytes), its --csv form ("function,num_times,n_elements,sizeof,
// max_mbytes_per_sec,min_runtime,max_runtime,avg_runtime"), and the --triad-only summary
// "Bandwidth (GB/s):  X". BabelStream's rate is bytes moved (Copy and Mul 2 arrays, Add and Triad
// 3, Dot 2, Nstream 4) over the fastest of its timed runs (the first discarded).
#ifndef STEPCAST_CALIBRATE_IMPORT_BABELSTREAM_H_
#define STEPCAST_CALIBRATE_IMPORT_BABELSTREAM_H_

#include <map>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace stepcast::calibrate {

struct BabelStreamLog {
  std::string path;
  std::string device;                       // "Using CUDA device ..." when printed
  std::string precision;                    // "double" / "float" when printed
  std::map<std::string, double> bytes_per_s;  // lower-case kernel ("copy", "triad", ...) -> best rate
  std::map<std::string, int> line;            // kernel -> its line
};

bool LooksLikeBabelStream(absl::string_view text);

// Errors "<path>:<line>: ...": a kernel row that is cut short or not numeric, no kernel rows.
absl::StatusOr<BabelStreamLog> ParseBabelStreamLog(absl::string_view text, const std::string& path);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_IMPORT_BABELSTREAM_H_
