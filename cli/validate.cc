#include <csv.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "core/flops.h"

namespace stepcast::cli {
namespace {

using Row = std::map<std::string, std::string>;

struct CsvState {
  std::vector<std::string> header;
  std::vector<std::string> fields;
  std::vector<Row> rows;
  bool have_header = false;
};

void OnField(void* s, size_t len, void* data) {
  auto* st = static_cast<CsvState*>(data);
  st->fields.emplace_back(static_cast<const char*>(s), len);
}
void OnRow(int, void* data) {
  auto* st = static_cast<CsvState*>(data);
  if (!st->have_header) {
    st->header = st->fields;
    st->have_header = true;
  } else if (!(st->fields.size() == 1 && st->fields[0].empty())) {
    Row r;
    for (size_t i = 0; i < st->header.size() && i < st->fields.size(); ++i) {
      r[st->header[i]] = std::string(absl::StripAsciiWhitespace(st->fields[i]));
    }
    st->rows.push_back(std::move(r));
  }
  st->fields.clear();
}

absl::StatusOr<std::vector<Row>> ReadCsv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  csv_parser parser;
  if (csv_init(&parser, 0) != 0) return absl::InternalError("csv_init failed");
  CsvState st;
  if (csv_parse(&parser, text.data(), text.size(), OnField, OnRow, &st) != text.size()) {
    std::string err = csv_strerror(csv_error(&parser));
    csv_free(&parser);
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", err));
  }
  csv_fini(&parser, OnField, OnRow, &st);
  csv_free(&parser);
  for (const char* col : {"row_id", "n_layers", "d_model", "n_heads", "gpu", "num_gpus", "tp", "pp",
                          "micro_batch", "global_batch_seqs", "seq_len", "precision"}) {
    if (std::find(st.header.begin(), st.header.end(), col) == st.header.end()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": missing column '", col, "'"));
    }
  }
  return st.rows;
}

double Num(const Row& r, const std::string& col, double fallback = 0) {
  auto it = r.find(col);
  double v = 0;
  if (it == r.end() || it->second.empty() || !absl::SimpleAtod(it->second, &v)) return fallback;
  return v;
}
std::string Str(const Row& r, const std::string& col) {
  auto it = r.find(col);
  return it == r.end() ? "" : it->second;
}


