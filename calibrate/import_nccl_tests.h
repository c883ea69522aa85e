// File: calibrate/import_nccl_tests.h
//
// Reads the output of NVIDIA's nccl-tests (every *_perf binary: all_reduce, all_gather,
// reduce_scatter, alltoall, sendrecv, broadcast, reduce, gather, scatter, hypercube), as printed
// to stdout or tagged by mpirun / srun, single- or multi-node, old (no root column, max-error
// column) and new (root and #wrong columns) table layouts, and the verbatim excerpts of
// tests/data/real_data/microbench/nccl/ (a "# collective:" header, rows only).
//
// Row layout (nccl-tests src/common.cu, PrintLine / the header it prints):
//   size(B) count type redop [root] | time(us) algbw(GB/s) busbw(GB/s) #wrong | (in-place: same)
// algbw = S / t and busbw = algbw x factor(n) (doc/PERFORMANCE.md; core/hardware.h BusBwFactor).
#ifndef STEPCAST_CALIBRATE_IMPORT_NCCL_TESTS_H_
#define STEPCAST_CALIBRATE_IMPORT_NCCL_TESTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "core/hardware.h"

namespace stepcast::calibrate {

// One result row. Times in seconds, bandwidths in bytes/s (GB = 1e9 B, as nccl-tests prints).
struct NcclTestsRow {
  int line = 0;
  double size_bytes = 0;
  int64_t count = 0;
  std::string type, redop;
  double out_of_place_time_s = 0, out_of_place_algbw_bytes_per_s = 0, out_of_place_busbw_bytes_per_s = 0;
  double in_place_time_s = 0, in_place_algbw_bytes_per_s = 0, in_place_busbw_bytes_per_s = 0;
  bool has_in_place = false;
};

struct NcclTestsLog {
  std::string path;
  int run = 0;                            // 1-based run of a file holding several; 0: the file's only run
  int first_line = 0;                     // the run's first line in the file
  std::string binary;                     // "all_reduce_perf"
  std::string binary_from;                // where the binary's name was read
  std::optional<Collective> collective;   // empty for broadcast, reduce, gather, scatter, hypercube
  int64_t ranks = 0;
  std::string ranks_from;                 // "rank lines", "--ranks", "header", "busbw/algbw of line N"
  int64_t ranks_per_node = 0;
  std::string ranks_per_node_from;
  int64_t nodes = 0;
  std::string hardware;                   // "# hardware:" excerpt header, or the rank lines' GPU name
  bool hardware_is_gpu_name = false;      // from the rank lines (a device name), not free text
  bool full_log = false;                  // has nccl-tests' own header ("# nThread ...")
  std::vector<NcclTestsRow> rows;         // sizes > 0, in log order
  int skipped_zero_rows = 0;
  double avg_busbw_bytes_per_s = 0;       // the footer's "# Avg bus bandwidth", 0 if absent
  Scope scope() const { return nodes > 1 ? Scope::kInterNode : Scope::kIntraNode; }
  // "path" or "path (run 2)".
  std::string Name() const;
};

struct NcclTestsOptions {
  std::string binary;             // overrides the binary the log names ("all_reduce_perf" or "all_reduce")
  int64_t ranks = 0;              // overrides the ranks
  int64_t ranks_per_node = 0;     // overrides ranks per node (used when the log has no rank lines)
  int64_t default_ranks_per_node = 8;  // when neither the log nor the options say (the preset's node)
};

// True when `text` looks like nccl-tests output (its header, a "# collective:" excerpt header, or
// result rows).
bool LooksLikeNcclTests(absl::string_view text);

// Parses every run of a log file. A file may hold several runs (a job log appending each
// *_perf binary's output, or two published runs pasted together): a run ends at its
// "# Avg bus bandwidth" footer, or where the message size goes down (a headerless paste).
//
// Per run, the binary comes from --collective, the run's "# Collective test starting" line, the
// file's "# collective:" excerpt header, a command line in the run naming *_perf, the file name,
// and else from the rows themselves (nccl-tests src/*.cu TimeTest calls): reduction op "none"
// with root -1 is all_gather or alltoall (refused as ambiguous: pass --collective), a reduction op
// with root -1 is all_reduce when busbw/algbw > 1 (2(n-1)/n, n >= 3), reduce_scatter when < 1
// ((n-1)/n), and ambiguous at exactly 1 (sendrecv, or all_reduce over 2 ranks); a root >= 0 is
// broadcast / reduce / gather / scatter, which have no profile slot.
// Ranks: --ranks, the run's "#  Rank" lines, the excerpt header, busbw/algbw of the best row,
// else nThread x nGpus of the "# nThread" header, or -t x -g of a command line naming *_perf, when
// the log shows no launcher (mpirun, srun, a launcher's output tag) and the factor cannot tell
// (sendrecv: busbw = algbw for any n).
//
// Errors (InvalidArgument, "<path>:<line>: ..."): an unknown binary, a row with the wrong number
// of columns (a truncated line), non-numeric cells, wrong elements reported by nccl-tests' check,
// a full run without its "# Avg bus bandwidth" footer (the run did not finish), no rows, ranks
// that cannot be told; and impossible logs (reliability review 2, N9): a row whose algbw is not
// its size over its time (nccl-tests computes algbw = S / t; printed to 0.01 GB/s, compared
// within 0.006 GB/s + 2%), a busbw that is not algbw x the binary's factor for the run's ranks
// (nccl-tests doc/PERFORMANCE.md, the same tolerance), fewer than 2 or more than 2^24 ranks.
absl::StatusOr<std::vector<NcclTestsLog>> ParseNcclTestsLogs(absl::string_view text, const std::string& path,
                                                             const NcclTestsOptions& options);

// The same for a file of exactly one run; a second run is an error naming its first line.
absl::StatusOr<NcclTestsLog> ParseNcclTestsLog(absl::string_view text, const std::string& path,
                                               const NcclTestsOptions& options);

// nccl-tests' busbw factor of a binary for n ranks (doc/PERFORMANCE.md): all_reduce 2(n-1)/n;
// all_gather, reduce_scatter, alltoall, gather, scatter (n-1)/n; broadcast, reduce, sendrecv,
// hypercube 1. 0 for an unknown binary.
double NcclTestsBusBwFactor(const std::string& binary, int64_t n);

// The binary a name refers to ("all_reduce", "allreduce", "all_reduce_perf" -> "all_reduce_perf");
// empty when it names none.
std::string NcclTestsBinary(absl::string_view name);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_IMPORT_NCCL_TESTS_H_
