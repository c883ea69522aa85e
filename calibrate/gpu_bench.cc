#include "calibrate/gpu_bench.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "calibrate/fits.h"
#include "kernels/comm_like.h"
#include "kernels/stream.h"
#include "proto/codec.h"

namespace stepcast::calibrate {
namespace {

absl::Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": ", cudaGetErrorString(e),
        " (this build's CUDA architectures do not include this GPU's: rebuild with -DCMAKE_CUDA_ARCHITECTURES)"));
  }
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}
absl::Status Lt(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuBLASLt status ", static_cast<int>(s)));
}
#define RETURN_IF_ERROR(expr)   \
  do {                          \
    absl::Status _s = (expr);   \
    if (!_s.ok()) return _s;    \
  } while (0)

// Device memory that frees itself.
struct DeviceBuffer {
  void* p = nullptr;
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
  absl::Status Alloc(size_t bytes) { return Cuda(cudaMalloc(&p, std::max<size_t>(bytes, 16)), "cudaMalloc"); }
};

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() {
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  double Seconds() {
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return ms * 1e-3;
  }
};

// A start and a stop event per timed run, all enqueued before the one synchronisation at the end
// (Triton's do_bench and scripts/torch_reference.py do the same). While run i executes, the host
// enqueues run i+1, so the next start event fires as soon as the work before it ends and the host's
// launch latency stays out of every window. Synchronising after each run instead let the start
// event fire on an idle GPU before the kernel was launched: on an H100 (2026-11-25, docs/
// CALIBRATION.md) that added about 14 us to each 292 us HBM copy.
class QueuedEvents {
 public:
  explicit QueuedEvents(int runs) : events_(static_cast<size_t>(std::max(runs, 0))) {}
  void Start(int i) { cudaEventRecord(events_[i].start); }
  void Stop(int i) { cudaEventRecord(events_[i].stop); }
  // Waits for the last run and returns each run's seconds, in order.
  std::vector<double> Seconds() {
    std::vector<double> t;
    if (events_.empty()) return t;
    cudaEventSynchronize(events_.back().stop);
    for (Events& e : events_) t.push_back(e.Seconds());
    return t;
  }

 private:
  std::vector<Events> events_;
};

// Element i of a host copy of device data of type t, as a double.
double ToDouble(const std::vector<uint8_t>& raw, size_t i, cudaDataType_t t) {
  switch (t) {
    case CUDA_R_16BF: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(raw.data())[i]);
    case CUDA_R_16F: return __half2float(reinterpret_cast<const __half*>(raw.data())[i]);
    case CUDA_R_8F_E4M3: return static_cast<float>(reinterpret_cast<const __nv_fp8_e4m3*>(raw.data())[i]);
    default: return reinterpret_cast<const float*>(raw.data())[i];
  }
}

// Copies k elements of `elem` bytes starting at `base`, `pitch_elems` apart, to the host.
absl::Status CopyStrided(std::vector<uint8_t>& dst, const void* base, size_t k, size_t elem, size_t pitch_elems) {
  dst.resize(k * elem);
  if (pitch_elems == 1) return Cuda(cudaMemcpy(dst.data(), base, k * elem, cudaMemcpyDeviceToHost), "verify copy");
  return Cuda(cudaMemcpy2D(dst.data(), elem, base, pitch_elems * elem, elem, k, cudaMemcpyDeviceToHost), "verify copy");
}

// Checks 16 sampled outputs C[i + j m] = sum_l op(A)(i, l) op(B)(l, j) against a double-precision
// sum over the device's own (already rounded) inputs, for the layout's op(A), op(B) (column-major:
// A stored k x m for T, m x k for N; B stored k x n for N, n x k for T). Tolerance: 1% of the value
// (bf16 output rounding is 0.4%) plus a share of sum_l |a b| for the products' rounding inside the
// GEMM (TF32 rounds fp32 inputs to 10 mantissa bits: 2e-3; Hopper fp8 accumulation 2e-3, with fast
// accumulation 4e-3: DeepSeek-V3 (arXiv:2412.19437) measured FP8 GEMMs on H800 accumulating in about
// 14 bits; otherwise 2e-4), plus 1e-3. An all-zero or stale output still fails: with random signs
// |C| ~ sqrt(k)/3 while sum |a b| ~ k/4, and 16 samples must all pass.
absl::Status VerifyGemm(const void* A, const void* B, const void* C, cudaDataType_t ab, cudaDataType_t cd,
                        double product_share, size_t ab_bytes, size_t cd_bytes, int64_t m, int64_t n, int64_t k,
                        GemmLayout layout) {
  const bool a_t = layout == GemmLayout::kTN, b_t = layout == GemmLayout::kNT;
  std::vector<uint8_t> a, b, c;
  for (int s = 0; s < 16; ++s) {
    const int64_t i = (s * 7919) % m, j = (s * 104729 + 3) % n;
    const auto* Ab = static_cast<const uint8_t*>(A);
    const auto* Bb = static_cast<const uint8_t*>(B);
    RETURN_IF_ERROR(a_t ? CopyStrided(a, Ab + i * k * ab_bytes, k, ab_bytes, 1)
                        : CopyStrided(a, Ab + i * ab_bytes, k, ab_bytes, m));
    RETURN_IF_ERROR(b_t ? CopyStrided(b, Bb + j * ab_bytes, k, ab_bytes, n)
                        : CopyStrided(b, Bb + j * k * ab_bytes, k, ab_bytes, 1));
    RETURN_IF_ERROR(CopyStrided(c, static_cast<const uint8_t*>(C) + (i + j * m) * cd_bytes, 1, cd_bytes, 1));
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

std::string Uuid(const cudaUUID_t& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  return absl::StrFormat("GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                         b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

}  // namespace

absl::StatusOr<std::vector<GpuInfo>> ListCudaGpus() {
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
    g.uuid = Uuid(p.uuid);
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), i) == cudaSuccess) g.pci_bus_id = bus;
    out.push_back(g);
  }
  return out;
}

