#include "calibrate/gpu_bench.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "calibrate/fits.h"
#include "kernels/stream.h"
#include "proto/codec.h"

namespace stepcast::calibrate {
namespace {

absl::Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}
absl::Status Lt(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuBLASLt status ", static_cast<int>(s)));
}
#define RETURN_IF_ERROR(expr)            \
  do {                                   \
    absl::Status _s = (expr);            \
    if (!_s.ok()) return _s;             \
  } while (0)

// Device memory that frees itself.
struct DeviceBuffer {
  void* p = nullptr;
  ~DeviceBuffer() { if (p) cudaFree(p); }
  absl::Status Alloc(size_t bytes) { return Cuda(cudaMalloc(&p, std::max<size_t>(bytes, 16)), "cudaMalloc"); }
};

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() { cudaEventCreate(&start); cudaEventCreate(&stop); }
  ~Events() { cudaEventDestroy(start); cudaEventDestroy(stop); }
  double Seconds() {
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return ms * 1e-3;
  }
};

// Element i of a device array of `dtype` (A/B operands or the output), as a double on the host.
double ToDouble(const std::vector<uint8_t>& raw, size_t i, cudaDataType_t t) {
  switch (t) {
    case CUDA_R_16BF: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(raw.data())[i]);
    case CUDA_R_16F: return __half2float(reinterpret_cast<const __half*>(raw.data())[i]);
    case CUDA_R_8F_E4M3: return static_cast<float>(reinterpret_cast<const __nv_fp8_e4m3*>(raw.data())[i]);
    default: return reinterpret_cast<const float*>(raw.data())[i];
  }
}

// Checks 16 sampled outputs of the TN GEMM C[i + j m] = sum_l A[l + i k] B[l + j k] against a
// double-precision sum over the device's own (already rounded) inputs. Tolerance: 1% of the
// value (bf16 output rounding is 0.4%) plus a share of sum_l |a b| for the products' rounding
// inside the GEMM (TF32 rounds fp32 inputs to 10 mantissa bits: 2e-3; Hopper fp8 tensor-core
// accumulation: 2e-3; otherwise 2e-4), plus 1e-3. Tight enough that an all-zero or stale
// output fails: with random signs |C| ~ sqrt(k)/3 while sum |a b| ~ k/4.
absl::Status VerifyGemm(const void* A, const void* B, const void* C, cudaDataType_t ab, cudaDataType_t cd,
                        bool tf32, size_t ab_bytes, size_t cd_bytes, int64_t m, int64_t n, int64_t k) {
  const double product_share = (tf32 || ab == CUDA_R_8F_E4M3) ? 2e-3 : 2e-4;
  std::vector<uint8_t> a(k * ab_bytes), b(k * ab_bytes), c(cd_bytes);
  for (int s = 0; s < 16; ++s) {
    const int64_t i = (s * 7919) % m, j = (s * 104729 + 3) % n;
    RETURN_IF_ERROR(Cuda(cudaMemcpy(a.data(), static_cast<const uint8_t*>(A) + i * k * ab_bytes, k * ab_bytes,
                                    cudaMemcpyDeviceToHost), "verify A"));
    RETURN_IF_ERROR(Cuda(cudaMemcpy(b.data(), static_cast<const uint8_t*>(B) + j * k * ab_bytes, k * ab_bytes,
                                    cudaMemcpyDeviceToHost), "verify B"));
    RETURN_IF_ERROR(Cuda(cudaMemcpy(c.data(), static_cast<const uint8_t*>(C) + (i + j * m) * cd_bytes, cd_bytes,
                                    cudaMemcpyDeviceToHost), "verify C"));
    double want = 0, scale = 0;
    for (int64_t l = 0; l < k; ++l) {
      const double p = ToDouble(a, l, ab) * ToDouble(b, l, ab);
      want += p;
      scale += std::fabs(p);
    }
    const double got = ToDouble(c, 0, cd);
    if (!(std::fabs(got - want) <= 0.01 * std::fabs(want) + product_share * scale + 1e-3)) {
      return absl::DataLossError(absl::StrFormat("GEMM result C[%d, %d] = %g, reference %g", i, j, got, want));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<GpuInfo>> ListGpus() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    return absl::FailedPreconditionError(absl::StrCat("no usable CUDA device (cudaGetDeviceCount: ",
                                                      e == cudaSuccess ? "0 devices" : cudaGetErrorString(e),
                                                      "); run stepcast-calibrate on a GPU node"));
  }
  std::vector<GpuInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    GpuInfo g;
    g.index = i;
    g.name = p.name;
    g.sm_count = p.multiProcessorCount;
    g.cc_major = p.major;
    g.cc_minor = p.minor;
    g.l2_bytes = p.l2CacheSize;
    g.memory_bytes = p.totalGlobalMem;
    out.push_back(g);
  }
  return out;
}

