// The training-log reader (plugin/trace/training_log.h) on logs in each framework's own format
// (tests/data/training_logs, README there: each written from the framework's format string):
// every number read exactly, the warm-up rule, and bad input refused with the line and field.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugin/trace/training_log.h"

namespace stepcast::trace {
namespace {

const std::string kLogs = std::string(STEPCAST_SOURCE_DIR) + "/tests/data/training_logs/";

TrainingLog Read(const std::string& name, int warmup = 1) {
  TrainingLogOptions o;
  o.warmup_records = warmup;
  absl::StatusOr<TrainingLog> l = ReadTrainingLog(kLogs + name, o);
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *std::move(l) : TrainingLog();
}

TEST(TrainingLog, MegatronLm) {
  const TrainingLog l = Read("megatron_lm_gpt.log");
  EXPECT_EQ(l.framework, "megatron");
  ASSERT_EQ(l.iterations.size(), 5u);  // the memory report and the validation line are not iterations
  EXPECT_EQ(l.iterations[0].iteration, 10);
  EXPECT_EQ(l.iterations[0].line, 3);
  EXPECT_DOUBLE_EQ(l.iterations[0].step_time_s, 9.0);
  EXPECT_DOUBLE_EQ(l.iterations[1].step_time_s, 5.2104);
  EXPECT_DOUBLE_EQ(l.iterations[1].tflops_per_gpu, 259.4);
  EXPECT_EQ(l.iterations[4].global_batch_size, 256);
  // Warm-up: the first record (9.0 s, 150.2) is left out; median of 5.2104, 5.1987, 5.225, 5.2019.
  EXPECT_DOUBLE_EQ(l.median_step_time_s, (5.2019 + 5.2104) / 2);
  EXPECT_DOUBLE_EQ(l.median_tflops_per_gpu, (259.4 + 259.8) / 2);
  EXPECT_TRUE(std::isnan(l.median_mfu));
}

TEST(TrainingLog, MegatronLmTokenThroughput) {
  const TrainingLog l = Read("megatron_lm_tokens.log");
  ASSERT_EQ(l.iterations.size(), 4u);
  EXPECT_DOUBLE_EQ(l.iterations[2].tokens_per_s_per_gpu, 4372.1);
  EXPECT_DOUBLE_EQ(l.iterations[2].tflops_per_gpu, 126.2);
  EXPECT_DOUBLE_EQ(l.median_step_time_s, 1.5025);  // 1.5102, 1.4988, 1.5025
  EXPECT_DOUBLE_EQ(l.median_tokens_per_s_per_gpu, 4361.4);
}

TEST(TrainingLog, MegatronBridge) {
  const TrainingLog l = Read("megatron_bridge.log");
  EXPECT_EQ(l.framework, "megatron");
  ASSERT_EQ(l.iterations.size(), 4u);  // the "Step Time : ..." lines are not read
  EXPECT_EQ(l.iterations[3].iteration, 4);
  EXPECT_DOUBLE_EQ(l.iterations[3].step_time_s, 3.4);
  EXPECT_DOUBLE_EQ(l.median_step_time_s, 3.4);        // 3.41, 3.38, 3.40
  EXPECT_DOUBLE_EQ(l.median_tflops_per_gpu, 422.9);   // 421.7, 425.3, 422.9
  EXPECT_EQ(l.iterations[0].global_batch_size, 16);
}

TEST(TrainingLog, NeMo2ProgressBar) {
  const TrainingLog l = Read("nemo2_progress.log");
  EXPECT_EQ(l.framework, "nemo");
  ASSERT_EQ(l.iterations.size(), 5u);
  EXPECT_EQ(l.iterations[0].iteration, 0);
  EXPECT_DOUBLE_EQ(l.iterations[0].step_time_s, 7.126);
  EXPECT_EQ(l.iterations[4].global_batch_size, 8);
  EXPECT_DOUBLE_EQ(l.median_step_time_s, (1.505 + 1.512) / 2);  // 2.505, 1.505, 1.512, 1.498
  // With two warm-up records: 1.505, 1.512, 1.498.
  EXPECT_DOUBLE_EQ(Read("nemo2_progress.log", 2).median_step_time_s, 1.505);
}

TEST(TrainingLog, NeMo1TqdmRedrawnWithCarriageReturns) {
  const TrainingLog l = Read("nemo1_tqdm.log");
  EXPECT_EQ(l.framework, "nemo");
  ASSERT_EQ(l.iterations.size(), 3u);
  EXPECT_EQ(l.iterations[2].iteration, 99);
  EXPECT_DOUBLE_EQ(l.iterations[2].step_time_s, 3.13);
  EXPECT_DOUBLE_EQ(l.median_step_time_s, (3.128 + 3.13) / 2);
}

TEST(TrainingLog, TorchtitanWithColours) {
  const TrainingLog l = Read("torchtitan_llama3_8b.log");
  EXPECT_EQ(l.framework, "torchtitan");
  ASSERT_EQ(l.iterations.size(), 4u);  // the validation line is not a training step
  EXPECT_EQ(l.iterations[1].iteration, 10);
  EXPECT_DOUBLE_EQ(l.iterations[1].tokens_per_s_per_gpu, 6788);
  EXPECT_DOUBLE_EQ(l.iterations[1].tflops_per_gpu, 398.51);
  EXPECT_DOUBLE_EQ(l.iterations[1].mfu, 0.4029);
  EXPECT_TRUE(std::isnan(l.iterations[1].step_time_s));  // torchtitan logs throughput, not a step time
  EXPECT_DOUBLE_EQ(l.median_mfu, 0.4034);                 // 40.29, 40.37, 40.34 %
  EXPECT_DOUBLE_EQ(l.median_tokens_per_s_per_gpu, 6795);
}

std::string Write(const std::string& name, const std::string& text) {
  const std::string p = ::testing::TempDir() + name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

// Real logs whose layout the reader once misread (tests/data/training_logs/README.md gives each
// source); every expected value read by hand from the file, the line named.

// aws-samples/awsome-distributed-training torchtitan/slurm/README.md: Llama 3 8B on 4 x 8 H100,
// srun --label output, so one logged step (1990) appears once per rank that printed it: 9
// lines, all "tps: 6,785  mfu: 39.73%". One record, not nine.
TEST(TrainingLog, OneStepPrintedByEveryRankCountsOnce) {
  const TrainingLog l = Read("real_torchtitan_aws_llama3_8b_h100x32_ranks.log", 0);
  EXPECT_EQ(l.framework, "torchtitan");
  ASSERT_EQ(l.iterations.size(), 1u);
  EXPECT_EQ(l.duplicate_records, 8);
  EXPECT_EQ(l.iterations[0].iteration, 1990);
  EXPECT_EQ(l.iterations[0].line, 1);
  EXPECT_DOUBLE_EQ(l.median_tokens_per_s_per_gpu, 6785);
  EXPECT_DOUBLE_EQ(l.median_mfu, 0.3973);
  EXPECT_EQ(l.year, 2025);  // "2025-03-04 00:44:44,441"
  // With the default warm-up record there is nothing left: said, not read from a rank's copy.
  absl::StatusOr<TrainingLog> d = ReadTrainingLog(kLogs + "real_torchtitan_aws_llama3_8b_h100x32_ranks.log");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), ::testing::HasSubstr("1 logged iterations, none after the 1 warm-up record"));
  // Ranks interleaved over several steps: each step once, the first rank's line kept.
  const std::string ranks =
      "[rank0]:step: 10  loss: 2.0  tps: 100  mfu: 10.00%\n[rank1]:step: 10  loss: 2.0  tps: 101  mfu: 10.10%\n"
      "[rank1]:step: 20  loss: 1.9  tps: 300  mfu: 30.00%\n[rank0]:step: 20  loss: 1.9  tps: 299  mfu: 29.90%\n"
      "[rank0]:step: 30  loss: 1.8  tps: 200  mfu: 20.00%\n[rank1]:step: 30  loss: 1.8  tps: 201  mfu: 20.10%\n";
  absl::StatusOr<TrainingLog> r = ReadTrainingLog(Write("ranks.log", ranks));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->iterations.size(), 3u);
  EXPECT_EQ(r->duplicate_records, 3);
  EXPECT_DOUBLE_EQ(r->iterations[1].tokens_per_s_per_gpu, 300);  // rank 1's line came first
  EXPECT_DOUBLE_EQ(r->median_tokens_per_s_per_gpu, 250);        // 300, 200 after the warm-up
  // A count that starts over is not a copy: NeMo lines without global_step number iterations per
  // epoch (0, 1 of epoch 0, then 0, 1 of epoch 1): four records.
  absl::StatusOr<TrainingLog> e = ReadTrainingLog(Write(
      "epochs.log",
      "Training epoch 0, iteration 0/2 | train_step_timing in s: 5.0\nTraining epoch 0, iteration 1/2 | train_step_timing "
      "in s: 1.0\nTraining epoch 1, iteration 0/2 | train_step_timing in s: 1.2\nTraining epoch 1, iteration 1/2 | "
      "train_step_timing in s: 1.1\n"));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->iterations.size(), 4u);
  EXPECT_EQ(e->duplicate_records, 0);
  EXPECT_DOUBLE_EQ(e->median_step_time_s, 1.1);
}

