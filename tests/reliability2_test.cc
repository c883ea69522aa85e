// Regression tests of the second reliability review (../shared/reference/reliability_review_2.md,
// issue 26): each test reproduces a finding's input (inlined here; the review's reproducers are
// in ../shared/reference/reliability_inputs_2/) and checks the bound, the clear error or the
// answer. Each failed before its fix (noted per test; docs/RELIABILITY.md "Round 2").
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <filesystem>
#include <future>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/cli.h"
#include "cli/search.h"
#include "core/search.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/codec.h"
#include "proto/search_codec.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

fs::path TempDir(const std::string& tag) {
  fs::path d = fs::path(::testing::TempDir()) /
               ("rel2-" + tag + "-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The review's job_layers_*.yaml: a dense 8B-like shape with `layers` layers on 8 H100s.
std::string LayersJobYaml(const std::string& layers, int64_t gpus = 8, int64_t global_batch = 64) {
  return absl::StrCat(
      "name: j\n"
      "model: {shape: {name: m, layers: ", layers,
      ", hidden_size: 4096, attention_heads: 32, kv_heads: 8, ffn_hidden_size: 14336, vocab_size: 128256, "
      "ffn_type: swiglu}}\n"
      "hardware: h100-sxm\n"
      "cluster: {gpu_count: ", gpus, "}\n"
      "parallelism: {tp: 1, pp: 1}\n"
      "training: {seq_length: 4096, global_batch_size: ", global_batch, ", micro_batch_size: 1}\n");
}

absl::StatusOr<SearchBase> BaseFromYaml(const std::string& yaml) {
  v1::JobSpec spec;
  if (absl::Status s = ParseMessage(yaml, SpecFormat::kYaml, "test.yaml", &spec); !s.ok()) return s;
  return SearchBaseFromSpec(spec, testing::BuiltinCatalog(), "", nullptr);
}

// ---------------------------------------------------------------------------------------------
// N1: `layers: 1e10` made the layout search loop for ever (VppOptions was O(layers) per work
// unit and checked no deadline); every Preflight runs that search.

// Before: 2e8 layers took 18.3 s (the VPP loop, 2e8/pp steps per unit) for a 0.5 s deadline,
// and 1e10 never returned. Now refused at once, naming the field and the cap.
TEST(Reliability2N1, HugeLayerCountIsRefusedNamingTheCap) {
  for (const char* layers : {"200000000", "10000000000", "9e15"}) {
    absl::StatusOr<SearchBase> base = BaseFromYaml(LayersJobYaml(layers));
    ASSERT_TRUE(base.ok()) << layers << ": " << base.status();
    SearchOptions o;
    o.space.gpu_counts = {8};
    o.deadline = Clock::now() + std::chrono::milliseconds(500);
    int progress_calls = 0;
    o.progress = [&](const SearchProgress&) { ++progress_calls; };
    const auto t0 = Clock::now();
    absl::StatusOr<SearchResult> r = SearchLayouts(base->job, o);
    EXPECT_LT(SecondsSince(t0), 1.0) << layers;
    ASSERT_FALSE(r.ok()) << layers;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("model.shape.layers"));
    EXPECT_THAT(r.status().message(), HasSubstr("cap of 65536"));
    EXPECT_LT(progress_calls, 20) << "the progress line spun past the deadline";
  }
}

// The caps on every input that drives the enumeration, each naming its field.
TEST(Reliability2N1, InputsThatDriveTheWorkAreCapped) {
  absl::StatusOr<SearchBase> base = BaseFromYaml(LayersJobYaml("32", 8, int64_t{1} << 40));
  ASSERT_TRUE(base.ok()) << base.status();
  SearchOptions o;
  o.space.gpu_counts = {8};
  absl::StatusOr<SearchResult> r = SearchLayouts(base->job, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("training.global_batch_size: 1099511627776 is above the layout search's cap"));

  base = BaseFromYaml(LayersJobYaml("32"));
  ASSERT_TRUE(base.ok());
  o.top_n = kSearchMaxTopN + 1;
  r = SearchLayouts(base->job, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("top_n: 1001 is above the layout search's cap of 1000"));
  o.top_n = 1;
  o.threads = -5;  // was silently "one per core" (N13)
  r = SearchLayouts(base->job, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("threads: -5 must be in [0, 256]"));
  o.threads = 0;
  o.space.gpu_counts.assign(kSearchMaxGpuCounts + 1, 8);
  for (size_t i = 0; i < o.space.gpu_counts.size(); ++i) o.space.gpu_counts[i] = 8 * static_cast<int64_t>(i + 1);
  r = SearchLayouts(base->job, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("4097 GPU counts; at most 4096"));
  // A range of one-GPU nodes up to 2^24 is counted, not built (16M entries), before it is refused.
  const auto t0 = Clock::now();
  absl::StatusOr<std::vector<int64_t>> counts = GpuCountsInRange(1, int64_t{1} << 24, 1, "--gpus");
  EXPECT_LT(SecondsSince(t0), 0.5);
  ASSERT_FALSE(counts.ok());
  EXPECT_THAT(counts.status().message(), HasSubstr("holds 16777216 GPU counts; at most 4096"));
}

// A wide space at the layer cap whose layouts are all pruned by the memory bound (65,536
// layers: nothing fits): the loops of a work unit checked the deadline only between
// evaluations, so a pruned unit ran to its end. Here each unit is short, so this passed before
// the fix too (0.9 s for a 0.7 s limit); it guards the checks at every loop level. The failing-
// before case is HugeLayerCountIsRefusedNamingTheCap (2e8 layers: 18.3 s for a 0.5 s limit).
TEST(Reliability2N1, DeadlineIsHonouredWhenEveryLayoutIsPruned) {
  absl::StatusOr<SearchBase> base = BaseFromYaml(LayersJobYaml("65536", 8, 4096));
  ASSERT_TRUE(base.ok()) << base.status();
  absl::StatusOr<std::vector<int64_t>> counts = GpuCountsInRange(8, 32768, 8, "gpus");
  ASSERT_TRUE(counts.ok());
  SearchOptions o;
  o.space.gpu_counts = *counts;
  o.space.all_schedules = true;
  o.space.overlap_off = true;
  o.deadline = Clock::now() + std::chrono::milliseconds(700);
  const auto t0 = Clock::now();
  absl::StatusOr<SearchResult> r = SearchLayouts(base->job, o);
  const double secs = SecondsSince(t0);
  EXPECT_LT(secs, 1.5);
  if (r.ok()) {
    EXPECT_TRUE(r->partial);
  } else {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  }
}

// Cancellation (a cancelled RPC, a server shutting down) reaches the search while it enumerates
// and while it evaluates.
TEST(Reliability2N1, CancellationStopsTheSearch) {
  absl::StatusOr<SearchBase> base = BaseFromYaml(LayersJobYaml("65536", 8, 4096));
  ASSERT_TRUE(base.ok()) << base.status();
  SearchOptions o;
  o.space.gpu_counts = *GpuCountsInRange(8, 32768, 8, "gpus");
  o.space.all_schedules = true;
  const auto t0 = Clock::now();
  o.cancelled = [&] { return SecondsSince(t0) > 0.5; };
  absl::StatusOr<SearchResult> r = SearchLayouts(base->job, o);
  EXPECT_LT(SecondsSince(t0), 1.5);
  if (r.ok()) {
    EXPECT_TRUE(r->partial);
    EXPECT_THAT(r->partial_reason, HasSubstr("cancelled"));
  } else {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  }
}

// Preflight's suggestion: the 2 s budget is kept whatever the layer count.
TEST(Reliability2N1, SuggestionSearchKeepsItsDeadline) {
  for (const char* layers : {"200000000", "65536"}) {
    absl::StatusOr<Job> job = testing::JobFromYaml(LayersJobYaml(layers));
    ASSERT_TRUE(job.ok()) << job.status();
    absl::StatusOr<Prediction> p = Predict(*job);
    ASSERT_TRUE(p.ok()) << p.status();
    const auto t0 = Clock::now();
    absl::StatusOr<std::optional<v1::LayoutSuggestion>> s =
        SuggestLayout(*job, *p, Clock::now() + std::chrono::milliseconds(500));
    EXPECT_LT(SecondsSince(t0), 1.0) << layers;
    EXPECT_TRUE(s.ok()) << s.status();
  }
}

// `stepcast search --time-limit inf` stopped at once (the double -> duration cast overflowed),
// `nan` meant no limit; `plan` had no --time-limit at all.
TEST(Reliability2N1, TimeLimitFlagsAreCheckedAndHonoured) {
  const fs::path dir = TempDir("timelimit");
  const std::string job = (dir / "job.yaml").string();
  {
    std::ofstream(job) << LayersJobYaml("80", 64, 1024);
  }
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan(""), 1e308, -1.0}) {
    cli::SearchArgs a;
    a.job_path = job;
    a.quiet = true;
    a.time_limit_s = bad;
    ::testing::internal::CaptureStderr();
    const int rc = cli::Search(a, testing::BuiltinCatalog());
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 2) << bad;
    EXPECT_THAT(err, HasSubstr("--time-limit")) << bad;
  }
  // plan over 1..16384 GPUs of a wide job: stops at the limit, says so.
  cli::PlanOptions po;
  po.job_path = (dir / "wide.yaml").string();
  {
    std::ofstream(po.job_path) << LayersJobYaml("65536", 8, 16384);
  }
  po.hardware = {"h100-sxm"};
  po.target_tokens_per_s = 1e12;  // never reached: every count is searched
  po.time_limit_s = 1.0;
  const auto t0 = Clock::now();
  absl::StatusOr<std::string> out = cli::Plan(po, testing::BuiltinCatalog());
  EXPECT_LT(SecondsSince(t0), 2.5);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, HasSubstr("PARTIAL: the time limit (--time-limit 1 s)"));
  po.time_limit_s = std::numeric_limits<double>::infinity();
  out = cli::Plan(po, testing::BuiltinCatalog());
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("--time-limit"));
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// N12: `--html` equal to the input overwrote the job file with exit 0.
TEST(Reliability2N12, SearchPageMustNotOverwriteTheJob) {
  const fs::path dir = TempDir("html");
  const std::string job = (dir / "job.yaml").string();
  const std::string yaml = LayersJobYaml("32", 8, 64);
  {
    std::ofstream(job) << yaml;
  }
  cli::SearchArgs a;
  a.job_path = job;
  a.quiet = true;
  a.html_path = (dir / "." / "job.yaml").string();  // the same file by another name
  ::testing::internal::CaptureStderr();
  const int rc = cli::Search(a, testing::BuiltinCatalog());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_THAT(err, HasSubstr("--html"));
  std::ifstream in(job);
  const std::string after((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after, yaml);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stepcast
