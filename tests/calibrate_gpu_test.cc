// The calibration's GPU code on a GPU: our kernels against the host, a cuBLASLt GEMM against a
// CPU reference, every dtype and layout of the sweep verified, the gate kernel, NCCL results
// checked and timed by the harness. Skipped, with the reason, without a GPU.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "calibrate/communicator.h"
#include "calibrate/gpu_bench.h"
#include "calibrate/nccl_backend.h"
#include "gtest/gtest.h"
#include "kernels/comm_like.h"
#include "kernels/stream.h"

namespace stepcast::calibrate {
namespace {

std::vector<GpuInfo> GpusOrSkip() {
  absl::StatusOr<std::vector<GpuInfo>> g = ListCudaGpus();
  if (!g.ok()) return {};
  return *g;
}

TEST(CalibrateGpu, StreamKernelsAreCorrectOnRandomInputs) {
  const auto gpus = GpusOrSkip();
  if (gpus.empty()) GTEST_SKIP() << "no CUDA device: " << ListCudaGpus().status().message();
  const size_t n = 1 << 20, bytes = n * sizeof(float);
  float *a, *b, *c;
  ASSERT_EQ(cudaMalloc(&a, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&c, bytes), cudaSuccess);
  ASSERT_EQ(kernels::LaunchFillRandom(b, n, kernels::FillType::kFloat32, 11, nullptr), cudaSuccess);
  ASSERT_EQ(kernels::LaunchFillRandom(c, n, kernels::FillType::kFloat32, 12, nullptr), cudaSuccess);
  ASSERT_EQ(kernels::LaunchTriad(a, b, c, 0.4f, bytes, nullptr), cudaSuccess);
  std::vector<float> ha(n), hb(n), hc(n);
  cudaMemcpy(ha.data(), a, bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(hb.data(), b, bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(hc.data(), c, bytes, cudaMemcpyDeviceToHost);
  size_t zeros = 0;
  for (size_t i = 0; i < n; ++i) {
    // nvcc contracts b + s*c into one FMA (one rounding), the host may round twice: the two differ
    // by up to an ulp of the operands, which is many ulps of the result when b and s*c cancel.
    const float want = hb[i] + 0.4f * hc[i];
    ASSERT_NEAR(ha[i], want, 3e-7f * (std::fabs(hb[i]) + 0.4f * std::fabs(hc[i]))) << i;
    zeros += hb[i] == 0.0f;
  }
  EXPECT_EQ(zeros, 0u);  // random data, never zeros
  ASSERT_EQ(kernels::LaunchCopy(b, a, bytes, nullptr), cudaSuccess);
  cudaMemcpy(ha.data(), a, bytes, cudaMemcpyDeviceToHost);
  EXPECT_EQ(ha, hb);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

// BenchGemm checks 16 sampled outputs against a host reference before it returns a rate, so an
// ok status here means the benchmarked GEMM (its own dtype, layout and algorithm) was right.
TEST(CalibrateGpu, GemmBenchmarkIsVerifiedAndPlausibleForEveryDtype) {
  const auto gpus = GpusOrSkip();
  if (gpus.empty()) GTEST_SKIP() << "no CUDA device: " << ListCudaGpus().status().message();
  BenchOptions o{2, 5};
  for (DType d : {DType::kBF16, DType::kFP16, DType::kFP8, DType::kTF32, DType::kFP32}) {
    if (d == DType::kFP8 && !(gpus[0].cc_major > 8 || gpus[0].cc_minor >= 9)) continue;
    auto s = BenchGemm(gpus[0], d, {4096, 4096, 4096, GemmPass::kSquare, "square 4096"}, o, nullptr);
    ASSERT_TRUE(s.ok()) << DTypeName(d) << ": " << s.status();
    EXPECT_GT(s->median_flops_per_s(), 1e12) << DTypeName(d);
    EXPECT_LE(s->best_flops_per_s(), 5e15) << DTypeName(d);  // below any datasheet peak
  }
  // A transformer layer's three passes (MLP down, k = 3.5 x 4096 / 2): TN, NN and NT, and fp8's
  // TN with fast accumulation, each verified the same way.
  for (GemmPass p : {GemmPass::kForward, GemmPass::kDgrad, GemmPass::kWgrad}) {
    const GemmShape sh{4096, 4096, 7168, p, "MLP down"};
    auto s = BenchGemm(gpus[0], DType::kBF16, sh, o, nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->layout(), GemmLayoutName(RunFor(DType::kBF16, sh).layout));
    if (gpus[0].cc_major >= 9) {
      auto f = BenchGemm(gpus[0], DType::kFP8, sh, o, nullptr);
      ASSERT_TRUE(f.ok()) << f.status();
      EXPECT_EQ(f->fast_accum(), p == GemmPass::kForward);
    }
  }
  EXPECT_TRUE(SustainedWarmup(gpus[0], 1.0).ok());
}

TEST(CalibrateGpu, GateHoldsTheStreamUntilOpenedAndTimesOut) {
  const auto gpus = GpusOrSkip();
  if (gpus.empty()) GTEST_SKIP() << "no CUDA device: " << ListCudaGpus().status().message();
  int* flag = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&flag), 2 * sizeof(int), cudaHostAllocMapped), cudaSuccess);
  volatile int* v = flag;
  v[0] = 0;
  v[1] = 0;
  int* dev = nullptr;
  cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), flag, 0);
  cudaStream_t s;
  cudaStreamCreate(&s);
  ASSERT_EQ(kernels::LaunchGate(dev, dev + 1, 5'000'000'000ull, s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);  // held
  v[0] = 1;
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(v[1], 0);
  v[0] = 0;
  ASSERT_EQ(kernels::LaunchGate(dev, dev + 1, 10'000'000ull, s), cudaSuccess);  // 10 ms, never opened
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(v[1], 1);
  cudaStreamDestroy(s);
  cudaFreeHost(flag);
}

// The host-call pass on a GPU (docs/CALIBRATION.md "Host calls"): an empty kernel's launch, then a
// cuBLASLt GEMM issued as Transformer Engine issues each expert's, bf16 and (8.9+) fp8; every call
// succeeded (the pass stops at the first error), each figure a few microseconds (a launch call on
// an x86 DGX H100 host is ~2-5 us, a cuBLASLt call with its heuristic query ~10-30 us: under 1 ms
// holds any host that is not stalled), the GEMM call dearer than the bare launch.
TEST(CalibrateGpu, HostCallsAreTimedOnTheHost) {
  const auto gpus = GpusOrSkip();
  if (gpus.empty()) GTEST_SKIP() << "no CUDA device: " << ListCudaGpus().status().message();
  absl::StatusOr<std::vector<v1::HostCallSample>> s = BenchHostCalls(gpus[0], BenchOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  const bool fp8 = gpus[0].cc_major > 8 || (gpus[0].cc_major == 8 && gpus[0].cc_minor >= 9);
  ASSERT_EQ(s->size(), fp8 ? 3u : 2u);
  EXPECT_EQ((*s)[0].call(), "kernel_launch");
  for (const auto& x : *s) {
    EXPECT_EQ(x.time().count(), kHostCallBatches) << x.ShortDebugString();
    EXPECT_GT(x.time().median_s(), 0) << x.ShortDebugString();
    EXPECT_LT(x.time().median_s(), 1e-3) << x.ShortDebugString();
    std::printf("%s %s: %.2f us a call (p10 %.2f, p90 %.2f)\n", x.call().c_str(), v1::DType_Name(x.dtype()).c_str(),
                x.time().median_s() * 1e6, x.time().p10_s() * 1e6, x.time().p90_s() * 1e6);
  }
  for (size_t i = 1; i < s->size(); ++i) {
    EXPECT_EQ((*s)[i].call(), "cublaslt_gemm_call");
    EXPECT_GT((*s)[i].time().median_s(), (*s)[0].time().median_s());
  }
}

// The contention sweep on a GPU: the communication-shaped kernel copies what it was asked to
// (its destination equals its source), paces itself to the target rate (within 15%: the sleep
// granularity and the last round), holds its SMs (every CTA resident before the GEMM starts) and
// stops when told; the GEMM's times are finite and its slowdown beside 24 CTAs is above what
// losing nothing would give, and the SM-target variant ran.
TEST(CalibrateGpu, ContentionSweepPacesTheCopyAndTimesTheGemmBesideIt) {
  const auto gpus = GpusOrSkip();
  if (gpus.empty()) GTEST_SKIP() << "no CUDA device: " << ListCudaGpus().status().message();
  ContentionPlan plan;
  plan.shapes = {{4096, 4096, 4096, GemmPass::kSquare, "test"}};
  plan.ctas = {24};
  plan.cluster_sizes = {4};  // as NCCL launches on sm_90+
  plan.target_bytes_per_s = 200e9;
  BenchOptions o;
  absl::StatusOr<std::vector<v1::ContentionSample>> s = BenchContention(gpus[0], plan, o);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  for (const auto& c : *s) {
    EXPECT_GT(c.alone().median_s(), 0);
    EXPECT_TRUE(std::isfinite(c.slowdown()));
    EXPECT_GT(c.slowdown(), -0.05) << c.ShortDebugString();
    EXPECT_NEAR(c.achieved_bytes_per_s(), 200e9, 0.15 * 200e9) << c.ShortDebugString();
    EXPECT_EQ(c.ctas(), 24);
  }
  EXPECT_FALSE((*s)[0].sm_count_target());
  EXPECT_TRUE((*s)[1].sm_count_target());
  // The copy itself: one paced kernel of 8 CTAs over 64 MiB, stopped after it ran a while.
  const size_t bytes = size_t{64} << 20;
  void *src = nullptr, *dst = nullptr, *copied = nullptr;
  int* flags = nullptr;
  ASSERT_EQ(cudaMalloc(&src, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dst, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&copied, 8), cudaSuccess);
  ASSERT_EQ(cudaMemset(copied, 0, 8), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&flags), 10 * sizeof(int), cudaHostAllocMapped), cudaSuccess);
  for (int i = 0; i < 10; ++i) flags[i] = 0;
  ASSERT_EQ(kernels::LaunchFillRandom(src, bytes / 4, kernels::FillType::kFloat32, 9, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int* dflags = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dflags), flags, 0), cudaSuccess);
  kernels::CommLikeArgs a;
  a.src = src;
  a.dst = dst;
  a.bytes = bytes;
  a.ctas = 8;
  a.smem_bytes = 1024;
  a.bytes_per_s = 0;  // unpaced
  a.stop = dflags;
  a.timed_out = dflags + 1;
  a.started = dflags + 2;
  a.copied_bytes = static_cast<unsigned long long*>(copied);
  a.timeout_ns = 2'000'000'000ull;  // stops itself: nobody sets `stop`
  ASSERT_EQ(kernels::LaunchCommLike(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(flags[1], 1);  // it timed out, as asked
  for (int i = 0; i < 8; ++i) EXPECT_EQ(flags[2 + i], 1) << i;
  std::vector<float> hs(bytes / 4), hd(bytes / 4);
  cudaMemcpy(hs.data(), src, bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(hd.data(), dst, bytes, cudaMemcpyDeviceToHost);
  EXPECT_EQ(hs, hd);
  unsigned long long n = 0;
  cudaMemcpy(&n, copied, 8, cudaMemcpyDeviceToHost);
  EXPECT_GE(n, bytes);
  a.bytes = 1024;  // less than one round per CTA
  EXPECT_EQ(kernels::LaunchCommLike(a, nullptr), cudaErrorInvalidValue);
  cudaFreeHost(flags);
  cudaFree(src);
  cudaFree(dst);
  cudaFree(copied);
}

TEST(CalibrateGpu, CublasLtMatchesACpuReference) {
  const auto gpus = GpusOrSkip();
  if (gpus.empty()) GTEST_SKIP() << "no CUDA device: " << ListCudaGpus().status().message();
  const int m = 64, n = 48, k = 32;
  std::vector<float> A(k * m), B(k * n), C(m * n), R(m * n, 0.0f);
  for (size_t i = 0; i < A.size(); ++i) A[i] = std::sin(0.1f * i);
  for (size_t i = 0; i < B.size(); ++i) B[i] = std::cos(0.07f * i);
  // TN: C[i + j*m] = sum_l A[l + i*k] * B[l + j*k].
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int l = 0; l < k; ++l) R[i + j * m] += A[l + i * k] * B[l + j * k];
  float *dA, *dB, *dC;
  cudaMalloc(&dA, A.size() * 4);
  cudaMalloc(&dB, B.size() * 4);
  cudaMalloc(&dC, C.size() * 4);
  cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice);
  cublasLtHandle_t lt;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t d;
  cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t t = CUBLAS_OP_T;
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, k);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k);
  cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m);
  const float alpha = 1, beta = 0;
  ASSERT_EQ(cublasLtMatmul(lt, d, &alpha, dA, la, dB, lb, &beta, dC, lc, dC, lc, nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < C.size(); ++i) EXPECT_NEAR(C[i], R[i], 1e-4f * (1 + std::fabs(R[i]))) << i;
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(d);
  cublasLtDestroy(lt);
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
}

TEST(CalibrateGpu, NcclResultsVerifiedAcrossLocalGpus) {
  const auto gpus = GpusOrSkip();
  if (gpus.size() < 2) GTEST_SKIP() << "needs 2 GPUs in one node (found " << gpus.size() << ")";
  std::vector<int> ids;
  for (const auto& g : gpus) ids.push_back(g.index);
  auto b = MakeNcclLocalBackend(ids, 1 << 24, 60);
  ASSERT_TRUE(b.ok()) << b.status();
  auto comm = MakeSingleProcessCommunicator();
  SweepOptions o;
  o.max_bytes = 1 << 24;
  o.warmup = 1;
  o.iters = 5;
  o.batches = 2;
  SweepResult r = Sweep(**b, *comm, o);  // every size of every collective checked, then timed
  ASSERT_TRUE(r.status.ok()) << r.status;
  for (const auto& s : r.samples) EXPECT_GT(s.busbw_bytes_per_s(), 0);
}

}  // namespace
}  // namespace stepcast::calibrate
