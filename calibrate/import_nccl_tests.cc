#include "calibrate/import_nccl_tests.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "calibrate/log_text.h"

namespace stepcast::calibrate {
namespace {

struct BinaryInfo {
  const char* binary;
  const char* key;  // lower case, no '_' / '-'
  std::optional<Collective> collective;
};
const std::vector<BinaryInfo>& Binaries() {
  static const auto* v = new std::vector<BinaryInfo>{
      {"all_reduce_perf", "allreduce", Collective::kAllReduce},
      {"all_gather_perf", "allgather", Collective::kAllGather},
      {"reduce_scatter_perf", "reducescatter", Collective::kReduceScatter},
      {"alltoall_perf", "alltoall", Collective::kAllToAll},
      {"sendrecv_perf", "sendrecv", Collective::kSendRecv},
      {"broadcast_perf", "broadcast", std::nullopt},
      {"reduce_perf", "reduce", std::nullopt},
      {"gather_perf", "gather", std::nullopt},
      {"scatter_perf", "scatter", std::nullopt},
      {"hypercube_perf", "hypercube", std::nullopt},
  };
  return *v;
}

const BinaryInfo* FindBinary(const std::string& binary) {
  for (const auto& b : Binaries()) {
    if (binary == b.binary) return &b;
  }
  return nullptr;
}

// Whole-token wrong-element cell: "N/A", an integer count, or (old nccl-tests) a max error.
absl::Status CheckWrong(absl::string_view cell, const std::string& path, int line, const char* which) {
  if (cell == "N/A") return absl::OkStatus();
  if (std::optional<int64_t> n = ParseInt(cell)) {
    if (*n > 0) {
      return LogError(path, line, absl::StrCat("nccl-tests found ", *n, " wrong elements (", which,
                                               "): this size's results are not valid"));
    }
    return absl::OkStatus();
  }
  if (ParseDouble(cell)) return absl::OkStatus();  // max error, as nccl-tests printed before 2.13
  return LogError(path, line, absl::StrCat("'", cell, "' is not a #wrong value (", which, ")"));
}

}  // namespace

std::string NcclTestsBinary(absl::string_view name) {
  std::string key = absl::AsciiStrToLower(std::string(name));
  if (absl::EndsWith(key, "_perf")) key.resize(key.size() - 5);
  key = absl::StrReplaceAll(key, {{"_", ""}, {"-", ""}});
  if (key == "alltoall" || key == "a2a") return "alltoall_perf";
  for (const auto& b : Binaries()) {
    if (key == b.key) return b.binary;
  }
  return "";
}

double NcclTestsBusBwFactor(const std::string& binary, int64_t n) {
  if (n <= 1) return 0;
  const double nn = static_cast<double>(n);
  if (binary == "all_reduce_perf") return 2 * (nn - 1) / nn;
  if (binary == "all_gather_perf" || binary == "reduce_scatter_perf" || binary == "alltoall_perf" ||
      binary == "gather_perf" || binary == "scatter_perf") {
    return (nn - 1) / nn;
  }
  if (FindBinary(binary) != nullptr) return 1;
  return 0;
}

bool LooksLikeNcclTests(absl::string_view text) {
  if (text.find("# nThread") != absl::string_view::npos || text.find("Collective test starting") != absl::string_view::npos ||
      text.find("# collective:") != absl::string_view::npos || text.find("Avg bus bandwidth") != absl::string_view::npos) {
    return true;
  }
  // A result row: two integers, a type and a reduction, then at least 8 more cells.
  int rows = 0;
  for (const LogLine& l : SplitLines(text)) {
    std::vector<absl::string_view> t = Tokens(StripLauncherTag(l.text));
    if (t.size() >= 12 && ParseInt(t[0]) && ParseInt(t[1]) && !ParseDouble(t[2]) && !ParseDouble(t[3])) ++rows;
    if (rows >= 2) return true;
  }
  return false;
}

std::string NcclTestsLog::Name() const { return run > 0 ? absl::StrCat(path, " (run ", run, ")") : path; }

namespace {

constexpr int64_t kMaxRanks = int64_t{1} << 24;  // more is no cluster (the ranks check below)

// Whether `shown` (a bandwidth nccl-tests printed with "%6.2f" GB/s) is `value` (bytes/s) as
// printed: within the printed rounding (0.005 GB/s, and 0.001 more for the time's own rounding)
// plus 2% (the time column keeps 4-5 significant digits).
bool PrintedBandwidthIs(double shown_bytes_per_s, double value_bytes_per_s) {
  return std::fabs(shown_bytes_per_s - value_bytes_per_s) <= 0.006e9 + 0.02 * std::fabs(shown_bytes_per_s);
}

// Facts of the whole file (the excerpt format of tests/data/real_data/microbench/nccl).
struct FileFacts {
  std::string binary;          // "# collective:" excerpt header
  int binary_line = 0;
  int64_t ranks = 0;           // the excerpt header's rank count
  std::string ranks_line;
  std::string hardware;        // "# hardware:" free text
  int64_t hw_nodes = 0, hw_per_node = 0;
};

// "# hardware:" counts: "<n> nodes x <m>", "<m> GPUs per node", "one node" / "single node" (word
// scans, linear in the line; reliability review 2 N4).
absl::Status ReadHardwareCounts(absl::string_view text, const std::string& path, int line, FileFacts* f) {
  const std::vector<std::string> w = Words(text);
  auto count = [&](const std::string& t, int64_t* v) -> absl::Status {
    std::optional<int64_t> x = ParseInt(t);
    if (!x || *x > (int64_t{1} << 31)) {
      return LogError(path, line, absl::StrCat("hardware: count '", t.substr(0, 40), t.size() > 40 ? "..." : "",
                                               "' is out of range (0 to 2^31)"));
    }
    *v = *x;
    return absl::OkStatus();
  };
  auto number = [](const std::string& t) { return !t.empty() && absl::ascii_isdigit(static_cast<unsigned char>(t[0])); };
  for (size_t i = 0; i + 3 < w.size(); ++i) {
    if (number(w[i]) && (w[i + 1] == "node" || w[i + 1] == "nodes") && w[i + 2] == "x" && number(w[i + 3])) {
      if (absl::Status s = count(w[i], &f->hw_nodes); !s.ok()) return s;
      return count(w[i + 3], &f->hw_per_node);
    }
  }
  for (size_t i = 0; i + 3 < w.size(); ++i) {
    if (number(w[i]) && (w[i + 1] == "gpu" || w[i + 1] == "gpus") && w[i + 2] == "per" && w[i + 3] == "node") {
      return count(w[i], &f->hw_per_node);
    }
  }
  for (size_t i = 0; i + 1 < w.size(); ++i) {
    if ((w[i] == "one" || w[i] == "single") && w[i + 1] == "node") {
      f->hw_nodes = 1;
      break;
    }
  }
  return absl::OkStatus();
}

// A result row's cells, or nullopt when the line is not a row (a header, a command line, prose).
struct RowCells {
  std::vector<absl::string_view> t;
};
bool IsRowStart(const std::vector<absl::string_view>& t) {
  return t.size() >= 2 && !t[0].empty() && t[0][0] != '#' && ParseInt(t[0]) && ParseInt(t[1]);
}

// The binary from a row's reduction op, root and busbw/algbw (see the header); empty with the
// reason when the rows cannot tell.
std::string BinaryFromRows(const std::vector<NcclTestsRow>& rows, bool has_root, int64_t root, std::string* why) {
  if (rows.empty()) return "";
  const std::string op = absl::AsciiStrToLower(rows.front().redop);
  if (has_root && root >= 0) {
    *why = absl::StrCat("root ", root, ": a rooted collective (broadcast, reduce, gather or scatter)");
    return "";
  }
  if (op == "none" || op.empty()) {
    *why = "reduction op 'none': all_gather or alltoall (the same busbw factor)";
    return "";
  }
  const NcclTestsRow* best = &rows.front();
  for (const auto& r : rows) {
    if (r.out_of_place_algbw_bytes_per_s > best->out_of_place_algbw_bytes_per_s) best = &r;
  }
  if (!(best->out_of_place_algbw_bytes_per_s >= 1e9)) {
    *why = "every row's algbw is below 1 GB/s: busbw/algbw is not read to 1%";
    return "";
  }
  const double ratio = best->out_of_place_busbw_bytes_per_s / best->out_of_place_algbw_bytes_per_s;
  if (ratio > 1.02 && ratio < 2) return "all_reduce_perf";
  if (ratio >= 0.45 && ratio < 0.98) return "reduce_scatter_perf";
  *why = absl::StrFormat("reduction op '%s' with busbw/algbw = %.3f: sendrecv, or all_reduce over 2 ranks", op, ratio);
  return "";
}

struct Segment {
  size_t begin = 0, end = 0;  // line indices [begin, end)
};

// ParseRun in steps, in the order it runs them: the run's header lines, its rows, then the
// binary, the ranks and the ranks per node, each from the first source that gives it
// (import_nccl_tests.h lists the sources in that order).

// What a run's lines other than its rows say (step 1).
struct RunHeader {
  std::string binary_header;   // "# Collective test starting: <binary>"
  std::string binary_command;  // a command line naming *_perf
  std::map<std::string, std::set<int64_t>> ranks_by_host;  // "# Rank N ... on <host> device ..." lines
  std::string gpu_name;        // the first rank line's device name
  bool footer = false;         // "# Avg bus bandwidth" seen
  int64_t header_threads = 0, header_gpus = 0;    // "# nThread N nGpus M"
  int64_t command_threads = 0, command_gpus = 0;  // the command's -t / -g
};

// A line that is not a '#' line: the first command line naming a *_perf binary, with its
// -t / --nthreads and -g / --ngpus (nccl-tests README): threads x GPUs per process, the ranks of a
// single-process run.
void ReadCommandLine(absl::string_view body, RunHeader* h) {
  if (!h->binary_command.empty() || IsRowStart(Tokens(body))) return;
  for (absl::string_view w : IdentifierWords(body)) {
    const std::string word = absl::AsciiStrToLower(w);
    if (absl::EndsWith(word, "_perf") && FindBinary(word)) {
      h->binary_command = word;
      break;
    }
  }
  if (h->binary_command.empty()) return;
  std::vector<absl::string_view> t = Tokens(body);
  for (size_t k = 0; k + 1 < t.size(); ++k) {
    std::optional<int64_t> v = ParseInt(t[k + 1]);
    if (!v || *v <= 0 || *v > (int64_t{1} << 20)) continue;
    if (t[k] == "-t" || t[k] == "--nthreads") h->command_threads = *v;
    if (t[k] == "-g" || t[k] == "--ngpus") h->command_gpus = *v;
  }
}

// A '#' line of nccl-tests' own output (src/common.cu), `c` after the '#': "# nThread" header,
// "# Avg bus bandwidth" footer, "# Collective test starting:" and "# Rank" lines. Errors: an
// unknown binary on the "Collective test starting" line.
absl::Status ReadHashLine(absl::string_view c, int line, const std::string& path, RunHeader* h, NcclTestsLog* log) {
  if (absl::StartsWith(c, "nThread")) {
    log->full_log = true;
    std::vector<absl::string_view> t = Tokens(c);
    for (size_t k = 0; k + 1 < t.size(); ++k) {
      if (t[k] == "nThread") h->header_threads = ParseInt(t[k + 1]).value_or(0);
      if (t[k] == "nGpus") h->header_gpus = ParseInt(t[k + 1]).value_or(0);
    }
  }
  if (absl::StartsWith(c, "Avg bus bandwidth")) {
    h->footer = true;
    const size_t colon = c.find(':');
    if (colon != absl::string_view::npos) {
      if (auto v = ParseDouble(absl::StripAsciiWhitespace(c.substr(colon + 1)))) log->avg_busbw_bytes_per_s = *v * 1e9;
    }
  }
  if (absl::StartsWith(c, "Collective test starting:")) {
    h->binary_header = NcclTestsBinary(absl::StripAsciiWhitespace(c.substr(absl::string_view("Collective test starting:").size())));
    if (h->binary_header.empty()) {
      return LogError(path, line, absl::StrCat("unknown nccl-tests binary in '", c.substr(0, 80), "'"));
    }
  }
  if (absl::StartsWith(c, "Rank")) {
    // "#  Rank  0 Group  0 Pid  12345 on  host1 device  0 [0x1b] NVIDIA H100 80GB HBM3"
    std::vector<absl::string_view> t = Tokens(c);
    std::optional<int64_t> rank = t.size() > 1 ? ParseInt(t[1]) : std::nullopt;
    auto on = std::find(t.begin(), t.end(), "on");
    auto dev = std::find(t.begin(), t.end(), "device");
    if (rank && on != t.end() && on + 1 != t.end()) {
      h->ranks_by_host[std::string(*(on + 1))].insert(*rank);
      if (h->gpu_name.empty() && dev != t.end()) {
        const size_t bracket = c.find(']');
        if (bracket != absl::string_view::npos) h->gpu_name = std::string(absl::StripAsciiWhitespace(c.substr(bracket + 1)));
      }
    }
  }
  return absl::OkStatus();
}

// Step 1: the run's lines other than its rows.
absl::Status ReadRunHeader(const std::vector<LogLine>& lines, const Segment& seg, const std::string& path,
                           RunHeader* h, NcclTestsLog* log) {
  for (size_t i = seg.begin; i < seg.end; ++i) {
    const LogLine& l = lines[i];
    absl::string_view s = StripLauncherTag(l.text);
    absl::string_view body = absl::StripLeadingAsciiWhitespace(s);
    if (body.empty() || body[0] != '#') {
      ReadCommandLine(body, h);
      continue;
    }
    absl::string_view c = absl::StripLeadingAsciiWhitespace(body.substr(1));
    if (absl::Status st = ReadHashLine(c, l.number, path, h, log); !st.ok()) return st;
  }
  return absl::OkStatus();
}

// The table's shape as the rows so far show it (step 2).
struct RowTable {
  size_t columns = 0;  // of the run's first row: every row of one run has as many
  bool has_root = false;
  int64_t root = -1;
  int last_row_line = 0;
};

// One result row's cells (nccl-tests src/common.cu: size count type redop [root] then time algbw
// busbw #wrong of the out-of-place and of the in-place run; time in us, bandwidths in GB/s).
// Errors: a number where the type is, a truncated row or too many columns, a cell that is not a
// number, a #wrong count above 0.
absl::StatusOr<NcclTestsRow> ReadRowCells(const std::vector<absl::string_view>& t, int line, const std::string& path,
                                          RowTable* table) {
  if (t.size() >= 3 && ParseDouble(t[2])) {
    return LogError(path, line, absl::StrCat("'", t[2].substr(0, 40), "' where nccl-tests prints the data type"));
  }
  if (t.size() < 12) {
    return LogError(path, line,
                    absl::StrCat("truncated nccl-tests row: ", t.size(),
                                 " columns, want 12 (size count type redop, then time algbw busbw #wrong out-of-place "
                                 "and in-place) or 13 (with root)"));
  }
  if (table->columns != 0 && t.size() < table->columns) {
    return LogError(path, line,
                    absl::StrCat("truncated nccl-tests row: ", t.size(), " columns, the log's rows have ", table->columns));
  }
  if (t.size() > 13) {
    return LogError(path, line,
                    absl::StrCat(t.size(), " columns: not an nccl-tests table this importer knows (12 or 13 columns; "
                                           "the extra columns of -C or -I are not read)"));
  }
  if (table->columns == 0) table->columns = t.size();
  const size_t g = t.size() == 13 ? 5 : 4;
  if (t.size() == 13) {
    std::optional<int64_t> r = ParseInt(t[4]);
    if (!r) return LogError(path, line, absl::StrCat("'", t[4].substr(0, 40), "' where nccl-tests prints the root"));
    table->has_root = true;
    table->root = *r;
  }
  NcclTestsRow r;
  r.line = line;
  r.size_bytes = static_cast<double>(*ParseInt(t[0]));
  r.count = *ParseInt(t[1]);
  r.type = std::string(t[2].substr(0, 32));
  r.redop = std::string(t[3].substr(0, 32));
  double cell[6];
  const size_t idx[6] = {g, g + 1, g + 2, g + 4, g + 5, g + 6};
  for (int k = 0; k < 6; ++k) {
    std::optional<double> v = ParseDouble(t[idx[k]]);
    if (!v || *v < 0) {
      return LogError(path, line, absl::StrCat("column ", idx[k] + 1, ": '", t[idx[k]].substr(0, 40), "' is not a number"));
    }
    cell[k] = *v;
  }
  if (absl::Status st = CheckWrong(t[g + 3].substr(0, 40), path, line, "out-of-place"); !st.ok()) return st;
  if (absl::Status st = CheckWrong(t[g + 7].substr(0, 40), path, line, "in-place"); !st.ok()) return st;
  r.out_of_place_time_s = cell[0] * 1e-6;
  r.out_of_place_algbw_bytes_per_s = cell[1] * 1e9;
  r.out_of_place_busbw_bytes_per_s = cell[2] * 1e9;
  r.in_place_time_s = cell[3] * 1e-6;
  r.in_place_algbw_bytes_per_s = cell[4] * 1e9;
  r.in_place_busbw_bytes_per_s = cell[5] * 1e9;
  r.has_in_place = r.in_place_time_s > 0;
  return r;
}

// A row of a non-empty message is a measurement: its time is above 0 and each algbw is size / time
// (nccl-tests src/common.cu) as printed.
absl::Status CheckRowTimes(const NcclTestsRow& r, const std::string& path) {
  if (!(r.out_of_place_time_s > 0)) return LogError(path, r.line, "time 0 for a non-empty message");
  // algbw = S / t (nccl-tests src/common.cu): a row where it is not is no measurement.
  for (int k = 0; k < (r.has_in_place ? 2 : 1); ++k) {
    const double t_s = k == 0 ? r.out_of_place_time_s : r.in_place_time_s;
    const double shown = k == 0 ? r.out_of_place_algbw_bytes_per_s : r.in_place_algbw_bytes_per_s;
    if (!PrintedBandwidthIs(shown, r.size_bytes / t_s)) {
      return LogError(path, r.line,
                      absl::StrFormat("%s algbw %.2f GB/s is not size / time = %.0f B / %g us = %.4g GB/s: not a "
                                      "measurement nccl-tests printed",
                                      k == 0 ? "out-of-place" : "in-place", shown / 1e9, r.size_bytes, t_s * 1e6,
                                      r.size_bytes / t_s / 1e9));
    }
  }
  return absl::OkStatus();
}

// Step 2: the run's result rows (rows of size 0 counted, not kept). Errors: a row that cannot be
// read, no row, or a full log (its "# nThread" header seen) without its footer (the run did not
// finish).
absl::Status ReadRunRows(const std::vector<LogLine>& lines, const Segment& seg, const std::string& path,
                         const RunHeader& h, RowTable* table, NcclTestsLog* log) {
  for (size_t i = seg.begin; i < seg.end; ++i) {
    const LogLine& l = lines[i];
    absl::string_view s = StripLauncherTag(l.text);
    std::vector<absl::string_view> t = Tokens(s);
    if (!IsRowStart(t)) continue;
    absl::StatusOr<NcclTestsRow> r = ReadRowCells(t, l.number, path, table);
    if (!r.ok()) return r.status();
    table->last_row_line = l.number;
    if (r->size_bytes <= 0) {
      ++log->skipped_zero_rows;
      continue;
    }
    if (absl::Status st = CheckRowTimes(*r, path); !st.ok()) return st;
    log->rows.push_back(*std::move(r));
  }
  if (log->rows.empty()) return LogError(path, log->first_line, "no nccl-tests result rows");
  if (log->full_log && !h.footer) {
    return LogError(path, table->last_row_line,
                    "truncated: no '# Avg bus bandwidth' footer after the last row (the run did not finish)");
  }
  return absl::OkStatus();
}

// Step 3: the binary, from --collective, the run's "# Collective test starting" line, the file's
// "# collective:" excerpt header, a command line naming *_perf, the file name (a file of one run),
// else the rows (BinaryFromRows). Errors: an unknown --collective, or no source.
absl::Status PickBinary(const NcclTestsOptions& o, const RunHeader& h, const FileFacts& file, const RowTable& table,
                        const std::string& path, bool single_run, NcclTestsLog* log) {
  std::string rows_why;
  if (!o.binary.empty()) {
    log->binary = NcclTestsBinary(o.binary);
    if (log->binary.empty()) {
      return LogError(path, 0, absl::StrCat("--collective '", o.binary.substr(0, 80), "' names no nccl-tests binary"));
    }
    log->binary_from = "--collective";
  } else if (!h.binary_header.empty()) {
    log->binary = h.binary_header;
    log->binary_from = "the log's header";
  } else if (!file.binary.empty()) {
    log->binary = file.binary;
    log->binary_from = "the log's header";
  } else if (!h.binary_command.empty()) {
    log->binary = h.binary_command;
    log->binary_from = "the command line in the log";
  } else {
    if (single_run) {
      const std::string base = absl::AsciiStrToLower(std::filesystem::path(path).filename().string());
      for (const char* key : {"reduce_scatter", "reducescatter", "all_reduce", "allreduce", "all_gather", "allgather",
                              "alltoall", "all_to_all", "sendrecv", "send_recv"}) {
        if (base.find(key) != std::string::npos) {
          log->binary = NcclTestsBinary(key);
          log->binary_from = "the file name";
          break;
        }
      }
    }
    if (log->binary.empty()) {
      log->binary = BinaryFromRows(log->rows, table.has_root, table.root, &rows_why);
      if (!log->binary.empty()) {
        log->binary_from = absl::StrCat("the rows (reduction op '", log->rows.front().redop, "', busbw/algbw)");
      }
    }
  }
  if (log->binary.empty()) {
    return LogError(path, log->rows.front().line,
                    absl::StrCat("cannot tell which nccl-tests binary wrote this ", single_run ? "log" : "run",
                                 " (no '# Collective test starting' line, no command line naming *_perf, no collective "
                                 "in the file name; from the rows: ",
                                 rows_why, "): pass --collective"));
  }
  log->collective = FindBinary(log->binary)->collective;
  return absl::OkStatus();
}

// Step 4: the ranks, from --ranks, the rank lines, the excerpt header, busbw/algbw of the row of
// the highest algbw (when the binary's busbw factor depends on the ranks: nccl-tests
// doc/PERFORMANCE.md, 2(n-1)/n or (n-1)/n solved for n), a one-process run's nThread x nGpus or
// -t x -g (nccl-tests README). Errors: no source, or a count outside 2 to 2^24.
absl::Status PickRanks(const NcclTestsOptions& o, const RunHeader& h, const FileFacts& file, const std::string& path,
                       bool launcher_seen, NcclTestsLog* log) {
  int64_t rank_lines = 0;
  for (const auto& [host, rs] : h.ranks_by_host) rank_lines += static_cast<int64_t>(rs.size());
  const NcclTestsRow* best = &log->rows.front();
  for (const auto& r : log->rows) {
    if (r.out_of_place_algbw_bytes_per_s > best->out_of_place_algbw_bytes_per_s) best = &r;
  }
  const double ratio = best->out_of_place_algbw_bytes_per_s > 0
                           ? best->out_of_place_busbw_bytes_per_s / best->out_of_place_algbw_bytes_per_s
                           : 0;
  const bool factor_depends_on_n = NcclTestsBusBwFactor(log->binary, 4) != NcclTestsBusBwFactor(log->binary, 8);
  if (o.ranks > 0) {
    log->ranks = o.ranks;
    log->ranks_from = "--ranks";
  } else if (rank_lines > 0) {
    log->ranks = rank_lines;
    log->ranks_from = "the log's rank lines";
  } else if (file.ranks > 0) {
    log->ranks = file.ranks;
    log->ranks_from = file.ranks_line;
  } else if (factor_depends_on_n) {
    double n = 0;
    if (log->binary == "all_reduce_perf" && ratio > 0.9 && ratio < 2) n = 2 / (2 - ratio);
    if (NcclTestsBusBwFactor(log->binary, 4) == 0.75 && ratio >= 0.45 && ratio < 1) n = 1 / (1 - ratio);
    // More than 2^24 ranks (busbw/algbw within 1e-7 of its limit) is no cluster: not read as one.
    if (!(n >= 1.5) || n > kMaxRanks || std::fabs(n - std::round(n)) > 0.25) {
      return LogError(path, best->line,
                      absl::StrFormat("cannot tell the number of ranks from busbw/algbw = %.4f for %s (no rank lines "
                                      "in the log): pass --ranks",
                                      ratio, log->binary));
    }
    log->ranks = static_cast<int64_t>(std::llround(n));
    log->ranks_from = absl::StrCat("busbw/algbw of line ", best->line);
  } else if (h.header_threads > 0 && h.header_gpus > 0 && !launcher_seen) {
    // One process: nThread threads of nGpus GPUs each (nccl-tests README, "-t" and "-g").
    log->ranks = h.header_threads * h.header_gpus;
    log->ranks_from = "the '# nThread' header (one process: nThread x nGpus)";
  } else if (h.command_gpus > 0 && !launcher_seen) {
    log->ranks = std::max<int64_t>(h.command_threads, 1) * h.command_gpus;
    log->ranks_from = "the command line's -t x -g (one process)";
  } else {
    return LogError(path, best->line,
                    absl::StrCat("cannot tell the number of ranks: ", log->binary,
                                 "'s busbw is algbw for any rank count, and the log has no rank lines",
                                 launcher_seen ? " (and was launched by mpirun/srun)" : "", ": pass --ranks"));
  }
  if (log->ranks < 2 || log->ranks > kMaxRanks) {
    return LogError(path, 0,
                    absl::StrCat("ranks (from ", log->ranks_from, "): ", log->ranks,
                                 " is not a collective's group (2 to 2^24 ranks)"));
  }
  return absl::OkStatus();
}

// Step 5: busbw = algbw x factor(ranks) (nccl-tests doc/PERFORMANCE.md), on every row with algbw to
// read: a rank count the rows contradict is refused.
absl::Status CheckBusBwFactor(const NcclTestsLog& log, const std::string& path) {
  const double factor = NcclTestsBusBwFactor(log.binary, log.ranks);
  for (const NcclTestsRow& r : log.rows) {
    if (r.out_of_place_algbw_bytes_per_s < 1e9) continue;  // 0.01 GB/s printing: the ratio is not read to 1%
    if (!PrintedBandwidthIs(r.out_of_place_busbw_bytes_per_s, r.out_of_place_algbw_bytes_per_s * factor)) {
      return LogError(path, r.line,
                      absl::StrFormat("busbw %.2f GB/s is not algbw %.2f GB/s x %.4f (%s over %d ranks, from %s): "
                                      "the rank count or the binary is wrong",
                                      r.out_of_place_busbw_bytes_per_s / 1e9, r.out_of_place_algbw_bytes_per_s / 1e9,
                                      factor, log.binary, log.ranks, log.ranks_from));
    }
  }
  return absl::OkStatus();
}

// Step 6: ranks per node and nodes, from --ranks-per-node, the rank lines' hosts, the excerpt's
// "# hardware:" header, one process, else the hardware preset's GPUs per node (assumed, said so);
// and the hardware: the rank lines' GPU name, else the "# hardware:" free text.
void PickRanksPerNode(const NcclTestsOptions& o, const RunHeader& h, const FileFacts& file, NcclTestsLog* log) {
  if (o.ranks_per_node > 0) {
    log->ranks_per_node = o.ranks_per_node;
    log->ranks_per_node_from = "--ranks-per-node";
  } else if (!h.ranks_by_host.empty()) {
    for (const auto& [host, rs] : h.ranks_by_host) log->ranks_per_node = std::max<int64_t>(log->ranks_per_node, rs.size());
    log->ranks_per_node_from = absl::StrCat("the log's rank lines (", h.ranks_by_host.size(), " hosts)");
    log->nodes = static_cast<int64_t>(h.ranks_by_host.size());
  } else if (file.hw_per_node > 0) {
    log->ranks_per_node = file.hw_per_node;
    log->ranks_per_node_from = "the '# hardware:' header";
  } else if (file.hw_nodes == 1) {
    log->ranks_per_node = log->ranks;
    log->ranks_per_node_from = "the '# hardware:' header (one node)";
  } else if (log->ranks_from.rfind("the '# nThread' header", 0) == 0 ||
             log->ranks_from.rfind("the command line's", 0) == 0) {
    log->ranks_per_node = log->ranks;
    log->ranks_per_node_from = "one process (the '# nThread' header)";
  } else {
    log->ranks_per_node = o.default_ranks_per_node > 0 ? o.default_ranks_per_node : log->ranks;
    log->ranks_per_node_from = "assumed: the hardware preset's GPUs per node";
  }
  log->ranks_per_node = std::min(log->ranks_per_node, log->ranks);
  if (log->nodes == 0) log->nodes = (log->ranks + log->ranks_per_node - 1) / log->ranks_per_node;
  if (!h.gpu_name.empty()) {
    log->hardware = h.gpu_name;
    log->hardware_is_gpu_name = true;
  } else {
    log->hardware = file.hardware;
  }
}

// One run of a log (lines [seg.begin, seg.end)): steps 1 to 6 above.
absl::StatusOr<NcclTestsLog> ParseRun(const std::vector<LogLine>& lines, const Segment& seg, int run,
                                      const FileFacts& file, const std::string& path, const NcclTestsOptions& o,
                                      bool launcher_seen, bool single_run) {
  NcclTestsLog log;
  log.path = path;
  log.run = run;
  log.first_line = lines[seg.begin].number;
  RunHeader h;
  if (absl::Status s = ReadRunHeader(lines, seg, path, &h, &log); !s.ok()) return s;
  RowTable table;
  if (absl::Status s = ReadRunRows(lines, seg, path, h, &table, &log); !s.ok()) return s;
  if (absl::Status s = PickBinary(o, h, file, table, path, single_run, &log); !s.ok()) return s;
  if (absl::Status s = PickRanks(o, h, file, path, launcher_seen, &log); !s.ok()) return s;
  if (absl::Status s = CheckBusBwFactor(log, path); !s.ok()) return s;
  PickRanksPerNode(o, h, file, &log);
  return log;
}

}  // namespace

namespace {

// ParseNcclTestsLogs in steps: the file's own facts, the runs, then each run (ParseRun).

// Step 1: the facts of the whole file: the excerpt headers "# collective: <binary> ... <ranks>"
// and "# hardware: <text>" (the excerpt format of tests/data/real_data/microbench/nccl), and
// whether a launcher ran it (a launcher's line tag, or mpirun / srun / mpiexec on a command line).
// Errors: an unknown collective, a rank count out of range, hardware counts out of range.
absl::Status ReadFileFacts(const std::vector<LogLine>& lines, const std::string& path, FileFacts* file,
                           bool* launcher_seen) {
  for (const LogLine& l : lines) {
    absl::string_view s = StripLauncherTag(l.text);
    if (s.size() != l.text.size() && s.data() != l.text.data()) *launcher_seen = true;
    absl::string_view body = absl::StripLeadingAsciiWhitespace(s);
    if (body.empty()) continue;
    if (body[0] != '#') {
      for (absl::string_view w : IdentifierWords(body.substr(0, 4096))) {
        if (w == "mpirun" || w == "srun" || w == "mpiexec") *launcher_seen = true;
      }
      continue;
    }
    absl::string_view c = absl::StripLeadingAsciiWhitespace(body.substr(1));
    if (absl::StartsWith(c, "collective:")) {  // the excerpt header of tests/data/real_data/microbench/nccl
      std::vector<absl::string_view> t = Tokens(c.substr(11));
      if (!t.empty()) {
        file->binary = NcclTestsBinary(t[0]);
        file->binary_line = l.number;
        if (file->binary.empty()) return LogError(path, l.number, absl::StrCat("unknown collective '", t[0].substr(0, 80), "'"));
      }
      if (!t.empty() && ParseInt(t.back())) {
        file->ranks = *ParseInt(t.back());
        file->ranks_line = absl::StrCat("header line ", l.number);
      } else if (!t.empty() && t.size() > 1 && absl::ascii_isdigit(static_cast<unsigned char>(t.back()[0]))) {
        return LogError(path, l.number, absl::StrCat("collective: rank count '", t.back().substr(0, 40), "' is not an integer in range"));
      }
    }
    if (absl::StartsWith(c, "hardware:")) {
      file->hardware = std::string(absl::StripAsciiWhitespace(c.substr(9)).substr(0, 4096));
      if (absl::Status s = ReadHardwareCounts(c.substr(9), path, l.number, file); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// Step 2: the runs: each ends at its footer, or where the size goes down (a second run pasted
// after the first). Errors: a row whose size or count is a number out of range (said so, not "no
// rows").
absl::StatusOr<std::vector<Segment>> SplitRuns(const std::vector<LogLine>& lines, const std::string& path) {
  std::vector<Segment> segs;
  Segment cur{0, 0};
  double last_size = -1;
  bool cur_has_rows = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view s = StripLauncherTag(lines[i].text);
    absl::string_view body = absl::StripLeadingAsciiWhitespace(s);
    std::vector<absl::string_view> t = Tokens(body);
    // A row whose size or count is a number out of range: say so, not "no rows".
    if (t.size() >= 12 && !IsRowStart(t)) {
      for (int k = 0; k < 2; ++k) {
        const bool digits = !t[k].empty() && std::all_of(t[k].begin(), t[k].end(), [](char ch) {
          return absl::ascii_isdigit(static_cast<unsigned char>(ch));
        });
        if (digits && !ParseInt(t[k])) {
          return LogError(path, lines[i].number,
                          absl::StrCat(k == 0 ? "size '" : "count '", t[k].substr(0, 40), t[k].size() > 40 ? "..." : "",
                                       "' is out of range (at most 2^63 - 1)"));
        }
      }
    }
    if (IsRowStart(t)) {
      const double size = static_cast<double>(*ParseInt(t[0]));
      if (cur_has_rows && size < last_size) {
        cur.end = i;
        segs.push_back(cur);
        cur = Segment{i, 0};
      }
      cur_has_rows = true;
      last_size = size;
      continue;
    }
    if (absl::StartsWith(body, "#") &&
        absl::StartsWith(absl::StripLeadingAsciiWhitespace(body.substr(1)), "Avg bus bandwidth")) {
      cur.end = i + 1;
      segs.push_back(cur);
      cur = Segment{i + 1, 0};
      cur_has_rows = false;
      last_size = -1;
    }
  }
  cur.end = lines.size();
  if (cur.end > cur.begin) segs.push_back(cur);
  return segs;
}

// Step 3: segments without a row (the lines after the last footer, a header repeated alone) are
// dropped, their lines kept with the next run: a run's command line and header come before its
// rows.
std::vector<Segment> RunsWithRows(const std::vector<LogLine>& lines, const std::vector<Segment>& segs) {
  std::vector<Segment> runs;
  size_t carry_begin = std::string::npos;
  for (const Segment& sg : segs) {
    bool rows = false;
    for (size_t i = sg.begin; i < sg.end && !rows; ++i) rows = IsRowStart(Tokens(StripLauncherTag(lines[i].text)));
    if (!rows) {
      if (carry_begin == std::string::npos) carry_begin = sg.begin;
      continue;
    }
    Segment r = sg;
    if (carry_begin != std::string::npos) r.begin = carry_begin;
    carry_begin = std::string::npos;
    runs.push_back(r);
  }
  return runs;
}

}  // namespace

absl::StatusOr<std::vector<NcclTestsLog>> ParseNcclTestsLogs(absl::string_view text, const std::string& path,
                                                             const NcclTestsOptions& o) {
  const std::vector<LogLine> lines = SplitLines(text);
  if (lines.empty()) return LogError(path, 0, "no nccl-tests result rows (an empty file)");
  FileFacts file;
  bool launcher_seen = false;
  if (absl::Status s = ReadFileFacts(lines, path, &file, &launcher_seen); !s.ok()) return s;
  absl::StatusOr<std::vector<Segment>> segs = SplitRuns(lines, path);
  if (!segs.ok()) return segs.status();
  const std::vector<Segment> runs = RunsWithRows(lines, *segs);
  if (runs.empty()) return LogError(path, 0, "no nccl-tests result rows");
  std::vector<NcclTestsLog> out;
  for (size_t k = 0; k < runs.size(); ++k) {
    absl::StatusOr<NcclTestsLog> log =
        ParseRun(lines, runs[k], runs.size() > 1 ? static_cast<int>(k + 1) : 0, file, path, o, launcher_seen,
                 runs.size() == 1);
    if (!log.ok()) return log.status();
    out.push_back(*std::move(log));
  }
  return out;
}

absl::StatusOr<NcclTestsLog> ParseNcclTestsLog(absl::string_view text, const std::string& path,
                                               const NcclTestsOptions& o) {
  absl::StatusOr<std::vector<NcclTestsLog>> logs = ParseNcclTestsLogs(text, path, o);
  if (!logs.ok()) return logs.status();
  if (logs->size() > 1) {
    return LogError(path, (*logs)[1].first_line,
                    absl::StrCat(logs->size(), " runs in one log (the size goes down, or a run follows a footer): "
                                               "read them with ParseNcclTestsLogs"));
  }
  return std::move(logs->front());
}

}  // namespace stepcast::calibrate
