#include "calibrate/import_tracelens.h"

#include <csv.h>

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "calibrate/log_text.h"

namespace stepcast::calibrate {
namespace {

struct CsvState {
  std::vector<std::string> row;
  std::vector<std::pair<int, std::vector<std::string>>> rows;  // (line, cells)
  int line = 0;
};
void OnField(void* s, size_t len, void* data) {
  static_cast<CsvState*>(data)->row.emplace_back(static_cast<const char*>(s), len);
}
void OnRow(int, void* data) {
  auto* st = static_cast<CsvState*>(data);
  st->rows.push_back({st->line, std::move(st->row)});
  st->row.clear();
}

// "c10::BFloat16" -> bf16 ... (PyTorch's scalar type names as the profiler records them).
std::optional<DType> TorchType(std::string t) {
  t = std::string(absl::StripAsciiWhitespace(t));
  if (!t.empty() && (t.front() == '\'' || t.front() == '"')) t = t.substr(1);
  if (!t.empty() && (t.back() == '\'' || t.back() == '"')) t.pop_back();
  if (t == "c10::BFloat16") return DType::kBF16;
  if (t == "c10::Half") return DType::kFP16;
  if (t == "float") return DType::kFP32;
  if (absl::StartsWith(t, "c10::Float8_e4m3")) return DType::kFP8;
  return std::nullopt;
}

}  // namespace

double TraceLensGemm::MedianFlopsPerS() const {
  return median_kernel_time_s > 0 ? 2.0 * batch * m * n * k / median_kernel_time_s : 0;
}

bool LooksLikeTraceLensGemmCsv(absl::string_view text) {
  const absl::string_view first = text.substr(0, text.find('\n'));
  return first.find("param: M") != absl::string_view::npos && first.find("TFLOPS/s_median") != absl::string_view::npos;
}

absl::StatusOr<std::vector<TraceLensGemm>> ParseTraceLensGemmCsv(absl::string_view text, const std::string& path) {
  csv_parser parser;
  if (csv_init(&parser, CSV_APPEND_NULL) != 0) return absl::InternalError("csv_init failed");
  CsvState st;
  for (const LogLine& l : SplitLines(text)) {
    st.line = l.number;
    const std::string chunk = std::string(l.text) + "\n";
    if (csv_parse(&parser, chunk.data(), chunk.size(), OnField, OnRow, &st) != chunk.size()) {
      const std::string err = csv_strerror(csv_error(&parser));
      csv_free(&parser);
      return LogError(path, l.number, absl::StrCat("CSV: ", err));
    }
  }
  csv_fini(&parser, OnField, OnRow, &st);
  csv_free(&parser);
  if (st.rows.empty()) return LogError(path, 0, "empty file");
  const std::vector<std::string>& header = st.rows.front().second;
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  auto find = [&](const std::string& name) -> absl::StatusOr<size_t> {
    auto it = col.find(name);
    if (it == col.end()) return LogError(path, 1, absl::StrCat("no '", name, "' column: not a TraceLens GEMM.csv"));
    return it->second;
  };
  size_t time_col = header.size();
  for (size_t i = 0; i < header.size(); ++i) {
    if (absl::StartsWith(header[i], "Kernel Time") && absl::EndsWith(header[i], "_median")) time_col = i;
  }
  if (time_col == header.size()) return LogError(path, 1, "no 'Kernel Time (us)_median' column: not a TraceLens GEMM.csv");
  absl::StatusOr<size_t> c_name = find("name"), c_b = find("param: B"), c_m = find("param: M"), c_n = find("param: N"),
                         c_k = find("param: K"), c_bias = find("param: bias"), c_dt = find("param: dtype_A_B"),
                         c_tf = find("TFLOPS/s_median");
  for (const auto* c : {&c_name, &c_b, &c_m, &c_n, &c_k, &c_bias, &c_dt, &c_tf}) {
    if (!c->ok()) return c->status();
  }
  std::vector<TraceLensGemm> out;
  for (size_t r = 1; r < st.rows.size(); ++r) {
    // Named references, not a structured binding: clang 14 cannot capture bindings in lambdas.
    const int line = st.rows[r].first;
    const std::vector<std::string>& cells = st.rows[r].second;
    if (cells.size() == 1 && cells[0].empty()) continue;
    if (cells.size() != header.size()) {
      return LogError(path, line, absl::StrCat(cells.size(), " cells, the header has ", header.size(), " (truncated row?)"));
    }
    TraceLensGemm g;
    g.line = line;
    g.op = cells[*c_name];
    auto dim = [&](size_t c, const char* what, int64_t* v) -> absl::Status {
      std::optional<int64_t> x = ParseInt(cells[c]);
      if (!x || *x <= 0) return LogError(path, line, absl::StrCat(what, " '", cells[c], "' is not a positive integer"));
      *v = *x;
      return absl::OkStatus();
    };
    for (auto [c, what, v] : {std::tuple{*c_b, "B", &g.batch}, std::tuple{*c_m, "M", &g.m}, std::tuple{*c_n, "N", &g.n},
                              std::tuple{*c_k, "K", &g.k}}) {
      if (absl::Status s = dim(c, what, v); !s.ok()) return s;
    }
    g.bias = absl::AsciiStrToLower(cells[*c_bias]) == "true";
    g.dtype_a_b = cells[*c_dt];
    std::vector<std::string> types = absl::StrSplit(absl::StripSuffix(absl::StripPrefix(g.dtype_a_b, "("), ")"), ',');
    if (types.size() == 2) {
      std::optional<DType> a = TorchType(types[0]), b = TorchType(types[1]);
      if (a && b && *a == *b) {
        g.dtype = *a;
        g.dtype_known = true;
      }
    }
    std::optional<double> t = ParseDouble(cells[time_col]);
    if (!t || !(*t > 0)) return LogError(path, line, absl::StrCat("median kernel time '", cells[time_col], "' is not positive"));
    g.median_kernel_time_s = *t * 1e-6;
    std::optional<double> tf = ParseDouble(cells[*c_tf]);
    if (!tf || *tf < 0) return LogError(path, line, absl::StrCat("TFLOPS/s_median '", cells[*c_tf], "' is not a number"));
    g.tracelens_median_flops_per_s = *tf * 1e12;
    out.push_back(std::move(g));
  }
  if (out.empty()) return LogError(path, 0, "no GEMM rows");
  return out;
}

absl::StatusOr<std::vector<TraceLensGemm>> ReadTraceLensGemmCsv(const std::string& path) {
  std::string text;
  if (absl::Status s = ReadWholeFile(path, &text); !s.ok()) return s;
  return ParseTraceLensGemmCsv(text, path);
}

std::vector<GemmRatePoint> GemmPointsFromTraceLens(const std::vector<TraceLensGemm>& rows, const std::string& path) {
  std::vector<GemmRatePoint> out;
  for (const TraceLensGemm& g : rows) {
    if (!g.dtype_known) continue;
    GemmRatePoint p;
    p.dtype = g.dtype;
    p.m = g.batch * g.m;
    p.n = g.n;
    p.k = g.k;
    p.flops_per_s = g.MedianFlopsPerS();
    p.source = absl::StrFormat("TraceLens GEMM.csv %s line %d: %s B=%d M=%d N=%d K=%d, median kernel time %.3f us%s",
                               path, g.line, g.op, g.batch, g.m, g.n, g.k, g.median_kernel_time_s * 1e6,
                               g.batch > 1 ? " (batch folded into m: the op's FLOPs kept)" : "");
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace stepcast::calibrate
