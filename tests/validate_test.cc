// stepcast validate on the published runs: derivation of the measured times and the issue's
// accuracy targets (docs/VALIDATION.md).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/cli.h"
#include "proto/published_runs.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/catalog.h"
#include "proto/codec.h"
#include "tests/csv_line.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

TEST(Validate, MeasuredTimesFollowEachSourcesDefinition) {
  const std::string path = std::string(::testing::TempDir()) + "/runs.csv";
  {
    std::ofstream out(path);
    out << "row_id,source_id,source,framework,model,n_layers,d_model,n_heads,n_kv_heads,ffn_hidden,vocab,seq_len,"
           "moe_routed_experts,gpu,num_gpus,tp,pp,dp,cp,sp,ep,vpp,micro_batch,global_batch_seqs,"
           "precision,recompute,optimizer_sharding,iter_time_s,tokens_per_s_per_gpu,tflops_per_gpu,flops_definition\n";
    // Narayanan Table 1, GPT 1.7B: F = Eq. 3 = 1.5465e16 FLOPs at 137 TFLOP/s x 32 GPUs = 3.528 s.
    out << "1,S1,Narayanan et al. 2021,Megatron-LM,GPT 1.7B,24,2304,24,,9216,51200,2048,,A100 80GB,32,1,1,32,,no,,1,"
           "16,512,fp16,full,none,,,137,\"Megatron Eq.3: F = 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h))\"\n";
    // Megatron-Bridge Llama3 8B on 8 H100: 128 x 8192 tokens / (14451 x 8) = 9.070 s.
    out << "46,S10,Megatron-Bridge perf summary 25.11,Megatron-Bridge,LLAMA3_8B,32,4096,32,8,14336,128256,8192,,"
           "H100 (DGX-H100),8,1,1,8,1,,1,,1,128,fp8,,Megatron FSDP (FSDP=8),,14451,744,x\n";
    // A row the model cannot express (no GPU preset) says why.
    out << "99,SX,a paper,NeMo,GPT odd,2,64,4,,256,1000,128,,Z80,1,1,1,1,,no,,1,1,1,bf16,,,1.0,,,\n";
  }
  auto r = cli::Validate(path, testing::BuiltinCatalog());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows_size(), 3);
  EXPECT_NEAR(r->rows(0).measured_iter_time_s(), 3.528, 0.001);
  EXPECT_NEAR(r->rows(1).measured_iter_time_s(), 128.0 * 8192 / (14451.0 * 8), 1e-9);
  EXPECT_GT(r->rows(0).predicted_iter_time_s(), 0);
  EXPECT_NE(r->rows(2).skipped_reason().find("no hardware preset for GPU 'Z80'"), std::string::npos);
  EXPECT_EQ(r->summary().n_rows(), 2);
  EXPECT_EQ(r->summary().n_skipped(), 1);
  EXPECT_FALSE(cli::Validate("/nonexistent.csv", testing::BuiltinCatalog()).ok());
}

// The first `n` data rows of the published-runs file (the header kept), written to a temporary file.
std::string FirstRows(int n) {
  std::ifstream in(STEPCAST_PUBLISHED_RUNS);
  const std::string path = std::string(::testing::TempDir()) + "/first_rows.csv";
  std::ofstream out(path);
  std::string line;
  // Rows are one line each (no cell of the file holds a newline).
  for (int i = 0; i <= n && std::getline(in, line); ++i) out << line << "\n";
  return path;
}

TEST(Validate, PublishedRunsAccuracy) {
  // Issue 9's targets on the 112 published runs of its 7 sources (the first 112 rows of
  // tests/data/validation/published_runs.csv, see its README for how each source defines its
  // numbers): at least 106 rows predicted, median |error| at most 8%, p90 at most 20%, and no
  // published run predicted not to fit (every one of them ran). The reference profiles are used
  // as they are: no per-row fitting, and no rule tests a source id (docs/VALIDATION.md). The
  // 46 rows added for issue 21 (S22, S25, S26) are held by PublishedRunsCoverage.
  auto r = cli::Validate(FirstRows(112), testing::BuiltinCatalog());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows_size(), 112);
  EXPECT_GE(r->summary().n_rows(), 106);
  EXPECT_LE(r->summary().median_abs_error_pct(), 8.0);
  EXPECT_LE(r->summary().p90_abs_error_pct(), 20.0);
  for (const auto& row : r->rows()) {
    if (row.skipped_reason().empty()) {
      // Over the capacity only within the memory model's 5% uncertainty is "tight" (a pre-flight
      // warns), not "does not fit".
      EXPECT_TRUE(row.fits() || row.tight()) << "published row " << row.row_id() << " predicted not to fit";
    }
  }
  EXPECT_EQ(r->summary().n_not_fit(), 0);
  // Every source is within reach: no source's median above 12% (a source-level failure
  // would hide under the pooled median).
  for (const auto& s : r->by_source()) {
    EXPECT_LE(s.summary().median_abs_error_pct(), 12.0) << s.source_id();
  }
}