std::vector<GemmShape> TransformerShapes(bool quick) {
  std::vector<GemmShape> out;
  const std::vector<int64_t> hidden = quick ? std::vector<int64_t>{8192} : std::vector<int64_t>{4096, 8192, 16384};
  const std::vector<int64_t> tokens = quick ? std::vector<int64_t>{8192} : std::vector<int64_t>{4096, 8192, 16384};
  const std::vector<int64_t> tps = quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 2, 4, 8};
  for (int64_t h : hidden) {
    const int64_t ffn = h * 7 / 2;  // Llama-style SwiGLU (14336 for 4096)
    for (int64_t t : tokens) {
      for (int64_t tp : tps) {
        const std::string tag = absl::StrFormat("h=%d tokens=%d tp=%d", h, t, tp);
        out.push_back({t, (h + 2 * h / 8) / tp, h, "QKV (GQA 8 groups) " + tag});
        out.push_back({t, h, h / tp, "attention output " + tag});
        out.push_back({t, 2 * ffn / tp, h, "MLP up (gate+up) " + tag});
        out.push_back({t, h, ffn / tp, "MLP down " + tag});
      }
    }
  }
  for (int64_t s : quick ? std::vector<int64_t>{4096, 8192} : std::vector<int64_t>{1024, 2048, 4096, 8192, 16384}) {
    out.push_back({s, s, s, absl::StrCat("square ", s)});
  }
  return out;
}

