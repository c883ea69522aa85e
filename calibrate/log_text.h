// File: calibrate/log_text.h
//
// Line and token helpers shared by the benchmark-log importers (calibrate/import_*.cc): lines
// with their 1-based numbers, whitespace tokens, strict number parsing, and the "file:line:"
// prefix of every import error.
#ifndef STEPCAST_CALIBRATE_LOG_TEXT_H_
#define STEPCAST_CALIBRATE_LOG_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"

namespace stepcast::calibrate {

struct LogLine {
  int number = 0;         // 1-based
  absl::string_view text;  // without the line end (\n or \r\n)
};
// Every line of `text` (a trailing line without a newline included).
std::vector<LogLine> SplitLines(absl::string_view text);

// Whitespace-separated tokens.
std::vector<absl::string_view> Tokens(absl::string_view line);

// Strict parses of a whole token: no trailing characters, finite values.
std::optional<double> ParseDouble(absl::string_view token);
std::optional<int64_t> ParseInt(absl::string_view token);

// The line without an MPI launcher's output tag: OpenMPI's "[1,0]<stdout>:" (--tag-output) and
// Slurm's "0: " (srun --label), as nccl-tests logs from mpirun / srun carry them.
absl::string_view StripLauncherTag(absl::string_view line);

// InvalidArgument "<path>:<line>: <what>" (line 0: "<path>: <what>").
absl::Status LogError(const std::string& path, int line, absl::string_view what);

// Reads a whole file; NotFound / PermissionDenied naming the path.
absl::Status ReadWholeFile(const std::string& path, std::string* out);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_LOG_TEXT_H_