TEST(Validate, ModelKindAndGpuGroupsGiveEachGroupsLean) {
  // The report's groups (by_model_kind, by_hardware) hold every predicted row once, MoE exactly the
  // rows whose CSV cell states more than one routed expert (read here from the file, not from the
  // job), and each group's median signed error is the median of its rows' own error_pct.
  auto r = cli::Validate(STEPCAST_PUBLISHED_RUNS, testing::BuiltinCatalog());
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<std::string> moe_rows;
  {
    std::ifstream in(STEPCAST_PUBLISHED_RUNS);
    std::string header, line;
    ASSERT_TRUE(std::getline(in, header));
    // testing::SplitCsvLine: the source texts hold quoted commas.
    const auto split = testing::SplitCsvLine;
    const std::vector<std::string> cols = split(header);
    const auto col = std::find(cols.begin(), cols.end(), "moe_routed_experts") - cols.begin();
    ASSERT_LT(col, static_cast<long>(cols.size()));
    while (std::getline(in, line)) {
      const std::vector<std::string> cells = split(line);
      ASSERT_GT(cells.size(), static_cast<size_t>(col)) << line.substr(0, 40);
      int64_t experts = 0;
      if (absl::SimpleAtoi(cells[col], &experts) && experts > 1) moe_rows.insert(cells[0]);
    }
  }
  ASSERT_FALSE(moe_rows.empty());
  std::map<std::string, std::vector<double>> by_kind, by_hw;
  for (const auto& row : r->rows()) {
    if (!row.skipped_reason().empty()) continue;
    by_kind[moe_rows.count(row.row_id()) ? "MoE" : "dense"].push_back(row.error_pct());
    ASSERT_FALSE(row.hardware().empty()) << row.row_id();
    by_hw[row.hardware()].push_back(row.error_pct());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  auto check = [&](const google::protobuf::RepeatedPtrField<v1::GroupSummary>& groups,
                   const std::map<std::string, std::vector<double>>& expected) {
    ASSERT_EQ(static_cast<size_t>(groups.size()), expected.size());
    int total = 0;
    for (const auto& g : groups) {
      auto it = expected.find(g.group());
      ASSERT_NE(it, expected.end()) << g.group();
      EXPECT_EQ(g.summary().n_rows(), static_cast<int>(it->second.size())) << g.group();
      EXPECT_NEAR(g.summary().median_signed_error_pct(), median(it->second), 1e-9) << g.group();
      total += g.summary().n_rows();
    }
    EXPECT_EQ(total, r->summary().n_rows());
  };
  check(r->by_model_kind(), by_kind);
  check(r->by_hardware(), by_hw);
  EXPECT_NEAR(r->summary().median_signed_error_pct(),
              median([&] {
                std::vector<double> all;
                for (const auto& [k, v] : by_kind) all.insert(all.end(), v.begin(), v.end());
                return all;
              }()),
              1e-9);
}

TEST(Validate, PublishedRunsFileHasEveryRow) {
  // tests/data/validation/published_runs.csv is the 158-row copy of ../shared/validation.
  auto r = cli::Validate(STEPCAST_PUBLISHED_RUNS, testing::BuiltinCatalog());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows_size(), 158);
}

TEST(Validate, HeldOutRunsAreReadAsTheirSourcesSay) {
  // tests/data/validation/heldout_2026_11_28.csv: 39 published runs outside the 158 (sources U1-U8,
  // each row citing its repository, commit and table; docs/VALIDATION.md "Held-out check"). Read
  // before this pass's fixes, 5 of them were misread silently (docs/VALIDATION.md). Each row is now
  // read as its source says, or refused with the reason; no row falls back to the generic preset;
  // every predicted one fits (each ran).
  auto r = cli::Validate(STEPCAST_HELDOUT_RUNS, testing::BuiltinCatalog());
  ASSERT_TRUE(r.ok()) << r.status();
  // 1039 added 2026-11-28 (fourth session); 1040-1042 (U9, Nemotron-H 56B on H100 / GB300 / GB200)
  // 2026-11-29 (eleventh session), after the hybrid model was built; 1043-1049 (U10, U11: Nemotron
  // 3 Super and Ultra, latent MoE with MTP) in the twelfth, after that model was built; 1050-1051
  // (U11: Nemotron 3.5 Lightning and 3 Nano on Blackwell, 26.08) after the Lightning preset.
  ASSERT_EQ(r->rows_size(), 51);
  // Row 1010 (Nemotron 3 Nano, a hybrid Mamba-2 / attention MoE model) was refused until the
  // eleventh session; it is read as the nemotron_h family's preset.
  const std::map<std::string, std::string> refused = {};
  // Row 1011 (Kimi K2 on 256 GB300, PP 4 VPP 4 EP 64, micro-batch 2) fits only with the recipe's
  // recomputation: Megatron-Bridge v0.3.1's KIMI_K2_PRETRAIN_CONFIG_GB300 recomputes mla_up_proj
  // (the megatron-bridge preset's Kimi K2 recipe). Without it the model needed 323 GiB of 277.5;
  // with it, 285.6 GiB (TIGHT); with the run's Muon read from its optimizer_sharding cell (one
  // momentum buffer, not AdamW's two), 270.6 GiB: fits.
  std::map<std::string, std::string> framework;
  for (const auto& row : r->rows()) {
    SCOPED_TRACE(row.row_id());
    auto it = refused.find(row.row_id());
    if (it != refused.end()) {
      EXPECT_THAT(row.skipped_reason(), ::testing::HasSubstr(it->second));
      continue;
    }
    EXPECT_EQ(row.skipped_reason(), "");
    EXPECT_FALSE(row.framework_fallback());
    EXPECT_TRUE(row.fits() || row.tight()) << "predicted not to fit";
    framework[row.row_id()] = row.framework();
  }
  // The framework texts: Megatron-Bridge tables, NeMo's, torchtitan with torch.compile (row 1032,
  // "torchtitan ... torch.compile" read as the eager preset before), the MLPerf NeMo rows.
  EXPECT_EQ(framework["1001"], "megatron-bridge");
  EXPECT_EQ(framework["1016"], "nemo");
  EXPECT_EQ(framework["1032"], "torchtitan-compile");
  // torchtitan's 2024-12 benchmark GPUs, the H100 SXM with 96 GB HBM2e at 500 W (refused before
  // 2026-11-28, ninth session): their own preset, whose rates bound the part's from above.
  for (const auto& row : r->rows()) {
    const int id = std::stoi(row.row_id());
    if (id >= 1026 && id <= 1031) {
      EXPECT_EQ(row.hardware(), "H100-SXM5-96GB-HBM2e") << row.row_id();
    }
  }
  EXPECT_EQ(framework["1036"], "nemo");
  // Row 1011 (Kimi K2 on 256 GB300, Megatron-Bridge 26.02.01) runs the gb300 preset (refused as
  // "no GB300 preset" before it existed).
  EXPECT_EQ(framework["1011"], "megatron-bridge");
  for (const auto& row : r->rows()) {
    if (row.row_id() == "1011") EXPECT_DOUBLE_EQ(row.memory_capacity_bytes(), 284208.0 * 1024 * 1024);  // nvidia-smi
  }
  EXPECT_EQ(framework.size(), 51u);  // every row, the Mamba-2 hybrids 1010 and 1040-1051 included
  EXPECT_EQ(framework["1010"], "megatron-bridge");
  EXPECT_EQ(framework["1043"], "megatron-bridge");
}