namespace {

// BenchGemm in steps, in the order it runs them (the CUDA and cuBLASLt calls in the same order as
// when it was one function): the dtype's CUDA types, the buffers, the cuBLASLt matmul and its
// heuristic's candidates, the fastest candidate, the timed runs, the sample.

// The CUDA types of a dtype's GEMM and VerifyGemm's tolerance for its products' rounding.
struct GemmTypes {
  cudaDataType_t ab, cd;  // A and B; C and D
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  kernels::FillType fill;
  size_t ab_bytes, cd_bytes;
  double product_share = 2e-4;
};

// Step 1: the types of `dtype` (fp8: e4m3 inputs, bf16 output; tf32: fp32 data, the FAST_TF32
// compute type). FailedPrecondition for fp8 below compute capability 8.9.
absl::StatusOr<GemmTypes> GemmTypesFor(const GpuInfo& gpu, DType dtype, const GemmRun& how) {
  GemmTypes ty;
  switch (dtype) {
    case DType::kBF16: ty.ab = ty.cd = CUDA_R_16BF; ty.fill = kernels::FillType::kBFloat16; ty.ab_bytes = ty.cd_bytes = 2; break;
    case DType::kFP16: ty.ab = ty.cd = CUDA_R_16F; ty.fill = kernels::FillType::kFloat16; ty.ab_bytes = ty.cd_bytes = 2; break;
    case DType::kFP8:
      // cuBLASLt FP8 runs on compute capability 8.9 (Ada) and 9.0+ (cuBLASLt documentation).
      if (!(gpu.cc_major > 8 || (gpu.cc_major == 8 && gpu.cc_minor >= 9))) {
        return absl::FailedPreconditionError("fp8 GEMMs need compute capability 8.9+");
      }
      ty.ab = CUDA_R_8F_E4M3;
      ty.cd = CUDA_R_16BF;
      ty.fill = kernels::FillType::kFp8E4M3;
      ty.ab_bytes = 1;
      ty.cd_bytes = 2;
      ty.product_share = how.fast_accum ? 4e-3 : 2e-3;
      break;
    case DType::kTF32:
      ty.ab = ty.cd = CUDA_R_32F;
      ty.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
      ty.fill = kernels::FillType::kFloat32;
      ty.ab_bytes = ty.cd_bytes = 4;
      ty.product_share = 2e-3;
      break;
    default: ty.ab = ty.cd = CUDA_R_32F; ty.fill = kernels::FillType::kFloat32; ty.ab_bytes = ty.cd_bytes = 4; break;
  }
  return ty;
}

// The GEMM's device memory: A, B, C, the cuBLASLt workspace and the L2 flush buffer (freed in
// the reverse order, as locals declared in this order were; no flush buffer for a pass that does
// not flush, flush_bytes 0).
struct GemmBuffers {
  DeviceBuffer A, B, C, work, flush;
  size_t workspace = 0, flush_bytes = 0;
};

// Step 2: the buffers (workspace 32 MiB on Hopper and later, 4 MiB before, as cuBLAS's
// documentation recommends; flush: twice the L2, at least 64 MiB), then A and B filled with random
// values before the flush (DeepGEMM's note: flush after creating inputs). `with_l2_flush` false:
// no flush buffer (the host-call pass times calls; the contention sweep runs its GEMM back to back,
// solo and beside the competitor, without flushing).
absl::Status AllocGemmBuffers(const GpuInfo& gpu, const GemmTypes& ty, int64_t m, int64_t n, int64_t k,
                              bool with_l2_flush, GemmBuffers* b) {
  b->workspace = gpu.cc_major >= 9 ? (32u << 20) : (4u << 20);
  b->flush_bytes = with_l2_flush ? std::max<size_t>(2 * gpu.l2_bytes, 64u << 20) : 0;
  RETURN_IF_ERROR(b->A.Alloc(m * k * ty.ab_bytes));
  RETURN_IF_ERROR(b->B.Alloc(k * n * ty.ab_bytes));
  RETURN_IF_ERROR(b->C.Alloc(m * n * ty.cd_bytes));
  RETURN_IF_ERROR(b->work.Alloc(b->workspace));
  if (with_l2_flush) RETURN_IF_ERROR(b->flush.Alloc(b->flush_bytes));
  // Random inputs, filled before the flush (DeepGEMM's note: flush after creating inputs).
  RETURN_IF_ERROR(Cuda(kernels::LaunchFillRandom(b->A.p, m * k, ty.fill, 1, nullptr), "fill A"));
  RETURN_IF_ERROR(Cuda(kernels::LaunchFillRandom(b->B.p, k * n, ty.fill, 2, nullptr), "fill B"));
  return absl::OkStatus();
}

void DestroyLtHandle(cublasLtHandle_t h) { cublasLtDestroy(h); }

// A cuBLASLt matmul (cuBLASLt documentation: handle, operation descriptor, matrix layouts,
// preference, heuristic): the handle is destroyed with this object, the rest by Cleanup().
struct LtGemm {
  std::unique_ptr<cublasLtContext, void (*)(cublasLtHandle_t)> lt_guard{nullptr, DestroyLtHandle};
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t heur[4] = {};
  int found = 0;
  void Cleanup() const {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
  }
};

// Step 3: the matmul of the layout's op(A), op(B) (column-major: A stored k x m for T, m x k for N;
// B stored k x n for N, n x k for T), fp8's fast accumulation when the run asks for it, and up to
// 4 candidates of cuBLASLt's heuristic within the workspace. Unavailable (after Cleanup) when the
// heuristic has none. `sm_count_target` > 0: cuBLASLt sizes the kernel for that many SMs
// (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, Transformer Engine's sm_margin; the contention sweep).
absl::Status CreateLtGemm(const GemmTypes& ty, const GemmRun& how, DType dtype, int64_t m, int64_t n, int64_t k,
                          const size_t& workspace, LtGemm* g, int32_t sm_count_target = 0) {
  RETURN_IF_ERROR(Lt(cublasLtCreate(&g->lt), "cublasLtCreate"));
  g->lt_guard.reset(g->lt);
  RETURN_IF_ERROR(Lt(cublasLtMatmulDescCreate(&g->desc, ty.compute, CUDA_R_32F), "MatmulDescCreate"));
  const bool a_t = how.layout == GemmLayout::kTN, b_t = how.layout == GemmLayout::kNT;
  const cublasOperation_t opA = a_t ? CUBLAS_OP_T : CUBLAS_OP_N, opB = b_t ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA));
  cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB));
  if (how.fast_accum) {
    const int8_t on = 1;
    cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof(on));
  }
  if (sm_count_target > 0) {
    cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_count_target,
                                   sizeof(sm_count_target));
  }
  if (a_t) cublasLtMatrixLayoutCreate(&g->la, ty.ab, k, m, k); else cublasLtMatrixLayoutCreate(&g->la, ty.ab, m, k, m);
  if (b_t) cublasLtMatrixLayoutCreate(&g->lb, ty.ab, n, k, n); else cublasLtMatrixLayoutCreate(&g->lb, ty.ab, k, n, k);
  cublasLtMatrixLayoutCreate(&g->lc, ty.cd, m, n, m);
  cublasLtMatmulPreferenceCreate(&g->pref);
  cublasLtMatmulPreferenceSetAttribute(g->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  const cublasStatus_t hs =
      cublasLtMatmulAlgoGetHeuristic(g->lt, g->desc, g->la, g->lb, g->lc, g->lc, g->pref, 4, g->heur, &g->found);
  if (hs != CUBLAS_STATUS_SUCCESS || g->found == 0) {
    g->Cleanup();
    return absl::UnavailableError(absl::StrFormat("no cuBLASLt algorithm for %s %s %dx%dx%d", DTypeName(dtype),
                                                  GemmLayoutName(how.layout), m, n, k));
  }
  return absl::OkStatus();
}

