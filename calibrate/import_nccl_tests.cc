#include "calibrate/import_nccl_tests.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
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

absl::StatusOr<NcclTestsLog> ParseNcclTestsLog(absl::string_view text, const std::string& path,
                                               const NcclTestsOptions& o) {
  NcclTestsLog log;
  log.path = path;
  const std::vector<LogLine> lines = SplitLines(text);
  // Header facts.
  std::string binary_header, binary_command, header_ranks_line;
  int64_t header_ranks = 0;
  std::map<std::string, std::set<int64_t>> ranks_by_host;
  std::string gpu_name;
  bool footer = false;
  static const std::regex perf_re(R"(\b([a-z_]+)_perf\b)");
  static const std::regex nodes_re(R"((\d+)\s*nodes?\s*x\s*(\d+))", std::regex::icase);
  static const std::regex per_node_re(R"((\d+)\s*GPUs?\s*per\s*node)", std::regex::icase);
  static const std::regex one_node_re(R"(\bone node\b|\bsingle node\b)", std::regex::icase);
  int64_t hw_nodes = 0, hw_per_node = 0;
  for (const LogLine& l : lines) {
    absl::string_view s = StripLauncherTag(l.text);
    absl::string_view body = absl::StripLeadingAsciiWhitespace(s);
    if (body.empty() || body[0] != '#') {
      if (binary_command.empty()) {
        std::string str(body);
        std::smatch m;
        if (std::regex_search(str, m, perf_re) && FindBinary(m[1].str() + "_perf")) binary_command = m[1].str() + "_perf";
      }
      continue;
    }
    absl::string_view c = absl::StripLeadingAsciiWhitespace(body.substr(1));
    if (absl::StartsWith(c, "nThread")) log.full_log = true;
    if (absl::StartsWith(c, "Avg bus bandwidth")) {
      footer = true;
      const size_t colon = c.find(':');
      if (colon != absl::string_view::npos) {
        if (auto v = ParseDouble(absl::StripAsciiWhitespace(c.substr(colon + 1)))) log.avg_busbw_bytes_per_s = *v * 1e9;
      }
    }
    if (absl::StartsWith(c, "Collective test starting:")) {
      binary_header = NcclTestsBinary(absl::StripAsciiWhitespace(c.substr(absl::string_view("Collective test starting:").size())));
      if (binary_header.empty()) {
        return LogError(path, l.number, absl::StrCat("unknown nccl-tests binary in '", c, "'"));
      }
    }
    if (absl::StartsWith(c, "collective:")) {  // the excerpt header of tests/data/real_data/microbench/nccl
      std::vector<absl::string_view> t = Tokens(c.substr(11));
      if (!t.empty()) {
        binary_header = NcclTestsBinary(t[0]);
        if (binary_header.empty()) return LogError(path, l.number, absl::StrCat("unknown collective '", t[0], "'"));
      }
      if (!t.empty() && ParseInt(t.back())) {
        header_ranks = *ParseInt(t.back());
        header_ranks_line = absl::StrCat("header line ", l.number);
      }
    }
    if (absl::StartsWith(c, "hardware:")) {
      log.hardware = std::string(absl::StripAsciiWhitespace(c.substr(9)));
      std::smatch m;
      // Counts parsed strictly: a 30-digit count is an error naming the line (std::stoll threw).
      auto count = [&](const std::string& t, int64_t* v) -> absl::Status {
        std::optional<int64_t> x = ParseInt(t);
        if (!x || *x > (int64_t{1} << 31)) {
          return LogError(path, l.number, absl::StrCat("hardware: count '", t, "' is out of range (0 to 2^31)"));
        }
        *v = *x;
        return absl::OkStatus();
      };
      if (std::regex_search(log.hardware, m, nodes_re)) {
        if (absl::Status s = count(m[1].str(), &hw_nodes); !s.ok()) return s;
        if (absl::Status s = count(m[2].str(), &hw_per_node); !s.ok()) return s;
      } else if (std::regex_search(log.hardware, m, per_node_re)) {
        if (absl::Status s = count(m[1].str(), &hw_per_node); !s.ok()) return s;
      } else if (std::regex_search(log.hardware, one_node_re)) {
        hw_nodes = 1;
      }
    }
    if (absl::StartsWith(c, "Rank")) {
      // "#  Rank  0 Group  0 Pid  12345 on  host1 device  0 [0x1b] NVIDIA H100 80GB HBM3"
      std::vector<absl::string_view> t = Tokens(c);
      std::optional<int64_t> rank = t.size() > 1 ? ParseInt(t[1]) : std::nullopt;
      auto on = std::find(t.begin(), t.end(), "on");
      auto dev = std::find(t.begin(), t.end(), "device");
      if (rank && on != t.end() && on + 1 != t.end()) {
        ranks_by_host[std::string(*(on + 1))].insert(*rank);
        if (gpu_name.empty() && dev != t.end()) {
          const size_t bracket = c.find(']');
          if (bracket != absl::string_view::npos) gpu_name = std::string(absl::StripAsciiWhitespace(c.substr(bracket + 1)));
        }
      }
    }
  }
  // The binary.
  if (!o.binary.empty()) {
    log.binary = NcclTestsBinary(o.binary);
    if (log.binary.empty()) return LogError(path, 0, absl::StrCat("--collective '", o.binary, "' names no nccl-tests binary"));
    log.binary_from = "--collective";
  } else if (!binary_header.empty()) {
    log.binary = binary_header;
    log.binary_from = "the log's header";
  } else if (!binary_command.empty()) {
    log.binary = binary_command;
    log.binary_from = "the command line in the log";
  } else {
    const std::string base = absl::AsciiStrToLower(std::filesystem::path(path).filename().string());
    for (const char* key : {"reduce_scatter", "reducescatter", "all_reduce", "allreduce", "all_gather", "allgather",
                            "alltoall", "all_to_all", "sendrecv", "send_recv"}) {
      if (base.find(key) != std::string::npos) {
        log.binary = NcclTestsBinary(key);
        log.binary_from = "the file name";
        break;
      }
    }
  }
  if (log.binary.empty()) {
    return LogError(path, 0,
                    "cannot tell which nccl-tests binary wrote this log (no '# Collective test starting' line, no "
                    "command line naming *_perf, no collective in the file name): pass --collective");
  }
  log.collective = FindBinary(log.binary)->collective;

  // Rows.
  int last_row_line = 0;
  size_t columns = 0;  // of the log's first row: every row of one log has as many
  for (const LogLine& l : lines) {
    absl::string_view s = StripLauncherTag(l.text);
    std::vector<absl::string_view> t = Tokens(s);
    if (t.empty() || t[0][0] == '#') continue;
    if (t.size() < 2 || !ParseInt(t[0]) || !ParseInt(t[1])) continue;  // not a result row
    if (t.size() >= 3 && ParseDouble(t[2])) {
      return LogError(path, l.number, absl::StrCat("'", t[2], "' where nccl-tests prints the data type"));
    }
    if (t.size() < 12) {
      return LogError(path, l.number,
                      absl::StrCat("truncated nccl-tests row: ", t.size(),
                                   " columns, want 12 (size count type redop, then time algbw busbw #wrong out-of-place "
                                   "and in-place) or 13 (with root)"));
    }
    if (columns != 0 && t.size() < columns) {
      return LogError(path, l.number,
                      absl::StrCat("truncated nccl-tests row: ", t.size(), " columns, the log's rows have ", columns));
    }
    if (t.size() > 13) {
      return LogError(path, l.number,
                      absl::StrCat(t.size(), " columns: not an nccl-tests table this importer knows (12 or 13 columns; "
                                             "the extra columns of -C or -I are not read)"));
    }
    if (columns == 0) columns = t.size();
    const size_t g = t.size() == 13 ? 5 : 4;
    if (t.size() == 13 && !ParseInt(t[4])) {
      return LogError(path, l.number, absl::StrCat("'", t[4], "' where nccl-tests prints the root"));
    }
    NcclTestsRow r;
    r.line = l.number;
    r.size_bytes = static_cast<double>(*ParseInt(t[0]));
    r.count = *ParseInt(t[1]);
    r.type = std::string(t[2]);
    r.redop = std::string(t[3]);
    double cell[6];
    const size_t idx[6] = {g, g + 1, g + 2, g + 4, g + 5, g + 6};
    for (int i = 0; i < 6; ++i) {
      std::optional<double> v = ParseDouble(t[idx[i]]);
      if (!v || *v < 0) {
        return LogError(path, l.number, absl::StrCat("column ", idx[i] + 1, ": '", t[idx[i]], "' is not a number"));
      }
      cell[i] = *v;
    }
    if (absl::Status s = CheckWrong(t[g + 3], path, l.number, "out-of-place"); !s.ok()) return s;
    if (absl::Status s = CheckWrong(t[g + 7], path, l.number, "in-place"); !s.ok()) return s;
    r.out_of_place_time_s = cell[0] * 1e-6;
    r.out_of_place_algbw_bytes_per_s = cell[1] * 1e9;
    r.out_of_place_busbw_bytes_per_s = cell[2] * 1e9;
    r.in_place_time_s = cell[3] * 1e-6;
    r.in_place_algbw_bytes_per_s = cell[4] * 1e9;
    r.in_place_busbw_bytes_per_s = cell[5] * 1e9;
    r.has_in_place = r.in_place_time_s > 0;
    last_row_line = l.number;
    if (r.size_bytes <= 0) {
      ++log.skipped_zero_rows;
      continue;
    }
    if (!(r.out_of_place_time_s > 0)) return LogError(path, l.number, "time 0 for a non-empty message");
    if (!log.rows.empty() && r.size_bytes < log.rows.back().size_bytes) {
      return LogError(path, l.number,
                      absl::StrCat("size goes down from ", log.rows.back().size_bytes, " to ", r.size_bytes,
                                   " bytes: two runs in one log? give each run its own file"));
    }
    log.rows.push_back(std::move(r));
  }
  if (log.rows.empty()) return LogError(path, 0, "no nccl-tests result rows");
  if (log.full_log && !footer) {
    return LogError(path, last_row_line,
                    "truncated: no '# Avg bus bandwidth' footer after the last row (the run did not finish)");
  }

  // Ranks.
  int64_t rank_lines = 0;
  for (const auto& [h, rs] : ranks_by_host) rank_lines += static_cast<int64_t>(rs.size());
  if (o.ranks > 0) {
    log.ranks = o.ranks;
    log.ranks_from = "--ranks";
  } else if (rank_lines > 0) {
    log.ranks = rank_lines;
    log.ranks_from = "the log's rank lines";
  } else if (header_ranks > 0) {
    log.ranks = header_ranks;
    log.ranks_from = header_ranks_line;
  } else {
    const NcclTestsRow* best = &log.rows.front();
    for (const auto& r : log.rows) {
      if (r.out_of_place_algbw_bytes_per_s > best->out_of_place_algbw_bytes_per_s) best = &r;
    }
    const double ratio = best->out_of_place_algbw_bytes_per_s > 0
                             ? best->out_of_place_busbw_bytes_per_s / best->out_of_place_algbw_bytes_per_s
                             : 0;
    double n = 0;
    if (log.binary == "all_reduce_perf" && ratio > 0.9 && ratio < 2) n = 2 / (2 - ratio);
    if (NcclTestsBusBwFactor(log.binary, 4) == 0.75 && ratio >= 0.45 && ratio < 1) n = 1 / (1 - ratio);
    // More than 2^24 ranks (busbw/algbw within 1e-7 of its limit) is no cluster: not read as one.
    if (!(n >= 1.5) || n > (1 << 24) || std::fabs(n - std::round(n)) > 0.25) {
      return LogError(path, best->line,
                      absl::StrFormat("cannot tell the number of ranks from busbw/algbw = %.4f for %s (no rank lines "
                                      "in the log): pass --ranks",
                                      ratio, log.binary));
    }
    log.ranks = static_cast<int64_t>(std::llround(n));
    log.ranks_from = absl::StrCat("busbw/algbw of line ", best->line);
  }
  // Ranks per node and nodes.
  if (o.ranks_per_node > 0) {
    log.ranks_per_node = o.ranks_per_node;
    log.ranks_per_node_from = "--ranks-per-node";
  } else if (!ranks_by_host.empty()) {
    for (const auto& [h, rs] : ranks_by_host) log.ranks_per_node = std::max<int64_t>(log.ranks_per_node, rs.size());
    log.ranks_per_node_from = absl::StrCat("the log's rank lines (", ranks_by_host.size(), " hosts)");
    log.nodes = static_cast<int64_t>(ranks_by_host.size());
  } else if (hw_per_node > 0) {
    log.ranks_per_node = hw_per_node;
    log.ranks_per_node_from = "the '# hardware:' header";
  } else if (hw_nodes == 1) {
    log.ranks_per_node = log.ranks;
    log.ranks_per_node_from = "the '# hardware:' header (one node)";
  } else {
    log.ranks_per_node = o.default_ranks_per_node > 0 ? o.default_ranks_per_node : log.ranks;
    log.ranks_per_node_from = "assumed: the hardware preset's GPUs per node";
  }
  log.ranks_per_node = std::min(log.ranks_per_node, log.ranks);
  if (log.nodes == 0) log.nodes = (log.ranks + log.ranks_per_node - 1) / log.ranks_per_node;
  if (log.hardware.empty()) log.hardware = gpu_name;
  return log;
}

}  // namespace stepcast::calibrate