TEST(Validate, HugeCellsAreErrorsNotCrashes) {
  // Reliability review 2, N4: a 100 KB optimizer_sharding cell ("FSDP over 111...1 gpus",
  // "FSDP x 111...1 data-parallel replicas") and a 100 KB digit run in the framework text crashed
  // `validate` with SIGSEGV: libstdc++'s std::regex recursed once per character
  // (../shared/reference/reliability_inputs_2/csv_kover_100k.csv, csv_kreplicas_100k.csv).
  const std::string path = std::string(::testing::TempDir()) + "/huge_cells.csv";
  const std::string ones(100000, '1');
  {
    std::ofstream out(path);
    out << "row_id,source_id,source,framework,model,n_layers,d_model,n_heads,vocab,seq_len,gpu,num_gpus,tp,pp,"
           "micro_batch,global_batch_seqs,precision,optimizer_sharding,iter_time_s\n";
    const std::string row = ",S9,a 2024 paper,NeMo 24.09,Llama 3 8B,32,4096,32,128256,8192,H100 80GB,8,1,1,1,8,bf16,";
    out << "1" << row << "FSDP over " << ones << " gpus,1.0\n";
    out << "2" << row << "FSDP x " << ones << " data-parallel replicas,1.0\n";
    out << "3,S9,a paper " << ones << ",NeMo " << ones << ".04,Llama 3 8B,32,4096,32,128256,8192,H100 80GB,8,1,1,1,8,"
           "bf16,none,1.0\n";
  }
  auto r = cli::Validate(path, testing::BuiltinCatalog());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows_size(), 3);
  for (int i = 0; i < 2; ++i) {
    EXPECT_NE(r->rows(i).skipped_reason().find("optimizer_sharding: count '111"), std::string::npos)
        << r->rows(i).skipped_reason();
    EXPECT_NE(r->rows(i).skipped_reason().find("out of range"), std::string::npos) << r->rows(i).skipped_reason();
  }
  // No year in the framework text or the source (digit runs of 100,000, not 4): the framework
  // preset's latest era, and the row is predicted.
  EXPECT_TRUE(r->rows(2).skipped_reason().empty()) << r->rows(2).skipped_reason();
}

TEST(Validate, YearInTextReadsYearsAndReleases) {
  // As the regular expressions it replaced read them: a four-digit 19xx/20xx run, else a
  // two-digit YY.MM release (the month 01-12) not preceded by a digit or '.'.
  EXPECT_EQ(YearInText("Megatron-LM (2022)"), 2022);
  EXPECT_EQ(YearInText("NeMo 24.09 container"), 2024);
  EXPECT_EQ(YearInText("NeMo 25.04.01 container"), 2025);
  EXPECT_EQ(YearInText("v0.24.09"), 0);       // preceded by '.'
  EXPECT_EQ(YearInText("24.13"), 0);          // no month 13
  EXPECT_EQ(YearInText("120245"), 0);         // a longer digit run is no year
  EXPECT_EQ(YearInText("commit 6985e58, 2021-04"), 2021);
  EXPECT_EQ(YearInText("2019"), 2019);
  EXPECT_EQ(YearInText("x 24.09"), 2024);
  EXPECT_EQ(YearInText("24.1"), 0);
  EXPECT_EQ(YearInText("release 26.02 of 2025"), 2025);  // a year wins over a release
  EXPECT_EQ(YearInText(""), 0);
}

