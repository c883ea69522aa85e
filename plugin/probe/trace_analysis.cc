#include "plugin/probe/trace_analysis.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stepcast::probe {

const char* const kCollectives[6] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv",
                                     "broadcast"};

const char* CategoryName(KernelCategory c) {
  switch (c) {
    case KernelCategory::kGemm: return "gemm";
    case KernelCategory::kAttention: return "attention";
    case KernelCategory::kCommunication: return "communication";
    case KernelCategory::kMemory: return "memory_copy";
    case KernelCategory::kElementwise: return "elementwise";
    case KernelCategory::kConvolution: return "convolution";
  }
  return "?";
}

namespace {

// DeepEP's layout kernel (deep_ep::layout::get_dispatch_layout; dpsk::ep::cuda::get_dispatch_layout
// in DeepSeek's own build) counts the tokens per rank and expert from the top-k indices: local
// work that moves no data between GPUs, so not communication. `n` lower case.
bool IsDeepEpName(absl::string_view n) {
  return (absl::StrContains(n, "deep_ep::") || absl::StrContains(n, "deepep") || absl::StrContains(n, "dpsk::ep::")) &&
         !absl::StrContains(n, "get_dispatch_layout");
}

// `n` lower case.
bool IsCommunicationName(absl::string_view n) {
  return absl::StrContains(n, "nccl") || absl::StrContains(n, "rccl") || absl::StrContains(n, "multimem_all_reduce") ||
         absl::StrContains(n, "two_shot_all_reduce") || absl::StrContains(n, "one_shot_all_reduce") ||
         absl::StrContains(n, "cross_device_reduce") || absl::StrContains(n, "nvshmem") ||
         absl::StrContains(n, "userbuffers") || IsDeepEpName(n);
}

}  // namespace

const KernelFamily kKernelFamilies[] = {
    {KernelCategory::kMemory, "CUPTI/Kineto memcpy and memset records (every CUDA/ROCm version)",
     "Memcpy HtoD (Pinned -> Device)"},
    {KernelCategory::kCommunication, "NCCL 2.x and RCCL (ROCm 6): ncclKernel_*, ncclDevKernel_*",
     "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"},
    {KernelCategory::kCommunication,
     "PyTorch 2.5+ symmetric memory (multimem/one_shot/two_shot_all_reduce), vLLM custom all-reduce",
     "c10d::symmetric_memory::two_shot_all_reduce_kernel"},
    {KernelCategory::kCommunication,
     "DeepEP 1.x (deep_ep::intranode/internode/internode_ll dispatch, combine, notify_dispatch, cached_notify; "
     "dpsk::ep:: in deepseek-ai/profile-data @ 4496024); not get_dispatch_layout (local)",
     "dpsk::ep::internode::notify_dispatch<false, 8>"},
    {KernelCategory::kCommunication, "NVSHMEM device kernels; Transformer Engine userbuffers (comm-GEMM overlap)",
     "userbuffers_fp16_sum_inplace_gpu_rr_rs"},
    {KernelCategory::kElementwise,
     "fbgemm_gpu / TorchRec (TBE split_embedding_*, bounds_check_indices, permute_2D_*, bucketize, FP8 quantize): "
     "memory-bound gathers and scatters, not GEMMs although 'fbgemm' holds 'gemm'",
     "fbgemm_gpu::permute_2D_data_kernel"},
    {KernelCategory::kElementwise,
     "DeepSeek grouped-GEMM helpers (operand transpose, TMA descriptor fill; profile-data @ 4496024)",
     "dpsk::grouped_gemm::cuda::utils::transpose<512, 128, 4, 4>"},
    {KernelCategory::kAttention,
     "FlashAttention 2/3 (flash_fwd/flash_bwd, flash::), cuDNN/TE fused attention (sdpa, fmha, fused_attn), "
     "xformers/PyTorch efficient_attention, Triton and ROCm attn_fwd/_attn_fwd, SageAttention sage_fwd, CK/aiter "
     "fmha and mha_fwd, FlashInfer prefill/decode (*WithKVCacheKernel; not its quantize kernels, which only name "
     "flashinfer:: types), vLLM paged attention and reshape_and_cache",
     "attn_fwd"},
    {KernelCategory::kConvolution,
     "cuDNN/CUTLASS convolutions (implicit-GEMM fprop/dgrad/wgrad, scudnn, winograd, cask_cudnn helpers); "
     "MIOpen igemm_{fwd,bwd,wrw}_gtc*, naive_conv, Sp3AsmConv; Composable Kernel grouped_conv_* and "
     "batched_gemm_xdlops_bwd_weight (ROCm 6.x)",
     "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32"},
    {KernelCategory::kGemm,
     "cuBLAS/cuBLASLt (nvjet, sm90_xmma_gemm, gemv, gemmk1, splitKreduce, dot_kernel), CUTLASS incl. grouped "
     "GEMMs, hipBLASLt/Tensile Cijk_*, CK gemm, DeepGEMM and dpsk::grouped_gemm, MAGMA, Inductor/Triton mm "
     "templates, fused_moe_kernel",
     "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64"},
    {KernelCategory::kElementwise, "everything else: norms, activations, optimizer, casts, reductions, softmax",
     "vectorized_elementwise_kernel"},
};
const size_t kKernelFamilyCount = sizeof(kKernelFamilies) / sizeof(kKernelFamilies[0]);