// Composer's SpeedMonitor (composer/callbacks/speed_monitor.py batch_end) keeps window_size + 1
// batch-end times of state.timestamp.total_wct and logs window_size / (last - first): its first
// time is batch 1's end, so no throughput record holds batch 1 (the start-up the warm-up rule
// leaves out elsewhere). ROCm/rocm-blogs mosaicml-composer: MPT-30B fine-tuning with
// llm-foundry 0.7.0 / Composer 0.21.3 on 2 x 8 MI300X, one throughput record ("[epoch=1]
// [batch=5/5]:", line 17): "Train throughput/batches_per_sec: 0.0027" (line 29),
// "Train throughput/device/tokens_per_sec: 1255.1776" (line 34), "Train time/batch: 4" (line 18).
TEST(TrainingLog, ComposerThroughputHoldsNoStartUp) {
  const TrainingLog l = Read("real_llm_foundry_rocm_mpt30b_mi300x_x16.log");
  EXPECT_EQ(l.framework, "llm-foundry");
  EXPECT_EQ(l.warmup_records, 0);
  ASSERT_EQ(l.iterations.size(), 1u);
  EXPECT_EQ(l.iterations[0].line, 17);
  EXPECT_EQ(l.iterations[0].iteration, 4);
  EXPECT_DOUBLE_EQ(l.median_step_time_s, 1 / 0.0027);
  EXPECT_DOUBLE_EQ(l.median_tokens_per_s_per_gpu, 1255.1776);
  EXPECT_TRUE(std::isnan(l.median_mfu));  // MFU not printed (no gpu_flops_available for MI300X then)
  // Two records asked for: one Composer record left out (records at batches 101, 201, 300 of the
  // written log: batches_per_sec 0.1250, 0.1000, 0.0800 -> 8, 10, 12.5 s).
  const TrainingLog two = Read("llm_foundry_console.log", 2);
  EXPECT_EQ(two.warmup_records, 1);
  EXPECT_DOUBLE_EQ(two.median_step_time_s, (10 + 12.5) / 2);
  EXPECT_DOUBLE_EQ(Read("llm_foundry_console.log").median_step_time_s, 10);
}