// A Megatron-Bridge / NeMo style row (row 182's shape: Llama 4 Maverick on 512 H100) with the
// columns given; `extra` overrides or adds cells.
PublishedRow MaverickRow(std::map<std::string, std::string> extra = {}) {
  PublishedRow r = {{"row_id", "182"}, {"source_id", "SX"}, {"source", "dgxc-benchmarking v25.05.05"},
                    {"model", "Llama 4 Maverick 400B"}, {"n_layers", "48"}, {"d_model", "5120"}, {"n_heads", "40"},
                    {"n_kv_heads", "8"}, {"ffn_hidden", "16384"}, {"vocab", "202048"}, {"seq_len", "8192"},
                    {"moe_routed_experts", "128"}, {"moe_topk", "1"}, {"moe_shared_experts", "1"},
                    {"moe_expert_ffn", "8192"}, {"gpu", "H100 80GB"}, {"num_gpus", "512"}, {"tp", "4"},
                    {"pp", "1"}, {"cp", "1"}, {"ep", "128"}, {"vpp", "12"}, {"micro_batch", "1"},
                    {"global_batch_seqs", "1024"}, {"precision", "bf16"}, {"recompute", "not stated"},
                    {"framework", "NeMo 25.04.01 container (NeMo 2 / Megatron-Core)"}, {"iter_time_s", "4.426"},
                    {"notes", "ETP=4. VP=12 printed although PP=1."}};
  for (auto& [k, v] : extra) r[k] = v;
  return r;
}

TEST(PublishedRuns, RowsAreReadThroughTheArchitectureRegistry) {
  const Catalog& catalog = testing::BuiltinCatalog();
  // Llama 4 Maverick: the family's named model runs its preset (alternating dense/MoE layers),
  // checked against the row's dimensions; ETP from the notes; VP printed beside PP 1 is not run.
  auto m = PublishedRunFromRow(MaverickRow(), catalog);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->spec.model().preset(), "llama4-maverick");
  EXPECT_EQ(m->spec.parallelism().etp(), 4);
  EXPECT_EQ(m->spec.parallelism().vpp(), 0);
  bool vpp_assumed = false;
  for (const auto& a : m->assumed) vpp_assumed |= a.field == "parallelism.vpp" && a.value == "1";
  EXPECT_TRUE(vpp_assumed);
  auto wrong = PublishedRunFromRow(MaverickRow({{"moe_expert_ffn", "4096"}}), catalog);
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(std::string(wrong.status().message()), ::testing::HasSubstr("moe_expert_ffn: 4096 differs"));
  // GPT-OSS (S26 rows 224-225): the family's head size 64, alternating 128-token window, sinks
  // and biases; the recompute modules the row names.
  auto g = PublishedRunFromRow(
      MaverickRow({{"model", "GPT-OSS 120B"}, {"n_layers", "36"}, {"d_model", "2880"}, {"n_heads", "64"},
                   {"ffn_hidden", "2880"}, {"vocab", "201088"}, {"seq_len", "4096"}, {"moe_topk", "4"},
                   {"moe_shared_experts", "0"}, {"moe_expert_ffn", "2880"}, {"num_gpus", "64"}, {"tp", "1"},
                   {"pp", "4"}, {"ep", "8"}, {"vpp", ""}, {"global_batch_seqs", "1280"}, {"notes", ""},
                   {"recompute", "selective (recompute_modules layernorm, moe_act)"},
                   {"framework", "Megatron-Bridge / Megatron-Core, NeMo 26.02 container"}}),
      catalog);
  ASSERT_TRUE(g.ok()) << g.status();
  const v1::ModelShape& gs = g->spec.model().shape();
  EXPECT_EQ(gs.head_dim(), 64);
  EXPECT_EQ(gs.local_attention_window(), 128);
  EXPECT_EQ(gs.global_attention_every(), 2);
  EXPECT_TRUE(gs.attention_sinks());
  EXPECT_TRUE(gs.linear_bias());
  EXPECT_THAT(g->spec.training().recompute_modules(), ::testing::ElementsAre("layernorm", "moe_act"));
  // Qwen3 MoE: head size 128 (attention 32 x 128 = 4096 wide at hidden 2048).
  auto q = PublishedRunFromRow(
      MaverickRow({{"model", "Qwen3-30B-A3B"}, {"n_layers", "48"}, {"d_model", "2048"}, {"n_heads", "32"},
                   {"n_kv_heads", "4"}, {"ffn_hidden", "6144"}, {"vocab", "151936"}, {"moe_topk", "8"},
                   {"moe_shared_experts", "0"}, {"moe_expert_ffn", "768"}, {"num_gpus", "16"}, {"tp", "1"},
                   {"pp", "2"}, {"ep", "8"}, {"notes", ""}}),
      catalog);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->spec.model().shape().head_dim(), 128);
  // A hybrid the model does not describe is refused saying so; a Nemotron-H hybrid without a
  // preset is refused for its pattern (no column gives it); a name no family has is refused
  // naming it.
  auto h = PublishedRunFromRow(MaverickRow({{"model", "Falcon-H1 34B"}, {"moe_routed_experts", ""}}), catalog);
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(std::string(h.status().message()), ::testing::HasSubstr("refused"));
  auto h2 = PublishedRunFromRow(MaverickRow({{"model", "Nemotron-H 2B"}, {"moe_routed_experts", ""}}), catalog);
  ASSERT_FALSE(h2.ok());
  EXPECT_THAT(std::string(h2.status().message()), ::testing::HasSubstr("whose layer pattern the row does not give"));
  // A named one runs its preset, checked against the row's dimensions (Maverick's 48 here).
  auto h56 = PublishedRunFromRow(MaverickRow({{"model", "Nemotron-H 56B"}, {"moe_routed_experts", ""}}), catalog);
  ASSERT_FALSE(h56.ok());
  EXPECT_THAT(std::string(h56.status().message()), ::testing::HasSubstr("differs from Nemotron-H 56B's 118"));
  auto u = PublishedRunFromRow(MaverickRow({{"model", "Falcon 40B"}, {"moe_routed_experts", ""}}), catalog);
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(std::string(u.status().message()), ::testing::HasSubstr("no architecture family of the registry"));
}