KernelCategory ClassifyKernel(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  auto has = [&](absl::string_view s) { return absl::StrContains(n, s); };
  // CUPTI/Kineto copy and set records ("Memcpy HtoD (Pinned -> Device)", "Memset (Device)") and
  // Nsight's "[CUDA memcpy ...]". Copy kernels are elementwise work.
  if (absl::StartsWith(n, "memcpy") || absl::StartsWith(n, "memset") || absl::StartsWith(n, "[cuda memcpy") ||
      absl::StartsWith(n, "[cuda memset")) {
    return KernelCategory::kMemory;
  }
  if (IsCommunicationName(n)) return KernelCategory::kCommunication;
  // fbgemm_gpu's embedding, permute, bucketize and quantize kernels are not GEMMs although
  // "fbgemm" holds "gemm" (its CUTLASS-based GEMMs carry cutlass or f8f8bf16 in the name, its
  // GenAI attention kernels attn). The
  // split_embedding_* / bounds_check_indices kernels are fbgemm_gpu's TBE code generator's.
  if ((has("fbgemm") && !has("cutlass") && !has("f8f8bf16") && !has("bf16i4bf16") && !has("f8i4bf16") &&
       !has("attn") && !has("attention")) ||
      has("split_embedding") || has("dense_embedding_codegen") || has("bounds_check_indices")) {
    return KernelCategory::kElementwise;
  }
  // GEMM libraries' helper kernels: operand transposes and TMA descriptor fills.
  if (has("grouped_gemm::cuda::utils::") || has("fill_tensormaps")) return KernelCategory::kElementwise;
  if (has("flash_fwd") || has("flash_bwd") || has("flash::") || has("flash_attn") || has("fmha") || has("sdpa") ||
      has("attn_fwd") || has("attn_bwd") || has("attention") || has("fused_attn") || has("sage_fwd") ||
      has("sage_bwd") || has("kvcachekernel") || has("batchdecodewith") || has("batchprefillwith") ||
      has("mha_fwd") || has("mha_bwd") || has("reshape_and_cache") ||
      // cuDNN SDPA backward's pre/post kernels (cudnn::fusion::compute_dot_do_o, convert_dq_to_16bits;
      // FlashAttention-2's flash_bwd_dot_do_o / flash_bwd_convert_dq, matched above).
      (has("cudnn::fusion::") && (has("dot_do_o") || has("convert_dq")))) {
    return KernelCategory::kAttention;
  }
  // Convolutions before GEMMs: cuDNN's, CUTLASS's, MIOpen's and CK's convolutions are implicit
  // GEMMs and carry "gemm" or "cutlass" in their names. "conv" alone would also match "convert".
  if (has("convolution") || has("convolve") || has("conv1d") || has("conv2d") || has("conv3d") ||
      has("fprop") || has("dgrad") || has("wgrad") || has("scudnn") || has("winograd") ||
      has("cutlass_cudnn") || has("cask_cudnn") ||
      // MIOpen's implicit-GEMM convolutions (igemm_fwd_gtcx3_nhwc_*, igemm_bwd_*, igemm_wrw_*), its naive
      // and assembly ones; Composable Kernel's grouped convolutions (kernel_grouped_conv_fwd_*) and its
      // backward-weight kernel (kernel_batched_gemm_xdlops_bwd_weight, defined in CK's
      // device_grouped_conv_bwd_weight_xdl_cshuffle.hpp).
      absl::StartsWith(n, "igemm_") || has("naive_conv") || has("sp3asmconv") || has("grouped_conv") ||
      has("convnd") || has("xdlops_bwd_weight")) {
    return KernelCategory::kConvolution;
  }
  if (has("nvjet") || has("gemm") || has("gemv") || has("cutlass") || has("cublas") || has("xmma") ||
      has("s16816") || has("s1688") || has("wgmma") || has("hmma") || has("dot_kernel") || has("matmul") ||
      has("splitkreduce") || has("fused_moe_kernel") || has("moe::dev::finalize") || absl::StartsWith(n, "cijk_") ||
      (absl::StartsWith(n, "triton_tem_") && has("mm"))) {
    return KernelCategory::kGemm;
  }
  return KernelCategory::kElementwise;
}