// Step 4: the fastest of the heuristic's candidates: one untimed run each, then one timed run (3
// while the best is under 5 ms), between two events. Returns (candidate, seconds per run).
template <typename Run>
std::pair<int, double> FastestAlgorithm(const Run& run, int found, Events& ev) {
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
  return {best_algo, best_time};
}

// What the timed runs give: each run's seconds by its events, and CUPTI's kernel records.
struct GemmTimes {
  std::vector<double> times, cupti_times;
};

// Step 5: `iters` timed runs of the chosen candidate, each after an L2 flush, their events queued
// (QueuedEvents), inside a CUPTI window when `cupti` is given. On an error, the matmul's Cleanup()
// and the CUPTI window's end are done here.
template <typename Run>
absl::StatusOr<GemmTimes> TimeGemm(const Run& run, int best_algo, int iters, const GemmBuffers& buf, const LtGemm& g,
                                   CuptiTimer* cupti, QueuedEvents* timed) {
  if (cupti) cupti->Begin();
  for (int i = 0; i < iters; ++i) {
    if (absl::Status s = Cuda(kernels::LaunchFlush(buf.flush.p, buf.flush_bytes, nullptr), "L2 flush"); !s.ok()) {
      g.Cleanup();
      if (cupti) cupti->End("");
      return s;
    }
    timed->Start(i);
    const cublasStatus_t s = run(best_algo);
    timed->Stop(i);
    if (s != CUBLAS_STATUS_SUCCESS) {
      cudaDeviceSynchronize();
      g.Cleanup();
      if (cupti) cupti->End("");
      return Lt(s, "cublasLtMatmul");
    }
  }
  GemmTimes out;
  out.times = timed->Seconds();
  // The flush is a cudaMemsetAsync (a MEMSET record, not a kernel), so every kernel record of the
  // window belongs to the GEMM.
  out.cupti_times = cupti ? cupti->End("") : std::vector<double>{};
  return out;
}

