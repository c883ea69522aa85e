// `stepcast report --log FILE` (cli/cli.h ReportRequestFromLog): the ReportRun request a training
// log gives, and the service storing the framework's own figures as sent. Every expected value
// below is read by hand from the test log's text (tests/data/training_logs, README there), the
// first record left out as the warm-up (docs/TRACES.md "Training logs").
#include <cmath>
#include <filesystem>
#include <fstream>

#include "cli/cli.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugin/trace/training_log.h"
#include "proto/codec.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

using ::testing::HasSubstr;

std::string LogPath(const std::string& name) {
  return std::string(STEPCAST_SOURCE_DIR) + "/tests/data/training_logs/" + name;
}

struct LogCase {
  const char* file;
  int gpus;
  const char* framework;
  double step_time_s, tokens_per_s;         // the request's measurement (one of them 0)
  double tflops_per_gpu, mfu, tokens_per_s_per_gpu;  // framework_reported (0: not stated)
  int iterations;
};

TEST(ReportRequestFromLog, EachFrameworkByHand) {
  const LogCase cases[] = {
      // elapsed time per iteration (ms) 9000.0 | 5210.4, 5198.7, 5225.0, 5201.9; TFLOP/s/GPU
      // 150.2 | 259.4, 260.0, 258.7, 259.8: medians of the four after the first.
      {"megatron_lm_gpt.log", 0, "megatron", (5.2019 + 5.2104) / 2, 0, (259.4 + 259.8) / 2, 0, 0, 4},
      // 2100.0 | 1510.2, 1498.8, 1502.5 ms; token/sec/GPU 4339.0, 4372.1, 4361.4; TFLOP/sec/GPU
      // 125.3, 126.2, 125.9.
      {"megatron_lm_tokens.log", 0, "megatron", 1.5025, 0, 125.9, 0, 4361.4, 3},
      // 14820.0 | 3410.0, 3380.0, 3400.0 ms; 98.0 | 421.7, 425.3, 422.9 TFLOP/s/GPU.
      {"megatron_bridge.log", 0, "megatron", 3.4, 0, 422.9, 0, 0, 3},
      // train_step_timing in s: 7.126 | 2.505, 1.505, 1.512, 1.498.
      {"nemo2_progress.log", 0, "nemo", (1.505 + 1.512) / 2, 0, 0, 0, 0, 4},
      // train_step_timing in s=3.500 | 3.128, 3.130 (the tqdm bar redrawn with \r).
      {"nemo1_tqdm.log", 0, "nemo", (3.128 + 3.130) / 2, 0, 0, 0, 0, 2},
      // No step time: tps 1,023 | 6,788, 6,801, 6,795 per GPU x 8 GPUs; tflops 398.51, 399.27,
      // 398.92; mfu 40.29, 40.37, 40.34 %.
      {"torchtitan_llama3_8b.log", 8, "torchtitan", 0, 6795.0 * 8, 398.92, 0.4034, 6795, 3},
  };
  for (const LogCase& c : cases) {
    SCOPED_TRACE(c.file);
    v1::ReportRunRequest req;
    absl::Status s = cli::ReportRequestFromLog(LogPath(c.file), c.gpus, &req);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_DOUBLE_EQ(req.measured_step_time_s(), c.step_time_s);
    EXPECT_DOUBLE_EQ(req.measured_tokens_per_s(), c.tokens_per_s);
    const v1::FrameworkReported& f = req.framework_reported();
    EXPECT_EQ(f.framework(), c.framework);
    EXPECT_DOUBLE_EQ(f.tflops_per_gpu(), c.tflops_per_gpu);
    EXPECT_DOUBLE_EQ(f.mfu(), c.mfu);
    EXPECT_DOUBLE_EQ(f.tokens_per_s_per_gpu(), c.tokens_per_s_per_gpu);
    EXPECT_EQ(f.iterations(), c.iterations);
    EXPECT_EQ(f.warmup_records(), 1);
    EXPECT_EQ(req.labels().at("source"), std::string("training-log:") + c.framework);
  }
}

TEST(ReportRequestFromLog, TokensPerGpuOnlyNeedsTheGpuCount) {
  v1::ReportRunRequest req;
  absl::Status s = cli::ReportRequestFromLog(LogPath("torchtitan_llama3_8b.log"), 0, &req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("torchtitan_llama3_8b.log"));
  EXPECT_THAT(s.message(), HasSubstr("--gpus"));
}