absl::StatusOr<v1::GemmSample> BenchGemm(const GpuInfo& gpu, DType dtype, const GemmShape& sh, const BenchOptions& o,
                                         CuptiTimer* cupti) {
  RETURN_IF_ERROR(Cuda(cudaSetDevice(gpu.index), "cudaSetDevice"));
  cudaDataType_t ab, cd;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  kernels::FillType fill;
  size_t ab_bytes, cd_bytes;
  switch (dtype) {
    case DType::kBF16: ab = cd = CUDA_R_16BF; fill = kernels::FillType::kBFloat16; ab_bytes = cd_bytes = 2; break;
    case DType::kFP16: ab = cd = CUDA_R_16F; fill = kernels::FillType::kFloat16; ab_bytes = cd_bytes = 2; break;
    case DType::kFP8:
      if (gpu.cc_major < 9) return absl::FailedPreconditionError("fp8 GEMMs need compute capability 8.9+/9.0+");
      ab = CUDA_R_8F_E4M3; cd = CUDA_R_16BF; fill = kernels::FillType::kFp8E4M3; ab_bytes = 1; cd_bytes = 2;
      break;
    case DType::kTF32:
      ab = cd = CUDA_R_32F; compute = CUBLAS_COMPUTE_32F_FAST_TF32; fill = kernels::FillType::kFloat32;
      ab_bytes = cd_bytes = 4;
      break;
    default: ab = cd = CUDA_R_32F; fill = kernels::FillType::kFloat32; ab_bytes = cd_bytes = 4; break;
  }
  const int64_t m = sh.m, n = sh.n, k = sh.k;
  DeviceBuffer A, B, C, work, flush;
  const size_t workspace = gpu.cc_major >= 9 ? (32u << 20) : (4u << 20);
  const size_t flush_bytes = std::max<size_t>(2 * gpu.l2_bytes, 64u << 20);
  RETURN_IF_ERROR(A.Alloc(m * k * ab_bytes));
  RETURN_IF_ERROR(B.Alloc(k * n * ab_bytes));
  RETURN_IF_ERROR(C.Alloc(m * n * cd_bytes));
  RETURN_IF_ERROR(work.Alloc(workspace));
  RETURN_IF_ERROR(flush.Alloc(flush_bytes));
  // Random inputs, filled before the flush (DeepGEMM's note: flush after creating inputs).
  RETURN_IF_ERROR(Cuda(kernels::LaunchFillRandom(A.p, m * k, fill, 1, nullptr), "fill A"));
  RETURN_IF_ERROR(Cuda(kernels::LaunchFillRandom(B.p, k * n, fill, 2, nullptr), "fill B"));

  cublasLtHandle_t lt = nullptr;
  RETURN_IF_ERROR(Lt(cublasLtCreate(&lt), "cublasLtCreate"));
  std::unique_ptr<cublasLtContext, void (*)(cublasLtHandle_t)> lt_guard(lt, [](cublasLtHandle_t h) { cublasLtDestroy(h); });
  cublasLtMatmulDesc_t desc = nullptr;
  RETURN_IF_ERROR(Lt(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F), "MatmulDescCreate"));
  const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof(opT));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof(opN));
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatrixLayoutCreate(&la, ab, k, m, k);  // A^T stored k x m (TN)
  cublasLtMatrixLayoutCreate(&lb, ab, k, n, k);
  cublasLtMatrixLayoutCreate(&lc, cd, m, n, m);
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  cublasLtMatmulHeuristicResult_t heur[4] = {};
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 4, heur, &found);
  auto cleanup = [&] {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
  };
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
    cleanup();
    return absl::UnavailableError(absl::StrFormat("no cuBLASLt algorithm for %s %dx%dx%d", DTypeName(dtype), m, n, k));
  }
  const float alpha = 1.0f, beta = 0.0f;
  Events ev;
  auto run = [&](int a) {
    return cublasLtMatmul(lt, desc, &alpha, A.p, la, B.p, lb, &beta, C.p, lc, C.p, lc, &heur[a].algo, work.p,
                          workspace, nullptr);
  };
  // Pick the fastest of the heuristic's candidates: one untimed run each, then one timed run for
  // the first and 3 for the others while the best run is under 5 ms.
  int best_algo = 0;
  double best_time = 1e30;
  for (int a = 0; a < found; ++a) {
    if (run(a) != CUBLAS_STATUS_SUCCESS) continue;
    const int reps = best_time < 5e-3 ? 3 : 1;
    cudaEventRecord(ev.start);
    for (int i = 0; i < reps; ++i) run(a);
    cudaEventRecord(ev.stop);
    cudaEventSynchronize(ev.stop);
    if (ev.Seconds() / reps < best_time) {
      best_time = ev.Seconds() / reps;
      best_algo = a;
    }
  }
  const int warmup = WarmupIterations(o, best_time), iters = TimedIterations(o, best_time);
  for (int i = 0; i < warmup; ++i) run(best_algo);
  std::vector<double> times;
  if (cupti) cupti->Begin();
  for (int i = 0; i < iters; ++i) {
    kernels::LaunchFlush(flush.p, flush_bytes, nullptr);
    cudaEventRecord(ev.start);
    const cublasStatus_t s = run(best_algo);
    cudaEventRecord(ev.stop);
    cudaEventSynchronize(ev.stop);
    if (s != CUBLAS_STATUS_SUCCESS) {
      cleanup();
      return Lt(s, "cublasLtMatmul");
    }
    times.push_back(ev.Seconds());
  }
  std::vector<double> cupti_times = cupti ? cupti->End("") : std::vector<double>{};
  cleanup();
  RETURN_IF_ERROR(Cuda(cudaGetLastError(), "GEMM benchmark"));
  // A timed GEMM must also be right (as nccl-tests checks its collectives).
  RETURN_IF_ERROR(VerifyGemm(A.p, B.p, C.p, ab, cd, compute == CUBLAS_COMPUTE_32F_FAST_TF32, ab_bytes, cd_bytes, m, n, k));
  v1::GemmSample out;
  out.set_gpu(gpu.index);
  out.set_dtype(DTypeToProto(dtype));
  out.set_m(m);
  out.set_n(n);
  out.set_k(k);
  *out.mutable_time() = Summarize(times);
  const double flops = 2.0 * m * n * k;
  out.set_median_flops_per_s(flops / out.time().median_s());
  out.set_best_flops_per_s(flops / out.time().best_s());
  out.set_algorithm_index(best_algo);
  if (!cupti_times.empty()) {
    // A GEMM may run as several kernels (split-K): sum kernels per run.
    const size_t per_run = std::max<size_t>(1, cupti_times.size() / iters);
    std::vector<double> per;
    for (size_t i = 0; i + per_run <= cupti_times.size(); i += per_run) {
      double s = 0;
      for (size_t j = 0; j < per_run; ++j) s += cupti_times[i + j];
      per.push_back(s);
    }
    out.set_cupti_median_s(Summarize(per).median_s());
    out.set_cupti_event_disagreement(Disagreement(out.cupti_median_s(), out.time().median_s()));
  }
  return out;
}