// Step 6: the sample: the shape, the layout, the time summary (calibrate/fits.h Summarize), the
// rates at 2mnk FLOPs per run, the chosen candidate, and CUPTI's median (a GEMM may run as several
// kernels, split-K: the kernels of each run summed). Unavailable when CUPTI was asked for and
// recorded nothing.
absl::StatusOr<v1::GemmSample> GemmSampleFrom(const GpuInfo& gpu, DType dtype, const GemmShape& sh, const GemmRun& how,
                                              const GemmTimes& t, int iters, int best_algo, CuptiTimer* cupti) {
  const int64_t m = sh.m, n = sh.n, k = sh.k;
  v1::GemmSample out;
  out.set_gpu(gpu.index);
  out.set_dtype(DTypeToProto(dtype));
  out.set_m(m);
  out.set_n(n);
  out.set_k(k);
  out.set_layout(GemmLayoutName(how.layout));
  out.set_what(sh.what);
  out.set_fast_accum(how.fast_accum);
  *out.mutable_time() = Summarize(t.times);
  const double flops = 2.0 * m * n * k;
  out.set_median_flops_per_s(flops / out.time().median_s());
  out.set_best_flops_per_s(flops / out.time().best_s());
  out.set_algorithm_index(best_algo);
  const std::vector<double>& cupti_times = t.cupti_times;
  if (!cupti_times.empty()) {
    // A GEMM may run as several kernels (split-K): sum the kernels of each run.
    const size_t per_run = std::max<size_t>(1, cupti_times.size() / iters);
    std::vector<double> per;
    for (size_t i = 0; i + per_run <= cupti_times.size(); i += per_run) {
      double s = 0;
      for (size_t j = 0; j < per_run; ++j) s += cupti_times[i + j];
      per.push_back(s);
    }
    out.set_cupti_median_s(Summarize(per).median_s());
  } else if (cupti) {
    return absl::UnavailableError(cupti->enabled() ? "CUPTI recorded no kernel" : cupti->why_disabled());
  }
  return out;
}

}  // namespace

absl::StatusOr<v1::GemmSample> BenchGemm(const GpuInfo& gpu, DType dtype, const GemmShape& sh, const BenchOptions& o,
                                         CuptiTimer* cupti) {
  RETURN_IF_ERROR(Cuda(cudaSetDevice(gpu.index), "cudaSetDevice"));
  const GemmRun how = RunFor(dtype, sh);
  absl::StatusOr<GemmTypes> ty = GemmTypesFor(gpu, dtype, how);
  if (!ty.ok()) return ty.status();
  const int64_t m = sh.m, n = sh.n, k = sh.k;
  // Declared in this order, destroyed in the reverse: the timed events, the candidates' events, the
  // cuBLASLt handle, then the buffers.
  GemmBuffers buf;
  RETURN_IF_ERROR(AllocGemmBuffers(gpu, *ty, m, n, k, /*with_l2_flush=*/true, &buf));
  LtGemm g;
  RETURN_IF_ERROR(CreateLtGemm(*ty, how, dtype, m, n, k, buf.workspace, &g));
  const float alpha = 1.0f, beta = 0.0f;
  Events ev;
  auto run = [&](int a) {
    return cublasLtMatmul(g.lt, g.desc, &alpha, buf.A.p, g.la, buf.B.p, g.lb, &beta, buf.C.p, g.lc, buf.C.p, g.lc,
                          &g.heur[a].algo, buf.work.p, buf.workspace, nullptr);
  };
  const auto [best_algo, best_time] = FastestAlgorithm(run, g.found, ev);
  const int warmup = WarmupIterations(o, best_time), iters = TimedIterations(o, best_time);
  for (int i = 0; i < warmup; ++i) run(best_algo);
  QueuedEvents timed(iters);
  absl::StatusOr<GemmTimes> t = TimeGemm(run, best_algo, iters, buf, g, cupti, &timed);
  if (!t.ok()) return t.status();
  g.Cleanup();
  RETURN_IF_ERROR(Cuda(cudaGetLastError(), "GEMM benchmark"));
  RETURN_IF_ERROR(VerifyGemm(buf.A.p, buf.B.p, buf.C.p, ty->ab, ty->cd, ty->product_share, ty->ab_bytes, ty->cd_bytes,
                             m, n, k, how.layout));
  return GemmSampleFrom(gpu, dtype, sh, how, *t, iters, best_algo, cupti);
}

namespace {

// The contention sweep in steps: the streams and the competitor's buffers and flags, one GEMM's
// queued runs on a stream, the competitor launched and resident, one sample.

// Two non-blocking streams (neither waits on the legacy default stream nor on the other), the
// competitor's 256 MiB source and destination, its mapped-host flags and its device counter.
struct ContentionRig {
  cudaStream_t gemm = nullptr, comm = nullptr;
  DeviceBuffer src, dst, copied;
  int* flags = nullptr;  // mapped host memory: [0] stop, [1] timed_out, [2..] started per CTA
  int max_ctas = 0;
  size_t bytes = size_t{256} << 20;
  ~ContentionRig() {
    if (gemm) cudaStreamDestroy(gemm);
    if (comm) cudaStreamDestroy(comm);
    if (flags) cudaFreeHost(flags);
  }
  absl::Status Init(int ctas) {
    max_ctas = ctas;
    RETURN_IF_ERROR(Cuda(cudaStreamCreateWithFlags(&gemm, cudaStreamNonBlocking), "cudaStreamCreate"));
    RETURN_IF_ERROR(Cuda(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking), "cudaStreamCreate"));
    RETURN_IF_ERROR(src.Alloc(bytes));
    RETURN_IF_ERROR(dst.Alloc(bytes));
    RETURN_IF_ERROR(copied.Alloc(sizeof(unsigned long long)));
    RETURN_IF_ERROR(Cuda(cudaHostAlloc(reinterpret_cast<void**>(&flags), (2 + ctas) * sizeof(int), cudaHostAllocMapped),
                         "cudaHostAlloc"));
    return Cuda(kernels::LaunchFillRandom(src.p, bytes / 4, kernels::FillType::kFloat32, 6, nullptr), "fill");
  }
  int* Device(int* host) const {
    int* d = nullptr;
    cudaHostGetDevicePointer(reinterpret_cast<void**>(&d), host, 0);
    return d;
  }
};