TEST(ReportRequestFromLog, TheReadersErrorsGoOutUnchanged) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "report_log_test";
  std::filesystem::create_directories(dir);
  const std::string bad = (dir / "bad.log").string();
  std::ofstream(bad) << "Training epoch 0, iteration 0/9 | global_step: 0 | train_step_timing in s: 1.0\n"
                        "Training epoch 0, iteration 1/9 | global_step: 1 | train_step_timing in s: nan\n";
  const std::string empty = (dir / "none.log").string();
  std::ofstream(empty) << "hello\n";
  for (const std::string& path : {bad, empty, (dir / "missing.log").string()}) {
    SCOPED_TRACE(path);
    v1::ReportRunRequest req;
    const absl::Status got = cli::ReportRequestFromLog(path, 8, &req);
    const absl::Status want = trace::ReadTrainingLog(path).status();
    ASSERT_FALSE(want.ok());
    EXPECT_EQ(got, want);
    EXPECT_FALSE(req.has_framework_reported());
  }
  v1::ReportRunRequest req;
  EXPECT_THAT(cli::ReportRequestFromLog(bad, 0, &req).message(), HasSubstr("line 2"));
}

TEST(ReportRequestFromLog, ThePrintedLineSaysWhoseConvention) {
  v1::ReportRunRequest req;
  ASSERT_TRUE(cli::ReportRequestFromLog(LogPath("torchtitan_llama3_8b.log"), 8, &req).ok());
  const std::string line = cli::FormatFrameworkReported(req.framework_reported());
  EXPECT_THAT(line, HasSubstr("torchtitan log: 3 iterations after 1 warm-up record,"));
  EXPECT_THAT(line, HasSubstr("398.9 TFLOP/s per GPU, MFU 40.34%, 6795 tokens/s per GPU"));
  EXPECT_THAT(line, HasSubstr("torchtitan's own FLOP convention, not converted"));
}

// The service stores framework_reported with the run as sent, and refuses impossible values
// naming the field.
TEST(ReportRunFrameworkReported, StoredAsSentAndChecked) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "report_log_service";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ServeOptions o;
  o.listen_address = "127.0.0.1:0";
  o.db_path = (dir / "store.db").string();
  o.log = nullptr;
  auto server = StepcastServer::Start(o, testing::BuiltinCatalog());
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions c;
  c.address = (*server)->address();
  absl::StatusOr<Client> client = Client::Connect(c);
  ASSERT_TRUE(client.ok());

  v1::ReportRunRequest base;
  ASSERT_TRUE(ParseMessage(R"(
name: llama8b
model: llama3-8b
hardware: h100-sxm
cluster: {name: cluster-a, gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64, sharding: zero1})",
                           SpecFormat::kYaml, "spec.yaml", base.mutable_job())
                  .ok());
  ASSERT_TRUE(cli::ReportRequestFromLog(LogPath("torchtitan_llama3_8b.log"), 8, &base).ok());
  {
    v1::ReportRunResponse resp;
    auto ctx = client->Context();
    const grpc::Status st = client->stub().ReportRun(ctx.get(), base, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.run().framework_reported().SerializeAsString(), base.framework_reported().SerializeAsString());
    EXPECT_EQ(resp.run().labels().at("source"), "training-log:torchtitan");
    v1::GetRunRequest get;
    get.set_run_id(resp.run().run_id());
    v1::GetRunResponse got;
    auto ctx2 = client->Context();
    ASSERT_TRUE(client->stub().GetRun(ctx2.get(), get, &got).ok());
    EXPECT_DOUBLE_EQ(got.run().framework_reported().mfu(), 0.4034);
    EXPECT_DOUBLE_EQ(got.run().framework_reported().tflops_per_gpu(), 398.92);
  }
  const struct {
    void (*mutate)(v1::FrameworkReported*);
    const char* field;
  } bad[] = {
      {[](v1::FrameworkReported* f) { f->set_tflops_per_gpu(-1); }, "framework_reported.tflops_per_gpu"},
      {[](v1::FrameworkReported* f) { f->set_mfu(NAN); }, "framework_reported.mfu"},
      {[](v1::FrameworkReported* f) { f->set_tokens_per_s_per_gpu(INFINITY); }, "framework_reported.tokens_per_s_per_gpu"},
      {[](v1::FrameworkReported* f) { f->set_iterations(-1); }, "framework_reported.iterations"},
      {[](v1::FrameworkReported* f) { f->set_framework(std::string(65, 'x')); }, "framework_reported.framework"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.field);
    v1::ReportRunRequest req = base;
    b.mutate(req.mutable_framework_reported());
    v1::ReportRunResponse resp;
    auto ctx = client->Context();
    const grpc::Status st = client->stub().ReportRun(ctx.get(), req, &resp);
    EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), HasSubstr(b.field));
  }
  server->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stepcast
