// The probe injected (CUDA_INJECTION64_PATH) into a CUDA program with a known kernel sequence.
// Needs a GPU: skipped, with the reason, where there is none.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "gtest/gtest.h"
#include "proto/codec.h"
#include "stepcast/v1/probe.pb.h"

namespace stepcast {
namespace {

// The build's path, else the environment's, else the file of that name beside this test binary
// (scripts/carry_calibrate.sh carries bin/ and lib/ together to a GPU machine).
std::string Locate(const char* env, const std::string& built, const std::string& beside) {
  if (const char* e = std::getenv(env); e != nullptr && *e != '\0') return e;
  if (std::filesystem::exists(built)) return built;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path p = self.parent_path() / beside;
    if (std::filesystem::exists(p)) return p.lexically_normal().string();
  }
  return built;
}

TEST(ProbeGpu, InjectedIntoAKnownKernelSequence) {
#ifndef STEPCAST_PROBE_GPU_PROGRAM
  GTEST_SKIP() << "no CUDA compiler at build time: the probe's GPU test program was not built";
#else
  const std::string program = Locate("STEPCAST_PROBE_GPU_PROGRAM", STEPCAST_PROBE_GPU_PROGRAM, "probe_gpu_program");
  const std::string probe = Locate("STEPCAST_PROBE_LIBRARY", STEPCAST_PROBE_LIBRARY, "../lib/libstepcast_probe.so");
  if (!std::filesystem::exists(program)) GTEST_SKIP() << "the probe's GPU test program is not at " << program;
  ASSERT_TRUE(std::filesystem::exists(probe)) << "the probe library is not at " << probe;
  const int check = std::system((program + " --check").c_str());
  if (!WIFEXITED(check) || WEXITSTATUS(check) != 0) {
    GTEST_SKIP() << "no CUDA device (" << program << " --check: cudaGetDeviceCount failed or found none): "
                 << "the probe injection test needs a GPU";
  }
  const std::string out = std::string(::testing::TempDir()) + "/probe_gpu.json";
  std::filesystem::remove(out);
  const std::string cmd = "CUDA_INJECTION64_PATH=" + probe + " STEPCAST_PROBE_OUT=" + out +
                          " STEPCAST_PROBE_WARMUP=2 " + program;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  v1::ProbeReport r;
  ASSERT_TRUE(std::filesystem::exists(out)) << "no report at " << out;
  const absl::Status read = ParseMessageFile(out, &r);
  ASSERT_TRUE(read.ok()) << read;
  // Each kernel goes to the step range that launched it (CUPTI RUNTIME records, correlation ids).
  EXPECT_EQ(r.step_source(), "nvtx:step (launch correlation)");
  EXPECT_FALSE(r.cupti_taken_over());
  // 10 NVTX steps: 10 starts close 9 steps, 2 of them warm-up.
  ASSERT_EQ(r.steps_size(), 7);
  for (const auto& s : r.steps()) {
    EXPECT_EQ(s.kernel_count(), 3);
    EXPECT_GT(s.busy().gemm_s(), 0);
    EXPECT_GT(s.busy().elementwise_s(), 0);
    EXPECT_EQ(s.busy().communication_s(), 0);
    EXPECT_LE(s.busy().gemm_s() + s.busy().elementwise_s() + s.idle_s(), s.step_time_s() * 1.0001);
  }
  EXPECT_GT(r.median().busy().gemm_s(), r.median().busy().elementwise_s());
#endif
}

}  // namespace
}  // namespace stepcast