// `iters` runs of `run` queued on `stream`, each between its own events, synchronised once.
template <typename Run>
absl::StatusOr<std::vector<double>> QueuedRuns(const Run& run, int iters, cudaStream_t stream) {
  std::vector<Events> ev(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(ev[i].start, stream);
    const cublasStatus_t st = run(stream);
    cudaEventRecord(ev[i].stop, stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
      cudaStreamSynchronize(stream);
      return Lt(st, "cublasLtMatmul");
    }
  }
  RETURN_IF_ERROR(Cuda(cudaEventSynchronize(ev.back().stop), "GEMM runs"));
  std::vector<double> t;
  for (Events& e : ev) t.push_back(e.Seconds());
  return t;
}

// The competitor of `ctas` CTAs launched on the rig's comm stream; returns once every CTA holds
// its SM (FailedPrecondition after a second: the GPU is busy with other work, or the CTAs do not
// fit). It stops itself after 60 s whatever happens (kernels/comm_like.h).
absl::Status StartCompetitor(ContentionRig& rig, const GpuInfo& gpu, const ContentionPlan& plan, int ctas, int cluster,
                             Events& span) {
  for (int i = 0; i < 2 + rig.max_ctas; ++i) rig.flags[i] = 0;
  RETURN_IF_ERROR(Cuda(cudaMemsetAsync(rig.copied.p, 0, sizeof(unsigned long long), rig.comm), "memset"));
  kernels::CommLikeArgs a;
  a.src = rig.src.p;
  a.dst = rig.dst.p;
  a.bytes = rig.bytes;
  a.ctas = ctas;
  a.threads = plan.threads_per_cta;
  int smem_per_sm = 0;
  cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, gpu.index);
  a.smem_bytes = smem_per_sm / 2 + 1024;  // more than half an SM's: one CTA per SM
  a.bytes_per_s = plan.target_bytes_per_s;
  a.stop = rig.Device(&rig.flags[0]);
  a.timed_out = rig.Device(&rig.flags[1]);
  a.started = rig.Device(&rig.flags[2]);
  a.copied_bytes = static_cast<unsigned long long*>(rig.copied.p);
  a.timeout_ns = 60'000'000'000ull;
  a.cluster_size = cluster;
  cudaEventRecord(span.start, rig.comm);
  RETURN_IF_ERROR(Cuda(kernels::LaunchCommLike(a, rig.comm), "communication-shaped kernel"));
  cudaEventRecord(span.stop, rig.comm);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    int resident = 0;
    for (int i = 0; i < ctas; ++i) resident += reinterpret_cast<volatile int*>(rig.flags)[2 + i];
    if (resident == ctas) return absl::OkStatus();
    if (std::chrono::steady_clock::now() > until) {
      reinterpret_cast<volatile int*>(rig.flags)[0] = 1;
      cudaStreamSynchronize(rig.comm);
      return absl::FailedPreconditionError(
          absl::StrFormat("%d of %d CTAs of the communication-shaped kernel resident after 1 s", resident, ctas));
    }
  }
}

// Stops the competitor; its copy rate over its whole run (bytes copied / its span).
absl::StatusOr<double> StopCompetitor(ContentionRig& rig, Events& span) {
  reinterpret_cast<volatile int*>(rig.flags)[0] = 1;
  RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(rig.comm), "communication-shaped kernel"));
  if (reinterpret_cast<volatile int*>(rig.flags)[1]) {
    return absl::DeadlineExceededError("the communication-shaped kernel ran into its 60 s timeout");
  }
  unsigned long long copied = 0;
  RETURN_IF_ERROR(Cuda(cudaMemcpy(&copied, rig.copied.p, sizeof(copied), cudaMemcpyDeviceToHost), "copy back"));
  return static_cast<double>(copied) / span.Seconds();
}

}  // namespace