// A row's params_b (billions; MoE rows state total parameters: DeepSeek-V3 671, Grok-1 314,
// Llama 4 Maverick 400) is checked against the total count of the model as read, within a factor
// 1.5 either way: a guard against a misread architecture, not a fit. The repro of the held-out
// check (docs/VALIDATION.md, finding 3): a hybrid 30B read as an attention-only
// Nemotron counted 68.45B.
TEST(PublishedRuns, StatedParamsAreCheckedAgainstTheModelRead) {
  const Catalog& catalog = testing::BuiltinCatalog();
  const std::map<std::string, std::string> qwen = {
      {"model", "Qwen3-30B-A3B"}, {"n_layers", "48"}, {"d_model", "2048"}, {"n_heads", "32"},
      {"n_kv_heads", "4"},        {"ffn_hidden", "6144"}, {"vocab", "151936"}, {"moe_topk", "8"},
      {"moe_shared_experts", "0"}, {"moe_expert_ffn", "768"}, {"num_gpus", "16"}, {"tp", "1"},
      {"pp", "2"},                {"ep", "8"},          {"notes", ""}};
  struct Case {
    std::map<std::string, std::string> cells;
    const char* error;  // "" when the row is read
  } cases[] = {
      // Llama 4 Maverick (the family's preset): 400B total is stated and counted.
      {{{"params_b", "400"}}, ""},
      {{{"params_b", ""}}, ""},  // not stated: not checked
      // The active count (17B) is not what params_b states.
      {{{"params_b", "17"}}, "params_b: 17B stated, but the model read (family Llama 4) counts 4"},
      {{{"params_b", "1000"}}, "params_b: 1000B stated"},
      {{{"params_b", "-5"}}, "params_b: '-5' is not a positive number"},
      {{{"params_b", "30B"}}, "params_b: '30B' is not a positive number"},
      // A row-built shape (Qwen3-30B-A3B): 30.5B total.
      {{{"params_b", "30"}}, ""},
      {{{"params_b", "3"}}, "params_b: 3B stated"},
  };
  for (int i = 0; i < 8; ++i) {
    const Case& c = cases[i];
    std::map<std::string, std::string> cells = i >= 6 ? qwen : std::map<std::string, std::string>{};
    for (const auto& [k, v] : c.cells) cells[k] = v;
    SCOPED_TRACE(absl::StrCat("case ", i, " params_b ", c.cells.at("params_b")));
    auto run = PublishedRunFromRow(MaverickRow(cells), catalog);
    if (std::string(c.error).empty()) {
      EXPECT_TRUE(run.ok()) << run.status();
    } else {
      ASSERT_FALSE(run.ok());
      EXPECT_THAT(std::string(run.status().message()), ::testing::HasSubstr(c.error));
    }
  }
  // Hybrids the model does not describe are refused as hybrids, before any count; Nemotron 3
  // Nano, whose dimensions the row leaves blank, is its preset (31.6B: 30 is within 1.5x).
  for (const char* name : {"Falcon-H1 34B", "Jamba 1.5 Large", "Llama3.2-Mamba2-3B"}) {
    SCOPED_TRACE(name);
    auto run = PublishedRunFromRow(MaverickRow({{"model", name}, {"params_b", "30"}}), catalog);
    ASSERT_FALSE(run.ok());
    EXPECT_THAT(std::string(run.status().message()), ::testing::HasSubstr("refused: it has state-space layers"));
  }
  std::map<std::string, std::string> blank = {{"model", "Nemotron 3 Nano (30B-A3.5B, hybrid Mamba-2/MoE)"},
                                              {"params_b", "30"}};
  for (const char* col : {"n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_hidden", "vocab", "moe_routed_experts",
                          "moe_topk", "moe_shared_experts", "moe_expert_ffn"}) {
    blank[col] = "";
  }
  auto nano = PublishedRunFromRow(MaverickRow(blank), catalog);
  ASSERT_TRUE(nano.ok()) << nano.status();
  EXPECT_EQ(nano->spec.model().preset(), "nemotron-3-nano-30b-a3b");
}

TEST(PublishedRuns, AnOptimizerShardingCellNamingMuonRunsMuon) {
  // Kimi K2's Megatron-Bridge rows state "Muon optimizer" in the optimizer_sharding column (the
  // held-out row 1011); a row that names no optimizer keeps the framework's AdamW.
  const Catalog& catalog = testing::BuiltinCatalog();
  auto muon = PublishedRunFromRow(MaverickRow({{"optimizer_sharding", "Muon optimizer (page note); FSDP=0 printed"}}), catalog);
  ASSERT_TRUE(muon.ok()) << muon.status();
  EXPECT_EQ(muon->spec.training().optimizer(), v1::OPTIMIZER_MUON);
  auto plain = PublishedRunFromRow(MaverickRow({{"optimizer_sharding", "distributed optimizer"}}), catalog);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_NE(plain->spec.training().optimizer(), v1::OPTIMIZER_MUON);
}