std::string CollectiveOf(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (!IsCommunicationName(n)) return "";
  auto has = [&](absl::string_view s) { return absl::StrContains(n, s); };
  if (has("allreduce") || has("all_reduce") || has("cross_device_reduce")) return "all_reduce";
  if (has("allgather") || has("all_gather")) return "all_gather";
  if (has("reducescatter") || has("reduce_scatter")) return "reduce_scatter";
  if (has("alltoall") || has("all_to_all") || IsDeepEpName(n)) return "all_to_all";
  if (has("sendrecv") || has("_send") || has("_recv")) return "send_recv";
  if (has("broadcast")) return "broadcast";
  return "other";
}

std::string CommunicationKind(absl::string_view name, uint8_t collective) {
  const std::string n = absl::AsciiStrToLower(name);
  if (IsDeepEpName(n)) {
    if (absl::StrContains(n, "combine")) return "deepep_combine";
    if (absl::StrContains(n, "dispatch")) return "deepep_dispatch";
    return "deepep_notify";
  }
  return CollectiveName(collective);
}

std::string CollectiveFromLabel(absl::string_view label) {
  std::string n = absl::AsciiStrToLower(label);
  if (absl::StartsWith(n, "nccl:")) n = n.substr(5);
  n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
  auto has = [&](absl::string_view s) { return absl::StrContains(n, s); };
  if (has("allreduce")) return "all_reduce";
  if (has("allgather")) return "all_gather";
  if (has("reducescatter")) return "reduce_scatter";
  if (has("alltoall")) return "all_to_all";
  if (has("send") || has("recv")) return "send_recv";
  if (has("broadcast")) return "broadcast";
  return "";
}

uint8_t CollectiveIndex(absl::string_view c) {
  for (int i = 0; i < 6; ++i) {
    if (c == kCollectives[i]) return static_cast<uint8_t>(i + 1);
  }
  return c.empty() ? 0 : 7;  // 7: other
}

const char* CollectiveName(uint8_t index) {
  return index >= 1 && index <= 6 ? kCollectives[index - 1] : "other";
}

std::vector<int64_t> StepStartsFromIterations(const std::vector<KernelRecord>& kernels,
                                              const std::vector<int32_t>& iteration) {
  std::map<int32_t, int64_t> first;
  for (size_t i = 0; i < kernels.size() && i < iteration.size(); ++i) {
    if (iteration[i] < 0) continue;
    auto [it, inserted] = first.try_emplace(iteration[i], kernels[i].start_ns);
    if (!inserted) it->second = std::min(it->second, kernels[i].start_ns);
  }
  std::vector<int64_t> starts;
  for (const auto& [iter, t] : first) starts.push_back(t);
  return starts;
}

std::vector<int64_t> StepStartsFromRanges(const std::vector<KernelRecord>& kernels,
                                          const std::vector<TimeRange>& ranges) {
  std::vector<int64_t> starts;
  for (const TimeRange& r : ranges) {
    auto it = std::lower_bound(kernels.begin(), kernels.end(), r.start_ns,
                               [](const KernelRecord& k, int64_t t) { return k.start_ns < t; });
    if (it == kernels.end()) break;
    if (starts.empty() || it->start_ns > starts.back()) starts.push_back(it->start_ns);
  }
  return starts;
}