absl::StatusOr<std::vector<v1::ContentionSample>> BenchContention(const GpuInfo& gpu, const ContentionPlan& plan,
                                                                  const BenchOptions& o) {
  RETURN_IF_ERROR(Cuda(cudaSetDevice(gpu.index), "cudaSetDevice"));
  int max_ctas = 0;
  for (int c : plan.ctas) {
    if (c <= 0 || c >= gpu.sm_count) {
      return absl::InvalidArgumentError(absl::StrFormat("contention: %d CTAs on a GPU of %d SMs", c, gpu.sm_count));
    }
    max_ctas = std::max(max_ctas, c);
  }
  ContentionRig rig;
  RETURN_IF_ERROR(rig.Init(max_ctas));
  const DType dtype = DType::kBF16;
  std::vector<v1::ContentionSample> out;
  for (const GemmShape& sh : plan.shapes) {
    const GemmRun how = RunFor(dtype, sh);
    absl::StatusOr<GemmTypes> ty = GemmTypesFor(gpu, dtype, how);
    if (!ty.ok()) return ty.status();
    GemmBuffers buf;
    RETURN_IF_ERROR(AllocGemmBuffers(gpu, *ty, sh.m, sh.n, sh.k, /*with_l2_flush=*/false, &buf));
    RETURN_IF_ERROR(Cuda(cudaDeviceSynchronize(), "fill"));
    // The GEMM with cuBLASLt's default kernel (sm_target 0), and sized for the SMs left.
    auto time_variant = [&](int sm_target, int ctas, int cluster) -> absl::StatusOr<std::pair<std::vector<double>, double>> {
      LtGemm g;
      RETURN_IF_ERROR(CreateLtGemm(*ty, how, dtype, sh.m, sh.n, sh.k, buf.workspace, &g, sm_target));
      const float alpha = 1.0f, beta = 0.0f;
      auto run = [&](cudaStream_t s) {
        return cublasLtMatmul(g.lt, g.desc, &alpha, buf.A.p, g.la, buf.B.p, g.lb, &beta, buf.C.p, g.lc, buf.C.p, g.lc,
                              &g.heur[0].algo, buf.work.p, buf.workspace, s);
      };
      absl::StatusOr<std::vector<double>> probe = QueuedRuns(run, 3, rig.gemm);
      if (!probe.ok()) {
        g.Cleanup();
        return probe.status();
      }
      const double one_s = Summarize(*probe).median_s();
      const int iters = std::max(TimedIterations(o, one_s), o.min_iters), warm = WarmupIterations(o, one_s);
      double achieved = 0;
      Events span;
      if (ctas > 0) {
        if (absl::Status st = StartCompetitor(rig, gpu, plan, ctas, cluster, span); !st.ok()) {
          g.Cleanup();
          return st;
        }
      }
      absl::StatusOr<std::vector<double>> w = QueuedRuns(run, warm, rig.gemm);
      absl::StatusOr<std::vector<double>> t = w.ok() ? QueuedRuns(run, iters, rig.gemm) : w;
      if (ctas > 0) {
        absl::StatusOr<double> a = StopCompetitor(rig, span);
        if (a.ok()) achieved = *a;
        if (t.ok() && !a.ok()) t = a.status();
      }
      g.Cleanup();
      if (!t.ok()) return t.status();
      return std::make_pair(*t, achieved);
    };
    for (int ctas : plan.ctas) {
      for (int cluster : plan.cluster_sizes) {
        for (bool target : {false, true}) {
          if (target && !plan.with_sm_count_target) continue;
          if (cluster > 1 && (gpu.cc_major < 9 || ctas % cluster != 0)) continue;  // clusters: sm_90+
          // Alone right before beside, so that both see the same clocks (at the power cap they drift
          // by several percent over a sweep: 1.38 and 1.47 ms for bf16 8192^3 on one H100).
          absl::StatusOr<std::pair<std::vector<double>, double>> alone = time_variant(0, 0, 1);
          if (!alone.ok()) return alone.status();
          absl::StatusOr<std::pair<std::vector<double>, double>> beside =
              time_variant(target ? gpu.sm_count - ctas : 0, ctas, cluster);
          v1::ContentionSample c = ContentionVariant(plan, sh, DTypeToProto(dtype), ctas, cluster, target);
          if (!beside.ok() && cluster > 1) {  // clusters refused: the sample says so, the sweep goes on
            *c.mutable_alone() = Summarize(alone->first);
            c.set_error(std::string(beside.status().message()));
            out.push_back(std::move(c));
            continue;
          }
          if (!beside.ok()) return beside.status();
          c.set_achieved_bytes_per_s(beside->second);
          SetContentionTimes(std::move(alone->first), std::move(beside->first), &c);
          out.push_back(std::move(c));
        }
      }
    }
  }
  return out;
}

// Bytes of each STREAM array: at least 8x the L2 (BabelStream's rule that the arrays dwarf the last
// cache) and at least 1 GiB, the size of the torch copy the calibration is held to
// (scripts/torch_reference.py), so that a kernel's launch and tail are a small share of its time;
// at most an eighth of the GPU's memory (three arrays are live). A multiple of 16 (float4).
static size_t HbmArrayBytes(const GpuInfo& gpu) {
  size_t bytes = std::max<size_t>(8 * gpu.l2_bytes, size_t{1} << 30);
  if (gpu.memory_bytes > 0) bytes = std::min(bytes, gpu.memory_bytes / 8);
  return std::max<size_t>(bytes, 64u << 20) / 16 * 16;
}