// Builds the job of one row. Framework-era conventions (docs/VALIDATION.md):
//   Megatron-LM 2021-22 rows (S1, S3): GPT blocks with biases, dropout and learned positions,
//     no FlashAttention, no DP overlap (S3 Sec. 6.3: "we do not use any overlapping of gradient
//     all-reduces"), fp16 gradients all-reduced.
//   Megatron-Core/Bridge rows (S10): Llama/DeepSeek blocks, fused attention, DP and TP overlap
//     on, distributed optimizer unless FSDP is printed.
absl::StatusOr<Job> JobForRow(const Row& r, const Catalog& catalog) {
  Job job;
  const std::string source = Str(r, "source_id");
  const bool modern = source == "S10";
  const std::string model = Str(r, "model");
  if (absl::StrContains(absl::AsciiStrToLower(model), "deepseek")) {
    absl::StatusOr<ModelShape> m = catalog.FindModel("deepseek-v3");
    if (!m.ok()) return m.status();
    job.model = *m;
  } else {
    ModelShape& s = job.model;
    s.name = model;
    s.layers = static_cast<int64_t>(Num(r, "n_layers"));
    s.hidden_size = static_cast<int64_t>(Num(r, "d_model"));
    s.attention_heads = static_cast<int64_t>(Num(r, "n_heads"));
    s.kv_heads = static_cast<int64_t>(Num(r, "n_kv_heads", 0));
    s.ffn_hidden_size = static_cast<int64_t>(Num(r, "ffn_hidden", 0));
    s.vocab_size = static_cast<int64_t>(Num(r, "vocab", 0));
    if (Num(r, "moe_routed_experts") > 0) {
      s.moe.routed_experts = static_cast<int64_t>(Num(r, "moe_routed_experts"));
      s.moe.top_k = static_cast<int64_t>(Num(r, "moe_topk"));
      s.moe.shared_experts = static_cast<int64_t>(Num(r, "moe_shared_experts"));
      s.moe.expert_ffn_hidden_size = static_cast<int64_t>(Num(r, "moe_expert_ffn"));
    }
    if (modern) {
      s.ffn_type = FfnType::kSwiGlu;
      s.norm_type = NormType::kRmsNorm;
    } else {
      s.ffn_type = FfnType::kGelu;
      s.linear_bias = true;
      s.tied_embeddings = true;
      s.learned_position_embeddings = static_cast<int64_t>(Num(r, "seq_len"));
    }
    if (s.vocab_size == 0) return absl::InvalidArgumentError("vocab not given");
  }
  absl::StatusOr<std::string> hw_name = HardwarePresetForGpuName(Str(r, "gpu"));
  if (!hw_name.ok()) return hw_name.status();
  absl::StatusOr<Hardware> hw = catalog.FindHardware(*hw_name);
  if (!hw.ok()) return hw.status();
  job.hardware = *hw;
  job.profile = hw->reference_profile;

  Parallelism& p = job.parallelism;
  p.tp = static_cast<int64_t>(Num(r, "tp", 1));
  p.pp = static_cast<int64_t>(Num(r, "pp", 1));
  p.cp = static_cast<int64_t>(Num(r, "cp", 1));
  p.ep = static_cast<int64_t>(Num(r, "ep", 1));
  p.vpp = static_cast<int64_t>(Num(r, "vpp", 1));
  p.sequence_parallel = absl::AsciiStrToLower(Str(r, "sp")) == "yes";
  job.cluster.gpu_count = static_cast<int64_t>(Num(r, "num_gpus"));
  p.dp = static_cast<int64_t>(Num(r, "dp", 0));
  if (p.dp == 0) p.dp = job.cluster.gpu_count / std::max<int64_t>(1, p.tp * p.pp * p.cp);

  TrainingConfig& t = job.training;
  t.seq_length = static_cast<int64_t>(Num(r, "seq_len"));
  t.global_batch_size = static_cast<int64_t>(Num(r, "global_batch_seqs"));
  t.micro_batch_size = static_cast<int64_t>(Num(r, "micro_batch", 1));
  const std::string prec = absl::AsciiStrToLower(Str(r, "precision"));
  if (absl::StartsWith(prec, "fp8")) {
    t.precision.gemm = DType::kFP8;
  } else if (absl::StartsWith(prec, "bf16")) {
    t.precision.gemm = DType::kBF16;
  } else {
    t.precision.gemm = DType::kFP16;
    t.precision.params = DType::kFP16;
    t.precision.grads = DType::kFP16;
  }
  const std::string rc = absl::AsciiStrToLower(Str(r, "recompute"));
  t.recompute = absl::StartsWith(rc, "full")        ? Recompute::kFull
                : absl::StartsWith(rc, "selective") ? Recompute::kSelective
                                                    : Recompute::kNone;
  const std::string shard = absl::AsciiStrToLower(Str(r, "optimizer_sharding"));
  if (absl::StrContains(shard, "fsdp") && !absl::StrContains(shard, "fsdp=0")) {
    t.sharding = Sharding::kZero3;
  } else if (modern) {
    t.sharding = Sharding::kZero1;
  } else {
    t.sharding = Sharding::kNone;
  }
  t.flash_attention = modern;
  t.overlap_dp_comm = modern;
  t.overlap_tp_comm = modern;
  t.dropout = !modern;
  if (absl::Status s = ValidateJob(job); !s.ok()) return s;
  return job;
}

// Measured iteration time per the source's definition.
absl::StatusOr<std::pair<double, std::string>> MeasuredIterTime(const Row& r) {
  if (Num(r, "iter_time_s") > 0) return std::make_pair(Num(r, "iter_time_s"), std::string("iter_time_s"));
  const double gpus = Num(r, "num_gpus");
  const double tokens = Num(r, "global_batch_seqs") * Num(r, "seq_len");
  if (Num(r, "tokens_per_s_per_gpu") > 0) {
    return std::make_pair(tokens / (Num(r, "tokens_per_s_per_gpu") * gpus),
                          std::string("global_batch_tokens / (tokens_per_s_per_gpu x GPUs)"));
  }
  if (Num(r, "tflops_per_gpu") > 0 && absl::StrContains(Str(r, "flops_definition"), "Eq.3")) {
    const double f = NarayananEq3Flops(Num(r, "global_batch_seqs"), Num(r, "seq_len"), Num(r, "n_layers"),
                                       Num(r, "d_model"), Num(r, "vocab"));
    return std::make_pair(f / (Num(r, "tflops_per_gpu") * 1e12 * gpus),
                          std::string("Megatron Eq. 3 FLOPs / (tflops_per_gpu x GPUs)"));
  }
  return absl::InvalidArgumentError("no measured iteration time, tokens/s or Eq. 3 TFLOP/s in the row");
}

