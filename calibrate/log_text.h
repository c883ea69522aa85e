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

// The largest benchmark log `import` reads (64 MiB: an nccl-tests log of 128 ranks with
// NCCL_DEBUG=INFO is a few MB; a mamf-finder output file of 3,375 shapes 0.4 MB).
inline constexpr int64_t kMaxLogBytes = int64_t{64} << 20;

// Reads a whole log file: only a regular file (not a device such as /dev/zero, a FIFO that would
// block, or a directory) of at most `max_bytes`. NotFound naming the path; InvalidArgument for the
// others (proto/codec.h ReadInputFile).
absl::Status ReadWholeFile(const std::string& path, std::string* out, int64_t max_bytes = kMaxLogBytes);

// Words of free text for keyword scans (no regular expressions over untrusted text: libstdc++'s
// std::regex recursed once per character, a 30 KB word overflowed the stack; reliability review
// 2, N4): maximal runs of ASCII digits, or of ASCII letters, each its own word, lower-cased;
// everything else separates words. "2nodes x8 GPUs" -> {"2", "nodes", "x", "8", "gpus"}. Linear
// in the text.
std::vector<std::string> Words(absl::string_view text);

// Identifier-like words ([A-Za-z0-9_]+, case kept): "./build/all_reduce_perf -b 8" ->
// {"build", "all_reduce_perf", "b", "8"}. Linear in the text.
std::vector<absl::string_view> IdentifierWords(absl::string_view text);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_LOG_TEXT_H_