TEST(TrainingLog, BadInputIsRefusedWithLineAndField) {
  // A recognised line with a number that is not one: the line and the field named.
  absl::StatusOr<TrainingLog> l = ReadTrainingLog(Write(
      "bad.log", "noise\n [x] iteration 10/ 20 | elapsed time per iteration (ms): nan | global batch size: 8 |\n"));
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.status().message(), ::testing::HasSubstr("line 2"));
  EXPECT_THAT(l.status().message(), ::testing::HasSubstr("elapsed time per iteration (ms)"));
  l = ReadTrainingLog(Write("neg.log", "step: 3  loss: 1.0  tps: -5  mfu: 1%\n"));
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.status().message(), ::testing::HasSubstr("tps"));
  // No iteration line, or none after the warm-up.
  EXPECT_EQ(ReadTrainingLog(Write("none.log", "hello\nworld\n")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadTrainingLog(Write("one.log", "Training epoch 0, iteration 0/9 | train_step_timing in s: 1.0\n"))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  // Two frameworks in one log.
  l = ReadTrainingLog(Write("mixed.log",
                            " iteration 1/ 2 | elapsed time per iteration (ms): 10.0 |\nstep: 1  tps: 5  mfu: 1%\n"));
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.status().message(), ::testing::HasSubstr("a torchtitan line in a megatron log"));
  // Not a regular file; larger than the bound; a very long line is skipped, not held.
  const std::string fifo = ::testing::TempDir() + "log_fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_THAT(ReadTrainingLog(fifo).status().message(), ::testing::HasSubstr("not a regular file"));
  ::unlink(fifo.c_str());
  EXPECT_THAT(ReadTrainingLog("/dev/zero").status().message(), ::testing::HasSubstr("not a regular file"));
  TrainingLogOptions small;
  small.max_bytes = 10;
  EXPECT_THAT(ReadTrainingLog(kLogs + "nemo2_progress.log", small).status().message(),
              ::testing::HasSubstr("max_bytes"));
  const std::string long_line = std::string(3 << 20, 'x') + "elapsed time per iteration (ms): 1 |\n";
  l = ReadTrainingLog(Write("long.log", long_line + "step: 1  tps: 5\nstep: 2  tps: 7\n"));
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->iterations.size(), 2u);
  EXPECT_EQ(l->lines, 3);
}

}  // namespace
}  // namespace stepcast::trace