absl::StatusOr<std::vector<v1::HbmSample>> BenchHbm(const GpuInfo& gpu, const BenchOptions& o) {
  RETURN_IF_ERROR(Cuda(cudaSetDevice(gpu.index), "cudaSetDevice"));
  const size_t array = HbmArrayBytes(gpu);
  DeviceBuffer a, b, c;
  RETURN_IF_ERROR(a.Alloc(array));
  RETURN_IF_ERROR(b.Alloc(array));
  RETURN_IF_ERROR(c.Alloc(array));
  RETURN_IF_ERROR(Cuda(kernels::LaunchFillRandom(a.p, array / 4, kernels::FillType::kFloat32, 3, nullptr), "fill"));
  RETURN_IF_ERROR(Cuda(kernels::LaunchFillRandom(b.p, array / 4, kernels::FillType::kFloat32, 4, nullptr), "fill"));
  RETURN_IF_ERROR(Cuda(kernels::LaunchFillRandom(c.p, array / 4, kernels::FillType::kFloat32, 5, nullptr), "fill"));
  std::vector<v1::HbmSample> out;
  auto measure = [&](const char* name, double bytes, auto launch) -> absl::Status {
    for (int i = 0; i < o.warmup; ++i) RETURN_IF_ERROR(Cuda(launch(), name));
    QueuedEvents timed(o.iters);
    for (int i = 0; i < o.iters; ++i) {
      timed.Start(i);
      const absl::Status launched = Cuda(launch(), name);
      timed.Stop(i);
      if (!launched.ok()) {
        cudaDeviceSynchronize();
        return launched;
      }
    }
    const std::vector<double> t = timed.Seconds();
    RETURN_IF_ERROR(Cuda(cudaGetLastError(), name));
    v1::HbmSample s;
    s.set_gpu(gpu.index);
    s.set_kernel(name);
    s.set_bytes(bytes);
    *s.mutable_time() = Summarize(t);
    s.set_median_bytes_per_s(bytes / s.time().median_s());
    s.set_best_bytes_per_s(bytes / s.time().best_s());
    out.push_back(std::move(s));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(measure("copy", 2.0 * array, [&] { return kernels::LaunchCopy(a.p, c.p, array, nullptr); }));
  RETURN_IF_ERROR(measure("triad", 3.0 * array, [&] { return kernels::LaunchTriad(a.p, b.p, c.p, 0.4f, array, nullptr); }));
  // Pinned host <-> device (offload), 256 MiB. The host buffer lands on the NUMA node of the thread
  // that allocates it; bind the process to the GPU's node (numactl / srun --cpu-bind) for the
  // figure an offloading trainer sees.
  const size_t host_bytes = 256u << 20;
  void* host = nullptr;
  RETURN_IF_ERROR(Cuda(cudaMallocHost(&host, host_bytes), "cudaMallocHost"));
  absl::Status s1 = measure("h2d_pinned", host_bytes, [&] { return cudaMemcpyAsync(a.p, host, host_bytes, cudaMemcpyHostToDevice); });
  absl::Status s2 = measure("d2h_pinned", host_bytes, [&] { return cudaMemcpyAsync(host, a.p, host_bytes, cudaMemcpyDeviceToHost); });
  cudaFreeHost(host);
  RETURN_IF_ERROR(s1);
  RETURN_IF_ERROR(s2);
  return out;
}

namespace {

// One GEMM issued as Transformer Engine v2.12's cublas_gemm issues each expert's
// (common/gemm/cublaslt_gemm.cu l.454-796, read 2026-11-30): layouts of A (k x m, transposed), B
// (k x n) and D; the matmul descriptor with TRANSA / TRANSB, for fp8 FAST_ACCUM, the A and B
// scale pointers and (cuBLAS 12.8+) their scalar scale modes, and the epilogue; C's layout; a preference with the workspace and the four
// operands' alignments; the heuristic query for one algorithm; cublasLtMatmul on `stream`; the six
// objects destroyed. The status of the first call that failed.
struct TeGemmCall {
  cublasLtHandle_t lt = nullptr;
  GemmTypes ty;
  bool fp8 = false;
  int64_t m = 0, n = 0, k = 0;
  const void *A = nullptr, *B = nullptr;
  void* D = nullptr;
  const float* scales = nullptr;  // device: A's and B's scale (fp8)
  void* work = nullptr;
  size_t workspace = 0;
  cudaStream_t stream = nullptr;

  cublasStatus_t operator()() const {
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t heur = {};
    int found = 0;
    const cublasOperation_t op_a = CUBLAS_OP_T, op_b = CUBLAS_OP_N;
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const float alpha = 1, beta = 0;
    const uint32_t align = 256;
    cublasStatus_t s = cublasLtMatrixLayoutCreate(&la, ty.ab, k, m, k);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&lb, ty.ab, k, n, k);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&ld, ty.cd, m, n, m);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescCreate(&desc, ty.compute, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a));
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b));
    if (fp8) {
      const int8_t fast = 1;
      const float* scale_a = scales;
      const float* scale_b = scales + 1;
      if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast));
      if (s == CUBLAS_STATUS_SUCCESS) {
        s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a, sizeof(scale_a));
      }
      if (s == CUBLAS_STATUS_SUCCESS) {
        s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b, sizeof(scale_b));
      }
#if CUBLAS_VERSION >= 120800
      // The scale modes, which TE sets from cuBLAS 12.8 on (per-tensor: a scalar fp32 scale).
      if (cublasLtGetVersion() >= 120800) {
        const cublasLtMatmulMatrixScale_t scalar = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &scalar, sizeof(scalar));
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &scalar, sizeof(scalar));
      }
#endif
    }
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&lc, ty.cd, m, n, m);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceCreate(&pref);
    if (s == CUBLAS_STATUS_SUCCESS) {
      s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
    }
    for (const cublasLtMatmulPreferenceAttributes_t a :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceSetAttribute(pref, a, &align, sizeof(align));
    }
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 1, &heur, &found);
    if (s == CUBLAS_STATUS_SUCCESS && found == 0) s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (s == CUBLAS_STATUS_SUCCESS) {
      s = cublasLtMatmul(lt, desc, &alpha, A, la, B, lb, &beta, D, lc, D, ld, &heur.algo, work, workspace, stream);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(desc);
    return s;
  }
};

// kHostCallBatches timed batches (after 2 untimed) of kHostCallsPerBatch calls of `call` (an
// absl::Status per call), each batch's host time over its calls; the stream synchronised before
// each batch, outside the window.
template <typename Call>
absl::StatusOr<v1::SampleSummary> TimeHostCalls(cudaStream_t stream, const char* what, const Call& call) {
  std::vector<double> per_call_s;
  for (int b = -2; b < kHostCallBatches; ++b) {
    RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream), what));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kHostCallsPerBatch; ++i) RETURN_IF_ERROR(call());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (b >= 0) per_call_s.push_back(s / kHostCallsPerBatch);
  }
  RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream), what));
  return Summarize(std::move(per_call_s));
}

void DestroyStream(cudaStream_t s) { cudaStreamDestroy(s); }

}  // namespace