// HSDP from the optimizer_sharding text: the FSDP group a row names and the replicas over it, as a
// count ("x 16 data-parallel replica(s)"), a group ("over 128 GPUs"), or a product the text works
// out ("FSDP over 16 nodes x 8 GPUs = 128 GPUs ... x data-parallel replicas": Paxml's rows 176-177,
// where 2,048 GPUs are 16 replicas of a 128-GPU FSDP group).
TEST(PublishedRuns, TheFsdpGroupARowNamesSetsTheReplicas) {
  const Catalog& catalog = testing::BuiltinCatalog();
  auto replicas = [&](const std::string& gpus, const std::string& cell) {
    auto run = PublishedRunFromRow(MaverickRow({{"num_gpus", gpus}, {"optimizer_sharding", cell}, {"ep", "1"},
                                                {"tp", "1"}, {"vpp", ""}}),
                                   catalog);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? run->spec.parallelism().dp_replicate() : -1;
  };
  const std::string paxml = "FSDP over 16 nodes x 8 GPUs = 128 GPUs (DCN mesh [nodes/16,16,1], ICI [1,8,1]) x data-parallel replicas";
  EXPECT_EQ(replicas("2048", paxml), 16);
  EXPECT_EQ(replicas("128", paxml), 0);  // one group: no replicas set
  EXPECT_EQ(replicas("2048", "FSDP (ZeRO-3-like) over 128 GPUs (ici_fsdp 8 x dcn_fsdp 16) x 16 data-parallel replica(s)"), 16);
  EXPECT_EQ(replicas("512", "FSDP within each node"), 64);
}

// A framework setting a row's text names is stated (the preset's settings: "CUDA graphs", flags),
// but not after "no", "not" or "without": held-out row 1049's notes say "(EP64, no CUDA graphs,
// recompute moe_act and layernorm)" and were read as graphs on (2026-11-30 review).
TEST(PublishedRuns, ASettingNamedAfterANegationIsNotStated) {
  const Catalog& catalog = testing::BuiltinCatalog();
  auto graphs = [&](const std::string& notes) -> std::optional<bool> {
    auto run = PublishedRunFromRow(MaverickRow({{"notes", notes}}), catalog);
    EXPECT_TRUE(run.ok()) << run.status();
    if (!run.ok() || !run->spec.training().has_cuda_graphs()) return std::nullopt;
    return run->spec.training().cuda_graphs();
  };
  EXPECT_EQ(graphs("ETP=4. Recipe: HybridEP, CUDA graphs on attn."), std::optional<bool>(true));
  EXPECT_EQ(graphs("ETP=4. Recipe: BASE_CONFIG_B200 (EP64, no CUDA graphs, recompute moe_act)."), std::nullopt);
  EXPECT_EQ(graphs("ETP=4. Run without CUDA graphs."), std::nullopt);
  EXPECT_EQ(graphs("ETP=4. CUDA graphs: not used; elsewhere no CUDA graphs."), std::optional<bool>(true));  // stated once plainly
  // A negation ends at the next word: "no padding, CUDA graphs" states the graphs.
  EXPECT_EQ(graphs("ETP=4. no padding, CUDA graphs"), std::optional<bool>(true));
}