absl::StatusOr<std::vector<v1::HbmSample>> BenchHbm(const GpuInfo& gpu, const BenchOptions& o, CuptiTimer* cupti) {
  RETURN_IF_ERROR(Cuda(cudaSetDevice(gpu.index), "cudaSetDevice"));
  const size_t array = std::max<size_t>(8 * gpu.l2_bytes, 256u << 20) / 16 * 16;
  DeviceBuffer a, b, c;
  RETURN_IF_ERROR(a.Alloc(array));
  RETURN_IF_ERROR(b.Alloc(array));
  RETURN_IF_ERROR(c.Alloc(array));
  RETURN_IF_ERROR(Cuda(kernels::LaunchFillRandom(a.p, array / 4, kernels::FillType::kFloat32, 3, nullptr), "fill"));
  RETURN_IF_ERROR(Cuda(kernels::LaunchFillRandom(b.p, array / 4, kernels::FillType::kFloat32, 4, nullptr), "fill"));
  RETURN_IF_ERROR(Cuda(kernels::LaunchFillRandom(c.p, array / 4, kernels::FillType::kFloat32, 5, nullptr), "fill"));
  std::vector<v1::HbmSample> out;
  Events ev;
  auto measure = [&](const char* name, double bytes, auto launch) -> absl::Status {
    for (int i = 0; i < o.warmup; ++i) launch();
    std::vector<double> t;
    if (cupti) cupti->Begin();
    for (int i = 0; i < o.iters; ++i) {
      cudaEventRecord(ev.start);
      launch();
      cudaEventRecord(ev.stop);
      cudaEventSynchronize(ev.stop);
      t.push_back(ev.Seconds());
    }
    std::vector<double> kt = cupti ? cupti->End("") : std::vector<double>{};
    RETURN_IF_ERROR(Cuda(cudaGetLastError(), name));
    v1::HbmSample s;
    s.set_gpu(gpu.index);
    s.set_kernel(name);
    s.set_bytes(bytes);
    *s.mutable_time() = Summarize(t);
    s.set_median_bytes_per_s(bytes / s.time().median_s());
    s.set_best_bytes_per_s(bytes / s.time().best_s());
    if (!kt.empty()) {
      s.set_cupti_median_s(Summarize(kt).median_s());
      s.set_cupti_event_disagreement(Disagreement(s.cupti_median_s(), s.time().median_s()));
    }
    out.push_back(std::move(s));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(measure("copy", 2.0 * array, [&] { kernels::LaunchCopy(a.p, c.p, array, nullptr); }));
  RETURN_IF_ERROR(measure("triad", 3.0 * array, [&] { kernels::LaunchTriad(a.p, b.p, c.p, 0.4f, array, nullptr); }));
  // Pinned host <-> device (offload), 256 MiB.
  const size_t host_bytes = 256u << 20;
  void* host = nullptr;
  RETURN_IF_ERROR(Cuda(cudaMallocHost(&host, host_bytes), "cudaMallocHost"));
  absl::Status s1 = measure("h2d_pinned", host_bytes, [&] { cudaMemcpyAsync(a.p, host, host_bytes, cudaMemcpyHostToDevice); });
  absl::Status s2 = measure("d2h_pinned", host_bytes, [&] { cudaMemcpyAsync(host, a.p, host_bytes, cudaMemcpyDeviceToHost); });
  cudaFreeHost(host);
  RETURN_IF_ERROR(s1);
  RETURN_IF_ERROR(s2);
  return out;
}

}  // namespace stepcast::calibrate