absl::StatusOr<std::vector<v1::HostCallSample>> BenchHostCalls(const GpuInfo& gpu, const BenchOptions& /*o*/) {
  RETURN_IF_ERROR(Cuda(cudaSetDevice(gpu.index), "cudaSetDevice"));
  cudaStream_t stream = nullptr;
  RETURN_IF_ERROR(Cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  std::unique_ptr<CUstream_st, void (*)(cudaStream_t)> stream_guard(stream, DestroyStream);
  std::vector<v1::HostCallSample> out;
  absl::StatusOr<v1::SampleSummary> launch = TimeHostCalls(stream, "kernel_launch", [&] {
    return Cuda(kernels::LaunchEmptyKernel(stream), "kernel_launch");
  });
  if (!launch.ok()) return launch.status();
  v1::HostCallSample& l = out.emplace_back();
  l.set_call("kernel_launch");
  l.set_calls_per_batch(kHostCallsPerBatch);
  *l.mutable_time() = *launch;

  constexpr int64_t m = 1536, n = 1536, k = 2048;
  cublasLtHandle_t lt = nullptr;
  RETURN_IF_ERROR(Lt(cublasLtCreate(&lt), "cublasLtCreate"));
  std::unique_ptr<cublasLtContext, void (*)(cublasLtHandle_t)> lt_guard(lt, DestroyLtHandle);
  const bool has_fp8 = gpu.cc_major > 8 || (gpu.cc_major == 8 && gpu.cc_minor >= 9);
  for (const DType dtype : {DType::kBF16, DType::kFP8}) {
    if (dtype == DType::kFP8 && !has_fp8) continue;
    absl::StatusOr<GemmTypes> ty = GemmTypesFor(gpu, dtype, GemmRun{GemmLayout::kTN, dtype == DType::kFP8});
    if (!ty.ok()) return ty.status();
    GemmBuffers buf;
    RETURN_IF_ERROR(AllocGemmBuffers(gpu, *ty, m, n, k, /*with_l2_flush=*/false, &buf));
    DeviceBuffer scales;
    RETURN_IF_ERROR(scales.Alloc(2 * sizeof(float)));
    RETURN_IF_ERROR(Cuda(kernels::LaunchFillConstant(static_cast<float*>(scales.p), 2, 1.0f, stream), "fill scales"));
    const TeGemmCall call{lt, *ty, dtype == DType::kFP8, m, n, k, buf.A.p, buf.B.p, buf.C.p,
                          static_cast<const float*>(scales.p), buf.work.p, buf.workspace, stream};
    const std::string what = absl::StrCat("cublaslt_gemm_call ", DTypeName(dtype));
    absl::StatusOr<v1::SampleSummary> t = TimeHostCalls(stream, what.c_str(), [&] { return Lt(call(), what.c_str()); });
    if (!t.ok()) return t.status();
    v1::HostCallSample& g = out.emplace_back();
    g.set_call("cublaslt_gemm_call");
    g.set_dtype(DTypeToProto(dtype));
    g.set_m(m);
    g.set_n(n);
    g.set_k(k);
    g.set_calls_per_batch(kHostCallsPerBatch);
    *g.mutable_time() = *t;
  }
  return out;
}

absl::StatusOr<CuptiCheck> CuptiHbmCopy(const GpuInfo& gpu, const BenchOptions& o, CuptiTimer& cupti) {
  if (!cupti.enabled()) return absl::UnavailableError(cupti.why_disabled());
  RETURN_IF_ERROR(Cuda(cudaSetDevice(gpu.index), "cudaSetDevice"));
  const size_t array = HbmArrayBytes(gpu);
  DeviceBuffer a, c;
  RETURN_IF_ERROR(a.Alloc(array));
  RETURN_IF_ERROR(c.Alloc(array));
  for (int i = 0; i < o.warmup; ++i) RETURN_IF_ERROR(Cuda(kernels::LaunchCopy(a.p, c.p, array, nullptr), "copy"));
  QueuedEvents timed(o.iters);
  cupti.Begin();
  for (int i = 0; i < o.iters; ++i) {
    timed.Start(i);
    const absl::Status launched = Cuda(kernels::LaunchCopy(a.p, c.p, array, nullptr), "copy");
    timed.Stop(i);
    if (!launched.ok()) {
      cudaDeviceSynchronize();
      cupti.End("");
      return launched;
    }
  }
  const std::vector<double> events = timed.Seconds();
  std::vector<double> t = cupti.End("");
  if (t.empty()) return absl::UnavailableError("CUPTI recorded no kernel");
  return CuptiCheck{Summarize(t).median_s(), Summarize(events).median_s()};
}

absl::Status SustainedWarmup(const GpuInfo& gpu, double seconds) {
  // A bf16 8192^3 GEMM (mamf-finder's warm-up runs its first shape for 30 s), timed on the host.
  GemmShape sh{8192, 8192, 8192, GemmPass::kSquare, "warm-up"};
  BenchOptions o;
  o.warmup = 0;
  o.iters = 1;
  o.min_iters = 1;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    // At most 30 timed GEMMs per call (~45 ms of bf16 8192^3 on an H100), between the call's own
    // allocation, algorithm selection, L2 flushes, verification and frees: not back to back (gpu
    // code review 2, N13; docs/CALIBRATION.md says what that leaves and why it stays for now).
    o.iters = 30;
    o.budget_s = 2.0;
    absl::StatusOr<v1::GemmSample> s = BenchGemm(gpu, DType::kBF16, sh, o, nullptr);
    if (!s.ok()) return s.status();
  }
  return absl::OkStatus();
}

}  // namespace stepcast::calibrate