std::vector<TimeRange> OutermostRanges(std::vector<TimeRange> ranges) {
  // By start, the longer first at equal starts; a range is kept when it starts at or after the
  // end of the last kept one. An open range (end 0: its end not seen yet, or lost) contains
  // nothing, so a lost end never swallows the ranges after it.
  std::sort(ranges.begin(), ranges.end(), [](const TimeRange& a, const TimeRange& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  std::vector<TimeRange> out;
  for (const TimeRange& r : ranges) {
    if (!out.empty()) {
      const TimeRange& last = out.back();
      const bool inside = last.end_ns != 0 && r.start_ns < last.end_ns;
      if (inside) continue;
    }
    out.push_back(r);
  }
  return out;
}

bool IsStepRangeName(absl::string_view name, absl::string_view pattern) {
  const std::string n = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
  const std::string p = absl::AsciiStrToLower(pattern);
  if (p != "step") return n == p;
  if (absl::StartsWith(n, "profilerstep#")) return true;
  // PyTorch's own optimizer annotations ("Optimizer.step#SGD.step", "Optimizer.zero_grad#...",
  // torch/optim/optimizer.py profile_hook_step) are inside the step, not the step (issue 24).
  if (absl::StartsWith(n, "optimizer.") || absl::StrContains(n, ".step#")) return false;
  for (absl::string_view sub : {"forward_step", "backward_step", "optimizer_step", "micro_step", "microstep",
                                "forward step", "backward step", "optimizer step", "micro step", "fwd_step",
                                "bwd_step", "zero_grad_step", "lr_step", "scheduler_step"}) {
    if (absl::StrContains(n, sub)) return false;
  }
  // "step" as a word: at the start or end, or after/before a separator, optionally followed by a
  // number ("step 12", "train_step", "training-step#3").
  size_t pos = 0;
  while ((pos = n.find("step", pos)) != std::string::npos) {
    const bool left = pos == 0 || !absl::ascii_isalpha(static_cast<unsigned char>(n[pos - 1]));
    size_t r = pos + 4;
    const bool right = r == n.size() || !absl::ascii_isalpha(static_cast<unsigned char>(n[r]));
    if (left && right) return true;
    pos = r;
  }
  return false;
}

namespace {

// StepStartsFromPeriod in steps (trace_analysis.h): the stream, the period, the phase (anchor),
// the step starts found period by period.

// Step 1: the stream with the most (non-memcpy) records, the lowest id among equals; nullopt when
// there is no such record.
std::optional<int32_t> BusiestStream(const std::vector<KernelRecord>& k) {
  std::map<int32_t, int64_t> per_stream;
  for (const KernelRecord& r : k) {
    if (r.category != KernelCategory::kMemory) ++per_stream[r.stream];
  }
  if (per_stream.empty()) return std::nullopt;
  int32_t stream = per_stream.begin()->first;
  for (const auto& [s, c] : per_stream) {
    if (c > per_stream[stream]) stream = s;
  }
  return stream;
}

// Step 2: the period, judged on seq[tail, n): the candidate in [min_p, max_p] with the highest
// share of name[i] == name[i + P], each on at most `samples` positions (reliability review M5);
// the smallest candidate dividing it within 1 point of it wins (a multiple of the step is not
// taken). 0 when no candidate reaches 90%.
int64_t BestPeriod(const std::vector<uint32_t>& seq, int64_t tail, int64_t min_p, int64_t max_p, int64_t samples) {
  const int64_t n = static_cast<int64_t>(seq.size());
  std::vector<double> score(max_p + 1, 0.0);
  double best = -1;
  int64_t best_p = 0;
  for (int64_t p = min_p; p <= max_p; ++p) {
    const int64_t len = n - p - tail;
    if (len <= 0) continue;
    const int64_t stride = std::max<int64_t>(1, len / samples);
    int64_t match = 0, total = 0;
    for (int64_t i = tail; i + p < n; i += stride) {
      ++total;
      match += seq[i] == seq[i + p];
    }
    score[p] = total > 0 ? double(match) / double(total) : 0.0;
    if (score[p] > best) {
      best = score[p];
      best_p = p;
    }
  }
  if (best < 0.9) return 0;
  int64_t period = best_p;
  for (int64_t p = min_p; p < best_p; ++p) {
    if (best_p % p == 0 && score[p] >= best - 0.01) {
      period = p;
      break;
    }
  }
  return period;
}

// Step 3a: the idle gap of the whole GPU (all streams) before each record idx[i] of the stream:
// its start minus the latest end of the records before it (0 for the first).
std::vector<int64_t> IdleGaps(const std::vector<KernelRecord>& k, const std::vector<size_t>& idx) {
  const int64_t n = static_cast<int64_t>(idx.size());
  std::vector<int64_t> gap(n, 0);
  int64_t max_end = INT64_MIN;
  size_t j = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (; j < idx[i]; ++j) max_end = std::max(max_end, k[j].end_ns);
    gap[i] = max_end == INT64_MIN ? 0 : k[idx[i]].start_ns - max_end;
  }
  return gap;
}

// Step 3b: the phase: the position in [tail, tail + period) whose smallest gap over every period
// (at least two) is the largest (the step's synchronisation); -1 when none has two periods.
int64_t AnchorOf(const std::vector<int64_t>& gap, int64_t tail, int64_t period) {
  const int64_t n = static_cast<int64_t>(gap.size());
  int64_t anchor = -1, anchor_gap = INT64_MIN;
  for (int64_t j = 0; j < period && tail + j < n; ++j) {
    int64_t worst = INT64_MAX, count = 0;
    for (int64_t i = tail + j; i < n; i += period, ++count) worst = std::min(worst, gap[i]);
    if (count >= 2 && worst > anchor_gap) {
      anchor_gap = worst;
      anchor = tail + j;
    }
  }
  return anchor;
}

// Step 4: the step positions: the anchor, then every period from it forwards and backwards, each
// found within +-period/10 (at least 1) where the next min(32, period) names match the anchor's
// for at least 90% (so a warm-up step with extra kernels does not shift the rest). Sorted.
std::vector<int64_t> FollowPeriods(const std::vector<uint32_t>& seq, int64_t anchor, int64_t period) {
  const int64_t n = static_cast<int64_t>(seq.size());
  const int64_t context = std::min<int64_t>(32, period);
  auto same_context = [&](int64_t c) {
    if (c < 0 || c + context > n) return false;
    int64_t m = 0;
    for (int64_t t = 0; t < context; ++t) m += seq[c + t] == seq[anchor + t];
    return m * 10 >= context * 9;
  };
  std::vector<int64_t> found = {anchor};
  const int64_t window = std::max<int64_t>(1, period / 10);
  for (int dir : {1, -1}) {
    int64_t cur = anchor;
    while (true) {
      const int64_t e = cur + dir * period;
      int64_t hit = -1;
      for (int64_t d = 0; d <= window && hit < 0; ++d) {
        if (same_context(e - d)) hit = e - d;
        else if (same_context(e + d)) hit = e + d;
      }
      if (hit < 0) break;
      found.push_back(hit);
      cur = hit;
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

absl::StatusOr<PeriodResult> StepStartsFromPeriod(const std::vector<KernelRecord>& k, const PeriodOptions& o) {
  const std::optional<int32_t> busiest = BusiestStream(k);
  if (!busiest) return absl::NotFoundError("no kernel records");
  const int32_t stream = *busiest;
  std::vector<size_t> idx;
  for (size_t i = 0; i < k.size(); ++i) {
    if (k[i].stream == stream && k[i].category != KernelCategory::kMemory) idx.push_back(i);
  }
  const int64_t n = static_cast<int64_t>(idx.size());
  std::vector<uint32_t> seq(n);
  for (int64_t i = 0; i < n; ++i) seq[i] = k[idx[i]].name_id;
  // Judge periods on the last two thirds (past warm-up, autotuning and first-step allocations),
  // with at least two periods in it.
  const int64_t tail = n / 3;
  const int64_t min_p = std::max<int64_t>(o.min_period, 1);
  const int64_t max_p = std::min(o.max_period, (n - tail) / 2);
  const auto not_found = absl::NotFoundError(
      "no repeating kernel sequence (steps cannot be found without a ProfilerStep or NVTX step range)");
  if (max_p < min_p) return not_found;
  const int64_t candidates = max_p - min_p + 1;
  const int64_t samples = std::max<int64_t>(64, o.max_comparisons / candidates);
  const int64_t period = BestPeriod(seq, tail, min_p, max_p, samples);
  if (period == 0) return not_found;
  const int64_t anchor = AnchorOf(IdleGaps(k, idx), tail, period);
  if (anchor < 0) return not_found;
  const std::vector<int64_t> found = FollowPeriods(seq, anchor, period);
  PeriodResult r;
  r.period = period;
  r.stream = stream;
  // Steps of zero length (kernels at one timestamp) are not steps: equal starts count once
  // (reliability review 2, N14: 10,000 kernels at one timestamp gave 2,499 steps of 0 ms).
  for (int64_t c : found) {
    if (r.starts.empty() || k[idx[c]].start_ns > r.starts.back()) r.starts.push_back(k[idx[c]].start_ns);
  }
  if (r.starts.size() < 2) {
    return absl::NotFoundError(
        "the repeating kernel sequence gives no step of positive length (its kernels start at one time)");
  }
  return r;
}

namespace {

// Union length of intervals clipped to [a, b), and the union itself.
std::vector<std::pair<int64_t, int64_t>> Union(std::vector<std::pair<int64_t, int64_t>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& iv : v) {
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}
int64_t Length(const std::vector<std::pair<int64_t, int64_t>>& u) {
  int64_t s = 0;
  for (const auto& iv : u) s += iv.second - iv.first;
  return s;
}
int64_t IntersectionLength(const std::vector<std::pair<int64_t, int64_t>>& a,
                           const std::vector<std::pair<int64_t, int64_t>>& b) {
  int64_t s = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) s += hi - lo;
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return s;
}

}  // namespace

int64_t MaxDurationNs(const std::vector<KernelRecord>& kernels) {
  int64_t m = 0;
  for (const KernelRecord& k : kernels) m = std::max(m, k.end_ns - k.start_ns);
  return m;
}

RunningIndex::RunningIndex(const std::vector<KernelRecord>& kernels) : n_(kernels.size()) {
  const size_t blocks = (n_ + kBlock - 1) / kBlock;
  leaves_ = 1;
  while (leaves_ < blocks) leaves_ *= 2;
  max_end_.assign(2 * leaves_, INT64_MIN);
  for (size_t i = 0; i < n_; ++i) {
    int64_t& m = max_end_[leaves_ + i / kBlock];
    m = std::max(m, kernels[i].end_ns);
  }
  for (size_t v = leaves_ - 1; v >= 1; --v) max_end_[v] = std::max(max_end_[2 * v], max_end_[2 * v + 1]);
}

void RunningIndex::ForEachEndingAfter(const std::vector<KernelRecord>& kernels, size_t limit, int64_t t,
                                      const std::function<void(size_t)>& fn) const {
  if (limit == 0 || n_ == 0) return;
  limit = std::min(limit, n_);
  const size_t last_block = (limit - 1) / kBlock;
  // Depth-first over the blocks [0, last_block] whose maximum end is after t (iterative: no
  // recursion on hostile input).
  std::vector<std::pair<size_t, std::pair<size_t, size_t>>> stack = {{1, {0, leaves_ - 1}}};
  std::vector<size_t> hits;
  while (!stack.empty()) {
    const auto [v, range] = stack.back();
    stack.pop_back();
    if (range.first > last_block || max_end_[v] <= t) continue;
    if (range.first == range.second) {
      hits.push_back(range.first);
      continue;
    }
    const size_t mid = (range.first + range.second) / 2;
    stack.push_back({2 * v + 1, {mid + 1, range.second}});
    stack.push_back({2 * v, {range.first, mid}});
  }
  std::sort(hits.begin(), hits.end());
  for (size_t b : hits) {
    for (size_t i = b * kBlock; i < std::min(limit, (b + 1) * kBlock); ++i) {
      if (kernels[i].end_ns > t) fn(i);
    }
  }
}

v1::StepMeasurement AnalyzeWindow(const std::vector<KernelRecord>& kernels, int64_t a, int64_t b, int64_t lookback_ns) {
  // Records that started up to lookback_ns before the window may still run inside it.
  auto first = std::lower_bound(kernels.begin(), kernels.end(), a - std::max<int64_t>(0, lookback_ns),
                                [](const KernelRecord& k, int64_t t) { return k.start_ns < t; });
  std::vector<const KernelRecord*> in;
  for (auto it = first; it != kernels.end() && it->start_ns < b; ++it) in.push_back(&*it);
  return AnalyzeRecords(in, a, b);
}

v1::StepMeasurement AnalyzeWindow(const std::vector<KernelRecord>& kernels, const RunningIndex& index, int64_t a,
                                  int64_t b) {
  const size_t first = static_cast<size_t>(
      std::lower_bound(kernels.begin(), kernels.end(), a,
                       [](const KernelRecord& k, int64_t t) { return k.start_ns < t; }) -
      kernels.begin());
  std::vector<const KernelRecord*> in;
  index.ForEachEndingAfter(kernels, first, a, [&](size_t i) { in.push_back(&kernels[i]); });
  for (size_t i = first; i < kernels.size() && kernels[i].start_ns < b; ++i) in.push_back(&kernels[i]);
  return AnalyzeRecords(in, a, b);
}

v1::StepMeasurement AnalyzeRecords(const std::vector<const KernelRecord*>& records, int64_t a, int64_t b) {
  using Intervals = std::vector<std::pair<int64_t, int64_t>>;
  Intervals by_cat[kCategoryCount], compute, compute_or_memory, all;
  std::map<int, Intervals> by_coll;
  int32_t count = 0;
  for (const KernelRecord* it : records) {
    const int64_t s = std::max(it->start_ns, a), e = std::min(it->end_ns, b);
    if (e <= s) continue;
    if (it->start_ns >= a) ++count;
    by_cat[static_cast<int>(it->category)].push_back({s, e});
    all.push_back({s, e});
    if (it->category == KernelCategory::kCommunication) {
      by_coll[it->collective].push_back({s, e});
    } else {
      compute_or_memory.push_back({s, e});
      if (it->category != KernelCategory::kMemory) compute.push_back({s, e});
    }
  }
  v1::StepMeasurement m;
  m.set_step_time_s((b - a) * 1e-9);
  m.set_start_ns(a);
  m.set_end_ns(b);
  m.set_kernel_count(count);
  Intervals u[kCategoryCount];
  for (int c = 0; c < kCategoryCount; ++c) u[c] = Union(std::move(by_cat[c]));
  auto* busy = m.mutable_busy();
  busy->set_gemm_s(Length(u[static_cast<int>(KernelCategory::kGemm)]) * 1e-9);
  busy->set_attention_s(Length(u[static_cast<int>(KernelCategory::kAttention)]) * 1e-9);
  busy->set_communication_s(Length(u[static_cast<int>(KernelCategory::kCommunication)]) * 1e-9);
  busy->set_memory_copy_s(Length(u[static_cast<int>(KernelCategory::kMemory)]) * 1e-9);
  busy->set_elementwise_s(Length(u[static_cast<int>(KernelCategory::kElementwise)]) * 1e-9);
  busy->set_convolution_s(Length(u[static_cast<int>(KernelCategory::kConvolution)]) * 1e-9);
  const Intervals comp = Union(std::move(compute)), comp_mem = Union(std::move(compute_or_memory));
  const Intervals& comm = u[static_cast<int>(KernelCategory::kCommunication)];
  m.set_exposed_communication_s((Length(comm) - IntersectionLength(comm, comp)) * 1e-9);
  m.set_exposed_communication_incl_memory_s((Length(comm) - IntersectionLength(comm, comp_mem)) * 1e-9);
  m.set_idle_s(((b - a) - Length(Union(std::move(all)))) * 1e-9);
  for (auto& [idx, v] : by_coll) {
    const std::string name = CollectiveName(static_cast<uint8_t>(idx));
    const Intervals uc = Union(std::move(v));
    (*m.mutable_communication_by_collective_s())[name] += Length(uc) * 1e-9;
    (*m.mutable_exposed_communication_by_collective_s())[name] += (Length(uc) - IntersectionLength(uc, comp)) * 1e-9;
  }
  return m;
}

v1::StepMeasurement MedianStep(const google::protobuf::RepeatedPtrField<v1::StepMeasurement>& steps) {
  v1::StepMeasurement out;
  if (steps.empty()) return out;
  auto med = [&](auto get) {
    std::vector<double> v;
    for (const auto& s : steps) v.push_back(get(s));
    std::sort(v.begin(), v.end());
    const size_t h = v.size() / 2;
    return v.size() % 2 == 1 ? v[h] : 0.5 * (v[h - 1] + v[h]);
  };
  out.set_step(-1);
  out.set_step_time_s(med([](const auto& s) { return s.step_time_s(); }));
  out.set_exposed_communication_s(med([](const auto& s) { return s.exposed_communication_s(); }));
  out.set_exposed_communication_incl_memory_s(
      med([](const auto& s) { return s.exposed_communication_incl_memory_s(); }));
  out.set_idle_s(med([](const auto& s) { return s.idle_s(); }));
  out.set_kernel_count(static_cast<int32_t>(med([](const auto& s) { return double(s.kernel_count()); })));
  auto* b = out.mutable_busy();
  b->set_gemm_s(med([](const auto& s) { return s.busy().gemm_s(); }));
  b->set_attention_s(med([](const auto& s) { return s.busy().attention_s(); }));
  b->set_communication_s(med([](const auto& s) { return s.busy().communication_s(); }));
  b->set_memory_copy_s(med([](const auto& s) { return s.busy().memory_copy_s(); }));
  b->set_elementwise_s(med([](const auto& s) { return s.busy().elementwise_s(); }));
  b->set_convolution_s(med([](const auto& s) { return s.busy().convolution_s(); }));
  for (bool exposed : {false, true}) {
    auto get_map = [exposed](const v1::StepMeasurement& s) -> const google::protobuf::Map<std::string, double>& {
      return exposed ? s.exposed_communication_by_collective_s() : s.communication_by_collective_s();
    };
    std::map<std::string, bool> colls;
    for (const auto& s : steps)
      for (const auto& [k, v] : get_map(s)) colls[k] = true;
    for (const auto& entry : colls) {
      const std::string& k = entry.first;  // not a structured binding: clang 14 cannot capture one
      const double v = med([&](const auto& s) {
        auto it = get_map(s).find(k);
        return it == get_map(s).end() ? 0.0 : it->second;
      });
      (*(exposed ? out.mutable_exposed_communication_by_collective_s()
                 : out.mutable_communication_by_collective_s()))[k] = v;
    }
  }
  return out;
}

v1::ProbeReport BuildReport(const std::vector<KernelRecord>& kernels, const std::vector<int64_t>& starts,
                            const std::string& step_source, const ReportOptions& options) {
  v1::ProbeReport r;
  r.set_step_source(step_source);
  r.set_warmup_steps(options.warmup_steps);
  r.set_kernels_seen(static_cast<int64_t>(kernels.size()));
  r.set_rank_count(1);
  const RunningIndex index(kernels);
  for (size_t i = 0; i + 1 < starts.size(); ++i) {
    if (static_cast<int>(i) < options.warmup_steps) continue;
    v1::StepMeasurement m = AnalyzeWindow(kernels, index, starts[i], starts[i + 1]);
    m.set_step(static_cast<int32_t>(i));
    *r.add_steps() = std::move(m);
  }
  if (r.steps().empty()) {
    r.add_notes(absl::StrCat("fewer than ", options.warmup_steps + 2, " step boundaries: no measured step"));
  }
  *r.mutable_median() = MedianStep(r.steps());
  return r;
}

absl::StatusOr<v1::ProbeReport> MergeRanks(const std::vector<v1::ProbeReport>& ranks) {
  if (ranks.empty()) return absl::InvalidArgumentError("no rank reports to merge");
  v1::ProbeReport out;
  out.set_rank(-1);
  out.set_rank_count(static_cast<int32_t>(ranks.size()));
  out.set_step_source(ranks[0].step_source());
  out.set_warmup_steps(ranks[0].warmup_steps());
  std::map<int32_t, std::vector<const v1::StepMeasurement*>> by_step;
  for (const auto& r : ranks) {
    out.set_kernels_seen(out.kernels_seen() + r.kernels_seen());
    out.set_records_dropped(out.records_dropped() + r.records_dropped());
    for (const auto& s : r.steps()) by_step[s.step()].push_back(&s);
    for (const auto& n : r.notes()) out.add_notes(absl::StrCat("rank ", r.rank(), ": ", n));
    if (r.cupti_taken_over()) out.set_cupti_taken_over(true);
  }
  for (const auto& [step, v] : by_step) {
    if (v.size() != ranks.size()) continue;
    const v1::StepMeasurement* slowest = *std::max_element(
        v.begin(), v.end(), [](const auto* x, const auto* y) { return x->step_time_s() < y->step_time_s(); });
    *out.add_steps() = *slowest;
  }
  if (out.steps().empty()) return absl::FailedPreconditionError("the ranks share no measured step");
  *out.mutable_median() = MedianStep(out.steps());
  return out;
}

std::vector<v1::ProbeReport> OneReportPerRank(const std::vector<v1::ProbeReport>& reports) {
  std::map<int32_t, const v1::ProbeReport*> best;
  for (const v1::ProbeReport& r : reports) {
    if (r.kernels_seen() == 0 && r.steps().empty()) continue;
    auto [it, inserted] = best.try_emplace(r.rank(), &r);
    if (inserted) continue;
    const v1::ProbeReport* b = it->second;
    if (r.steps_size() > b->steps_size() ||
        (r.steps_size() == b->steps_size() && r.kernels_seen() > b->kernels_seen())) {
      it->second = &r;
    }
  }
  std::vector<v1::ProbeReport> out;
  for (const auto& [rank, r] : best) out.push_back(*r);
  return out;
}

}  // namespace stepcast::probe
