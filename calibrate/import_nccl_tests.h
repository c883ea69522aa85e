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
  std::string binary;                     // "all_reduce_perf"
  std::string binary_from;                // where the binary's name was read
  std::optional<Collective> collective;   // empty for broadcast, reduce, gather, scatter, hypercube
  int64_t ranks = 0;
  std::string ranks_from;                 // "rank lines", "--ranks", "header", "busbw/algbw of line N"
  int64_t ranks_per_node = 0;
  std::string ranks_per_node_from;
  int64_t nodes = 0;
  std::string hardware;                   // "# hardware:" excerpt header, or the rank lines' GPU name
  bool full_log = false;                  // has nccl-tests' own header ("# nThread ...")
  std::vector<NcclTestsRow> rows;         // sizes > 0, in log order
  int skipped_zero_rows = 0;
  double avg_busbw_bytes_per_s = 0;       // the footer's "# Avg bus bandwidth", 0 if absent
  Scope scope() const { return nodes > 1 ? Scope::kInterNode : Scope::kIntraNode; }
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

// Parses one log. Errors (InvalidArgument, "<path>:<line>: ..."): an unknown binary, a row with
// the wrong number of columns (a truncated line), non-numeric cells, wrong elements reported by
// nccl-tests' check, sizes that go down within one sweep, a full log without its
// "# Avg bus bandwidth" footer (the run did not finish), no rows, ranks that cannot be told.
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