v1::ValidationSummary Summarise(const std::vector<double>& abs_errors, int64_t skipped) {
  v1::ValidationSummary s;
  s.set_n_rows(static_cast<int64_t>(abs_errors.size()));
  s.set_n_skipped(skipped);
  if (abs_errors.empty()) return s;
  std::vector<double> e = abs_errors;
  std::sort(e.begin(), e.end());
  const size_t n = e.size();
  s.set_median_abs_error_pct(n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]));
  double sum = 0;
  for (double x : e) sum += x;
  s.set_mean_abs_error_pct(sum / n);
  s.set_max_abs_error_pct(e.back());
  return s;
}

}  // namespace

absl::StatusOr<v1::ValidationReport> Validate(const std::string& csv_path, const Catalog& catalog) {
  absl::StatusOr<std::vector<Row>> rows = ReadCsv(csv_path);
  if (!rows.ok()) return rows.status();
  v1::ValidationReport report;
  std::vector<double> all;
  std::map<std::string, std::pair<std::vector<double>, int64_t>> by_source;
  int64_t skipped = 0;
  for (const Row& r : *rows) {
    v1::ValidationRow* out = report.add_rows();
    out->set_row_id(Str(r, "row_id"));
    out->set_source_id(Str(r, "source_id"));
    out->set_model(Str(r, "model"));
    out->set_gpu(Str(r, "gpu"));
    out->set_gpu_count(static_cast<int64_t>(Num(r, "num_gpus")));
    auto& src = by_source[out->source_id()];
    auto skip = [&](const absl::Status& s) {
      out->set_skipped_reason(std::string(s.message()));
      ++skipped;
      ++src.second;
    };
    absl::StatusOr<std::pair<double, std::string>> measured = MeasuredIterTime(r);
    if (!measured.ok()) { skip(measured.status()); continue; }
    out->set_measured_iter_time_s(measured->first);
    out->set_measured_from(measured->second);
    absl::StatusOr<Job> job = JobForRow(r, catalog);
    if (!job.ok()) { skip(job.status()); continue; }
    absl::StatusOr<Prediction> p = Predict(*job);
    if (!p.ok()) { skip(p.status()); continue; }
    out->set_predicted_iter_time_s(p->step_time_s);
    out->set_predicted_mfu(p->mfu);
    out->set_bottleneck(std::string(BottleneckName(p->bottleneck.kind)));
    const double err = (p->step_time_s - measured->first) / measured->first * 100;
    out->set_error_pct(err);
    all.push_back(std::fabs(err));
    src.first.push_back(std::fabs(err));
  }
  *report.mutable_summary() = Summarise(all, skipped);
  for (const auto& [id, v] : by_source) {
    v1::SourceSummary* s = report.add_by_source();
    s->set_source_id(id);
    *s->mutable_summary() = Summarise(v.first, v.second);
  }
  return report;
}

std::string FormatValidation(const v1::ValidationReport& r) {
  std::string o = absl::StrFormat("%-6s %-4s %-22s %-26s %6s %12s %12s %8s  %s\n", "row", "src", "model", "gpu",
                                  "gpus", "measured_s", "predicted_s", "error", "bottleneck");
  for (const auto& row : r.rows()) {
    const std::string gpu = row.gpu().substr(0, 26);
    if (!row.skipped_reason().empty()) {
      absl::StrAppendFormat(&o, "%-6s %-4s %-22s %-26s %6d  cannot predict: %s\n", row.row_id(), row.source_id(),
                            row.model(), gpu, row.gpu_count(), row.skipped_reason());
      continue;
    }
    absl::StrAppendFormat(&o, "%-6s %-4s %-22s %-26s %6d %12.3f %12.3f %+7.1f%%  %s\n", row.row_id(),
                          row.source_id(), row.model(), gpu, row.gpu_count(), row.measured_iter_time_s(),
                          row.predicted_iter_time_s(), row.error_pct(), row.bottleneck());
  }
  auto line = [&](const std::string& label, const v1::ValidationSummary& s) {
    absl::StrAppendFormat(&o, "%-12s n=%-3d median |err| %5.1f%%   mean %5.1f%%   max %5.1f%%%s\n", label,
                          s.n_rows(), s.median_abs_error_pct(), s.mean_abs_error_pct(), s.max_abs_error_pct(),
                          s.n_skipped() ? absl::StrFormat("   (%d not predicted)", s.n_skipped()) : "");
  };
  o += "\n";
  for (const auto& s : r.by_source()) line("source " + s.source_id(), s.summary());
  line("all rows", r.summary());
  return o;
}

}  // namespace stepcast::cli