TEST(PublishedRuns, ARunOfAnotherContainerReleaseSaysSo) {
  // framework.proto first_release / last_release: megatron-bridge was read from NeMo containers
  // 25.09-25.11, nemo from 24.01-25.04 (presets/frameworks/*.yaml). A run stating another release
  // is still predicted with the preset, and the release is an assumed input.
  const Catalog& catalog = testing::BuiltinCatalog();
  struct Case {
    const char* framework;
    const char* release;  // "" when nothing is assumed
  } cases[] = {
      {"Megatron-Bridge / Megatron-Core, NeMo 26.04.01 container", "26.04"},
      {"Megatron-Bridge / Megatron-Core, NeMo 26.02 container", "26.02"},
      {"Megatron-Bridge / Megatron-Core, NeMo 25.11 container", ""},
      {"Megatron-Bridge, NeMo 25.09 container", ""},
      {"NeMo 25.04.01 container (NeMo 2 / Megatron-Core)", ""},
      {"NeMo 24.07 container", ""},
      {"NeMo (NGC PyTorch 25.09 base; MLPerf NVIDIA implementation)", "25.09"},
      {"NeMo 23.11 container", "23.11"},
      {"NeMo (MLPerf NVIDIA implementation)", ""},  // no release stated
      {"NeMo 2025.3 launcher", ""},                  // not a YY.MM release
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.framework);
    auto run = PublishedRunFromRow(MaverickRow({{"framework", c.framework}}), catalog);
    ASSERT_TRUE(run.ok()) << run.status();
    std::string value, source;
    for (const auto& a : run->assumed) {
      if (a.field == "framework.release") value = a.value, source = a.source;
    }
    EXPECT_EQ(value, c.release);
    if (!value.empty()) EXPECT_THAT(source, ::testing::HasSubstr(absl::StrCat("the run states release ", c.release)));
  }
  // The stated release is the job's framework.release (release-dependent mechanisms of the preset).
  for (const auto& [text, release] : std::vector<std::pair<std::string, std::string>>{
           {"NeMo 25.04.01 container (NeMo 2 / Megatron-Core)", "25.04"},
           {"NeMo 24.07 container", "24.07"},
           {"NeMo (MLPerf NVIDIA implementation)", ""}}) {
    auto run = PublishedRunFromRow(MaverickRow({{"framework", text}}), catalog);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->spec.framework().release(), release) << text;
  }
  EXPECT_EQ(ReleaseInText("NeMo 26.04.01 container"), 2604);
  // A field holding a release holds exactly "YY.MM".
  EXPECT_EQ(ParseRelease("25.04"), 2504);
  for (const char* bad : {"25.04.01", "2504", "25.4", "v25.04", "25.13", ""}) EXPECT_EQ(ParseRelease(bad), 0) << bad;
  EXPECT_EQ(ReleaseInText("v0.26.04"), 0);   // preceded by '.': a version part, not a release
  EXPECT_EQ(ReleaseInText("25.13 and 25.1"), 0);
  EXPECT_EQ(ReleaseInText("H100 at 1.25.09"), 0);
  // Every preset that states releases states two it can compare, the first not after the last
  // (a row of that framework is refused naming the preset otherwise).
  int versioned = 0;
  for (const std::string& name : catalog.FrameworkNames()) {
    absl::StatusOr<v1::FrameworkSpec> f = catalog.FindFramework(name);
    ASSERT_TRUE(f.ok()) << name;
    if (f->first_release().empty() && f->last_release().empty()) continue;
    ++versioned;
    SCOPED_TRACE(name);
    EXPECT_GT(ReleaseInText(f->first_release()), 0);
    EXPECT_LE(ReleaseInText(f->first_release()), ReleaseInText(f->last_release()));
  }
  EXPECT_GE(versioned, 2);  // nemo and megatron-bridge
}

TEST(Validate, EveryPublishedRowIsPredicted) {
  // Issue 21 item 4: every row of the 158 is read (architecture, ETP and virtual pipeline as the
  // row states them) and predicted; accuracy on the new rows is the step-time model's (the
  // issue's figures are held elsewhere once reached).
  auto r = cli::Validate(STEPCAST_PUBLISHED_RUNS, testing::BuiltinCatalog());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows_size(), 158);
  for (const auto& row : r->rows()) {
    EXPECT_TRUE(row.skipped_reason().empty()) << "row " << row.row_id() << ": " << row.skipped_reason();
  }
  EXPECT_EQ(r->summary().n_skipped(), 0);
}

// `validate --explain ROW --json`: the row's job spec is a job file. Written to disk and read back
// by the job loader (`stepcast predict FILE`), it predicts the step time the explanation printed:
// a user trying one change on a published run starts from the job the harness built.
TEST(Validate, ExplainJsonSpecReadsBackAsTheSameJob) {
  for (const char* row : {"112", "230"}) {
    absl::StatusOr<std::string> out = cli::ExplainRow(STEPCAST_PUBLISHED_RUNS, testing::BuiltinCatalog(), row, true);
    ASSERT_TRUE(out.ok()) << out.status();
    // The whole output is one JSON object.
    google::protobuf::Struct parsed;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*out, &parsed).ok()) << *out;
    const auto& f = parsed.fields();
    ASSERT_TRUE(f.contains("spec") && f.contains("prediction") && f.contains("error_pct") &&
                f.contains("measured_iter_time_s") && f.contains("row_id"));
    EXPECT_EQ(f.at("row_id").string_value(), row);
    std::string spec;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(f.at("spec").struct_value(), &spec).ok());
    const std::string path = absl::StrCat(::testing::TempDir(), "/explain_", row, ".json");
    std::ofstream(path) << spec;
    absl::StatusOr<Job> job = LoadJob(path, testing::BuiltinCatalog(), nullptr);
    ASSERT_TRUE(job.ok()) << job.status();
    absl::StatusOr<Prediction> p = Predict(*job);
    ASSERT_TRUE(p.ok()) << p.status();
    const double printed = f.at("prediction").struct_value().fields().at("step_time_s").number_value();
    EXPECT_NEAR(p->step_time_s, printed, 1e-9 * printed) << "row " << row;
    const double measured = f.at("measured_iter_time_s").number_value();
    EXPECT_NEAR(f.at("error_pct").number_value(), (printed - measured) / measured * 100, 1e-6);
    // The same bytes every time (no map order in the printout).
    absl::StatusOr<std::string> again = cli::ExplainRow(STEPCAST_PUBLISHED_RUNS, testing::BuiltinCatalog(), row, true);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *out);
  }
  // A row id with quotes and an apostrophe stays one JSON string (escaped, not concatenated).
  std::ifstream in(STEPCAST_PUBLISHED_RUNS);
  std::string header, line, row112;
  std::getline(in, header);
  while (std::getline(in, line)) {
    if (line.rfind("112,", 0) == 0) row112 = line;
  }
  ASSERT_FALSE(row112.empty());
  const std::string odd_id = R"(r"1'2\3)";
  const std::string path = absl::StrCat(::testing::TempDir(), "/odd_row.csv");
  std::ofstream(path) << header << "\n\"r\"\"1'2\\3\"" << row112.substr(3) << "\n";
  absl::StatusOr<std::string> odd = cli::ExplainRow(path, testing::BuiltinCatalog(), odd_id, true);
  ASSERT_TRUE(odd.ok()) << odd.status();
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*odd, &parsed).ok()) << *odd;
  EXPECT_EQ(parsed.fields().at("row_id").string_value(), odd_id);
}

// Splits one CSV line into cells (quotes as RFC 4180; the file has no newline in a cell).
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += "\"\"";
        ++i;
      } else if (c == '"') {
        quoted = false;
        out.back() += c;
      } else {
        out.back() += c;
      }
    } else if (c == ',') {
      out.emplace_back();
    } else {
      if (c == '"') quoted = true;
      out.back() += c;
    }
  }
  return out;
}

TEST(Validate, StatedRatesGiveThePrintedStepTimes) {
  // Issue 21 item 5, end to end: every row that prints its step time (or tokens/s) and a TFLOP/s
  // or MFU figure is a worked example of its FLOP convention. With the time and tokens/s columns
  // blanked, validate converts the rate under the convention its flops_definition names; the
  // step time must come back within the printed figures' rounding (0.5%).
  std::ifstream in(STEPCAST_PUBLISHED_RUNS);
  const std::string path = std::string(::testing::TempDir()) + "/rates_only.csv";
  std::ofstream out(path);
  std::string line;
  std::vector<size_t> blank;
  size_t id_col = 0, tflops_col = 0, tokens_col = 0;
  // The printed figures' rounding: a whole TFLOP/s (llm-foundry truncates: "111" for 111.9) and
  // tokens/s to their last digit, and at least 0.5%.
  std::map<std::string, double> tolerance;
  for (bool header = true; std::getline(in, line); header = false) {
    std::vector<std::string> cells = Cells(line);
    if (header) {
      for (size_t i = 0; i < cells.size(); ++i) {
        if (cells[i] == "iter_time_s" || cells[i] == "tokens_per_s_per_gpu" || cells[i] == "tokens_per_s_total") {
          blank.push_back(i);
        }
        if (cells[i] == "row_id") id_col = i;
        if (cells[i] == "tflops_per_gpu") tflops_col = i;
        if (cells[i] == "tokens_per_s_per_gpu") tokens_col = i;
      }
      ASSERT_EQ(blank.size(), 3u);
    } else {
      double tf = 0, tok = 0;
      double tol = 0.005;
      if (absl::SimpleAtod(cells[tflops_col], &tf) && tf > 0 && cells[tflops_col].find('.') == std::string::npos) {
        tol = std::max(tol, 1.0 / tf + (absl::SimpleAtod(cells[tokens_col], &tok) && tok > 0 ? 1.0 / tok : 0.0));
      }
      tolerance[cells[id_col]] = tol;
      for (size_t i : blank) cells[i].clear();
    }
    out << absl::StrJoin(cells, ",") << "\n";
  }
  out.close();
  auto full = cli::Validate(STEPCAST_PUBLISHED_RUNS, testing::BuiltinCatalog());
  auto rates = cli::Validate(path, testing::BuiltinCatalog());
  ASSERT_TRUE(full.ok() && rates.ok());
  ASSERT_EQ(full->rows_size(), rates->rows_size());
  int checked = 0;
  std::map<std::string, int> by_convention;
  for (int i = 0; i < full->rows_size(); ++i) {
    const auto& want = full->rows(i);
    const auto& got = rates->rows(i);
    SCOPED_TRACE(absl::StrCat("row ", want.row_id(), " ", want.model()));
    if (want.measured_from() != "iter_time_s" && want.measured_from().rfind("global_batch_tokens", 0) != 0) continue;
    if (!got.skipped_reason().empty()) {
      // Rows that print no rate, and rows whose definition names no count (S23/S24 "no FLOP/s
      // printed", the S22 340B rows "F per sample not printed"), cannot be converted.
      EXPECT_THAT(got.skipped_reason(), ::testing::AnyOf(::testing::HasSubstr("mfu_pct: neither given"),
                                                         ::testing::HasSubstr("no FLOP convention recognised")));
      continue;
    }
    ++checked;
    by_convention[got.measured_from().substr(0, got.measured_from().find(' '))]++;
    const double ratio = got.measured_iter_time_s() / want.measured_iter_time_s();
    if (want.model().find("DeepSeek") != std::string::npos && want.source_id() != "S10") {
      // S22 / S26 DeepSeek-V3: the printed rate counts one MTP layer the rows do not state (the
      // shape converted has none): the converted time is 3.9% short
      // (FlopConventions.DeepSeekV3RatesCountItsMtpModule).
      EXPECT_NEAR(ratio, 0.961, 0.004);
      continue;
    }
    EXPECT_NEAR(ratio, 1.0, tolerance[want.row_id()]) << got.measured_from();
  }
  EXPECT_GE(checked, 100) << checked;
  std::cout << "rows converted back: " << checked << "\n";
  // Every convention the rows use: NeMo llama / gpt3, llm-foundry, MLPerf constants, stated
  // counts, Megatron 2025, Korthikanti (S3's MFUs).
  for (const char* c : {"nemo-llama", "nemo-gpt3", "llm-foundry", "mlperf-constant", "stated-per-sample",
                        "megatron-2025", "korthikanti-model"}) {
    EXPECT_GT(by_convention[c], 0) << c;
  }
}

}  // namespace
}  // namespace stepcast
