#include "core/step_time.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/gemm_model.h"
#include "core/memory.h"

namespace stepcast {
namespace {

// Time of some work and how it splits by limiting resource.
struct Work {
  double time_s = 0;
  double compute_s = 0;  // compute-bound part
  double memory_s = 0;   // memory-bound part
  double intra_s = 0;    // network, inside a node
  double inter_s = 0;    // network, across nodes
  double flops = 0;
  double bytes = 0;

  void Roofline(double f, double b, double rate, double bw) {
    const double tc = f / rate, tm = b / bw;
    flops += f;
    bytes += b;
    if (tc >= tm) {
      time_s += tc;
      compute_s += tc;
    } else {
      time_s += tm;
      memory_s += tm;
    }
  }
  // A GEMM (or several) timed by the GEMM shape model.
  void Gemm(const GemmEstimate& e, double count, double f, double b) {
    const double t = e.time_s * count;
    flops += f;
    bytes += b;
    time_s += t;
    (e.bound == GemmBound::kMemory ? memory_s : compute_s) += t;
  }
  void Bytes(double b, double bw) { BytesIn(b, b / bw); }
  // `b` bytes that take `t` seconds at the HBM rate (t computed once for several Works).
  void BytesIn(double b, double t) {
    bytes += b;
    time_s += t;
    memory_s += t;
  }
  void Comm(double t, Scope scope) {
    time_s += t;
    (scope == Scope::kIntraNode ? intra_s : inter_s) += t;
  }
  // Compute slowed by communication running beside it (OverlapCost::contention_s): compute.
  void Contention(double t) {
    time_s += t;
    compute_s += t;
  }
  // Host-bound time (kernel launches): counted as compute in the split.
  void Host(double t) {
    time_s += t;
    compute_s += t;
  }
  Work& operator+=(const Work& o) {
    time_s += o.time_s; compute_s += o.compute_s; memory_s += o.memory_s;
    intra_s += o.intra_s; inter_s += o.inter_s; flops += o.flops; bytes += o.bytes;
    return *this;
  }
  Work Scaled(double k) const {
    Work w = *this;
    w.time_s *= k; w.compute_s *= k; w.memory_s *= k; w.intra_s *= k; w.inter_s *= k;
    w.flops *= k; w.bytes *= k;
    return w;
  }
  // Keeps only `exposed` seconds of communication (the rest hidden under compute).
  void ExposeComm(double exposed) {
    const double total = intra_s + inter_s;
    if (total <= 0) return;
    const double k = std::clamp(exposed / total, 0.0, 1.0);
    time_s -= (1 - k) * total;
    intra_s *= k;
    inter_s *= k;
  }
};

// Forward work of the parts of a layer that selective recompute can rerun
// (Megatron-Core --recompute-modules names; docs/MODEL.md "Recomputation").
struct ModuleForward {
  Work core_attn, mlp, mlp_up, moe_act, layernorm, mla_up_proj, moe, shared_experts, activation_functions;
  Work every_second_mm;  // the even-numbered GEMMs of the block in forward order (torchtitan op SAC)
  Work mlp_act;  // the MLP's activation function: inside mlp / mlp_up and activation_functions
};

// Everything one layer (or the logits) costs per micro-batch, by term.
struct LayerCost {
  Work gemm_fwd, gemm_bwd, attn_fwd, attn_bwd, elem_fwd, elem_bwd;
  Work tp_fwd, tp_bwd, cp, ep_fwd, ep_bwd, launch;
  // One direction's EP all-to-all (dispatch + combine) and ETP gather/scatter before any overlap
  // (the schedule may overlap them differently: DualPipe, in StepModel::Run).
  double ep_a2a_s = 0, ep_etp_s = 0;
  // The dispatch's part of ep_a2a_s (the rest is the combine's; they differ when the dispatch
  // is fp8: deepep-fp8).
  double ep_dispatch_s = 0;
  // The compute-stream time before the dispatch, forward and backward: Megatron-Core's
  // pre_dispatch_computation (models/gpt/fine_grained_callables.py @d98e8a6: attention, the
  // pre-MLP norm, the shared experts, the router, the dispatcher's preprocess), which its EP
  // overlap runs beside the combine (StepModel::DualPipeExposeEp). The rest of the layer's
  // compute is its MLP's (experts, activation, the MLP's residual add).
  double pre_dispatch_fwd_s = 0, pre_dispatch_bwd_s = 0;
  // The launch floor's backward (StepModel::LaunchFloor), kept for recomputation, which the layer
  // costs do not read (StepModel::RecomputeLaunchDelta applies it): the host and GPU seconds it
  // compared, and the host seconds a recomputed forward adds to the backward: the whole forward's
  // launches (full recomputation) and the MoE block's (selective `moe`). launch_less_dense: `launch`
  // is this layer's floor less the dense layer's (a hybrid's MoE layer; StepModel::Layers).
  struct LaunchBackward {
    double host_s = 0, gpu_s = 0, rec_full_host_s = 0, rec_moe_host_s = 0;
  } launch_bwd;
  bool launch_less_dense = false;
  double launch_pair_s = 0;  // with launch_less_dense: the pair's floor, before the dense layer's is taken off
  ModuleForward module;
  Work Forward() const {
    Work w = gemm_fwd; w += attn_fwd; w += elem_fwd; w += tp_fwd; w += ep_fwd; return w;
  }
};

// A GEMM shape as the memo below tells shapes apart: the bits of its doubles (a +0/-0 pair would
// take two entries, each with its own estimate), its dtype and accumulation mode.
struct GemmMemoKey {
  uint64_t m, n, k, batch, c, dtype_split;
  static GemmMemoKey Of(DType dtype, double batch, double m, double n, double k, bool split, double c_bytes,
                        bool mx, bool row = false) {
    return {std::bit_cast<uint64_t>(m),       std::bit_cast<uint64_t>(n),
            std::bit_cast<uint64_t>(k),       std::bit_cast<uint64_t>(batch),
            std::bit_cast<uint64_t>(c_bytes),
            static_cast<uint64_t>(dtype) << 3 | static_cast<uint64_t>(row) << 2 | static_cast<uint64_t>(mx) << 1 |
                static_cast<uint64_t>(split)};
  }
  GemmShape Shape() const {
    return {static_cast<DType>(dtype_split >> 3), std::bit_cast<double>(batch), std::bit_cast<double>(m),
            std::bit_cast<double>(n),           std::bit_cast<double>(k),     (dtype_split & 1) != 0,
            std::bit_cast<double>(c),           (dtype_split & 2) != 0,         (dtype_split & 4) != 0};
  }
  // Folded bits (a double's information is in its top ~24 bits, so each is rotated to its own
  // place first): OpenMemo takes the slot from the top bits of one multiply.
  uint64_t Bits() const {
    return std::rotl(m, 24) ^ std::rotl(n, 48) ^ k ^ std::rotl(batch, 12) ^ std::rotl(c, 36) ^ dtype_split;
  }
  bool operator==(const GemmMemoKey&) const = default;
};
struct GemmMemoEntry {
  GemmEstimate estimate;
  bool modelled = false;  // the GEMM model estimated it (false: it refused the shape)
  bool plain = false;     // modelled and not extrapolated: nothing to do but return it
};

// A linear layer's three GEMMs (StepModel::Gemm: forward m x n x k, dgrad m x k x n, wgrad
// n x k x m accumulating into the gradient dtype), told apart by the job's GEMM dtype, m, n, k and
// the gradient's bytes per element.
struct GemmPassesKey {
  uint64_t m, n, k, grad_bytes, dtype;
  uint64_t Bits() const { return std::rotl(m, 24) ^ std::rotl(n, 48) ^ k ^ std::rotl(grad_bytes, 12) ^ dtype; }
  bool operator==(const GemmPassesKey&) const = default;
};
struct GemmPassesEntry {
  GemmEstimate fwd, dgrad, wgrad;
};

// An open-addressed table of GEMM estimates: a prediction asks for up to ~40 distinct shapes (the
// forward, dgrad and wgrad of every linear layer, the split GEMMs of TP overlap; dense and MoE
// layers share their attention projections), most of them several times, and a linear scan of
// them had cost more than the estimates. kSlots a power of two and a multiple of 64; kept at most
// 3/4 full (short probes), emptied when a new key would pass that; entries are left
// uninitialized until used.
template <typename Key, typename Entry, uint32_t kSlots>
class OpenMemo {
 public:
  static_assert((kSlots & (kSlots - 1)) == 0 && kSlots % 64 == 0);
  OpenMemo() {}
  OpenMemo(const OpenMemo&) = delete;
  OpenMemo& operator=(const OpenMemo&) = delete;
  // The entry of `key`, or nullptr; then `*slot` is the free slot where the probe ended, where
  // Add(key, *slot) puts the key without hashing and probing again.
  const Entry* Find(const Key& key, uint32_t* slot) const {
    for (uint32_t i = Home(key);; i = (i + 1) & (kSlots - 1)) {
      if (!(used_[i / 64] >> (i % 64) & 1)) {  // the table is never full: this ends
        *slot = i;
        return nullptr;
      }
      if (keys_[i] == key) return &entries_[i].entry;
    }
  }
  // A new entry for `key` (not in the table), value-initialized, to be filled by the caller, at
  // `slot`: what Find(key, &slot) gave, with no Add to this table since. May empty the table
  // first: an entry found earlier is valid only until the next Add.
  Entry* Add(const Key& key, uint32_t slot) {
    uint32_t i = slot;
    if (count_ >= kSlots * 3 / 4) {
      used_.fill(0);
      count_ = 0;
      i = Home(key);  // the empty table's probe ends at once
    }
    used_[i / 64] |= uint64_t{1} << (i % 64);
    ++count_;
    keys_[i] = key;
    return new (&entries_[i].entry) Entry{};
  }

 private:
  static uint32_t Home(const Key& key) {
    const uint64_t x = key.Bits();
    return static_cast<uint32_t>(((x ^ (x >> 29)) * 0x9E3779B97F4A7C15ull) >> (64 - std::countr_zero(kSlots)));
  }
  union Slot {
    Slot() {}
    Entry entry;
  };
  Key keys_[kSlots];  // keys_[i]: the key of entries_[i] (when used)
  Slot entries_[kSlots];
  std::array<uint64_t, kSlots / 64> used_{};  // bit i: entries_[i] holds an entry
  uint32_t count_ = 0;
};
using GemmMemo = OpenMemo<GemmMemoKey, GemmMemoEntry, 128>;
// Only the passes whose three estimates are plain (GemmMemoEntry::plain) are kept.
using GemmPassesMemo = OpenMemo<GemmPassesKey, GemmPassesEntry, 64>;

// A GEMM model and the estimates it made on this thread (its memo outlives a prediction: every
// estimate depends only on the model and the shape).
struct ThreadGemm {
  explicit ThreadGemm(GemmModel m) : model(std::move(m)) {}
  GemmModel model;
  GemmMemo memo;
  GemmPassesMemo passes;
};

// The GEMM model (GemmModel::Create, default constants) of `hw` and `profile` with its memo of
// estimates: one of the last kThreadGemmModels built on this thread when every input Create
// reads is unchanged, else a new one in place of the least recently used (nullptr when the
// inputs are refused). A prediction would otherwise rebuild the same model each time (a measured
// per-shape table makes that the costliest step of a prediction) and re-estimate the same shapes
// (~290 instructions each, 20-40 shapes a prediction); keeping several lets jobs on different
// GPUs or profiles alternate on one thread (a service's requests, a corpus of jobs) without
// rebuilding the model and emptying its memo at every change.
constexpr int kThreadGemmModels = 4;
std::shared_ptr<ThreadGemm> ThreadGemmModel(const Hardware& hw, const RateProfile& profile) {
  struct Point {
    DType dtype;
    int64_t m, n, k;
    double flops_per_s;
    bool operator==(const Point&) const = default;
  };
  struct Key {
    int64_t sm_count = -1;
    double hw_hbm = 0, profile_hbm = 0;
    double fp8_split = 0;  // profile.fp8_split_accumulation_fraction
    std::array<double, 5> peaks{};
    std::vector<Point> gemm;
  };
  struct Cached {
    Key key;
    std::shared_ptr<ThreadGemm> model;
  };
  // Most recently used first.
  thread_local std::array<Cached, kThreadGemmModels> cache;
  const std::array<double, 5> peaks = {hw.peak_bf16_flops_per_s, hw.peak_fp16_flops_per_s, hw.peak_fp8_flops_per_s,
                                       hw.peak_tf32_flops_per_s, hw.peak_fp32_flops_per_s};
  auto same = [&](const Cached& c) {
    const Key& key = c.key;
    if (c.model == nullptr || key.sm_count != hw.sm_count || key.hw_hbm != hw.hbm_bandwidth_bytes_per_s ||
        key.profile_hbm != profile.hbm_bandwidth_bytes_per_s ||
        key.fp8_split != profile.fp8_split_accumulation_fraction || key.peaks != peaks ||
        key.gemm.size() != profile.gemm.size()) {
      return false;
    }
    for (size_t i = 0; i < profile.gemm.size(); ++i) {
      const GemmRatePoint& g = profile.gemm[i];
      if (!(key.gemm[i] == Point{g.dtype, g.m, g.n, g.k, g.flops_per_s})) return false;
    }
    return true;
  };
  if (same(cache[0])) return cache[0].model;
  for (int i = 1; i < kThreadGemmModels; ++i) {
    if (same(cache[i])) {
      std::rotate(cache.begin(), cache.begin() + i, cache.begin() + i + 1);  // to the front
      return cache[0].model;
    }
  }
  absl::StatusOr<GemmModel> gm = GemmModel::Create(hw, profile);
  if (!gm.ok()) return nullptr;
  Key key{hw.sm_count, hw.hbm_bandwidth_bytes_per_s, profile.hbm_bandwidth_bytes_per_s,
          profile.fp8_split_accumulation_fraction, peaks, {}};
  key.gemm.reserve(profile.gemm.size());
  for (const GemmRatePoint& g : profile.gemm) key.gemm.push_back({g.dtype, g.m, g.n, g.k, g.flops_per_s});
  std::rotate(cache.begin(), cache.end() - 1, cache.end());  // the least recently used to the front
  cache[0].key = std::move(key);
  cache[0].model = std::make_shared<ThreadGemm>(*std::move(gm));
  return cache[0].model;
}

bool AllOn(const Job& job) {
  const ModelChoices& c = job.choices;
  return c.framework_attention_rates && c.elementwise_traffic_factor && c.cross_entropy_bytes &&
         c.overlap_efficiency && c.launch_floor && c.fsdp_semantics && c.ep_overlap_default_off && c.expert_bias_eager &&
         c.expert_clamp_eager && c.scaled_rope_eager && c.userbuffers_as_run &&
         c.embedding_lookup_matmul && c.attention_shape_rates && c.cp_ring_merge && c.input_embedding &&
         c.moe_router_kernels && c.host_overhead_ratio && c.expert_gemm_calls &&
         job.profile.overlaps.empty();
}

// The host cost per kernel of the eager PyTorch presets before 2026-11-28 (fifth session), what
// ModelChoices.launch_floor off restores: 5 us, taken between the cudaLaunchKernel API median
// (3.3 us) and one aten elementwise op's host time (8.5-9 us) in an H100 inference trace
// (tests/data/real_data/traces/tracelens/h100_qwen1.5-0.5b_inference.json.gz; the former
// megatron-core preset's source). The trace's 42 us replaced it after S26's rows raised the question.
constexpr double kFormerHostCostPerKernelS = 5e-6;

// The framework as the model uses it under the job's ModelChoices.
Framework Effective(const Job& job) {
  Framework f = job.framework;
  const ModelChoices& c = job.choices;
  if (!c.framework_attention_rates) f.attention.rates.clear();
  if (!c.elementwise_traffic_factor) f.elementwise_traffic_factor = 1;
  if (!c.cross_entropy_bytes) f.cross_entropy_bytes_per_logit = 0;
  // A mechanism reduced to the legacy single efficiency (ablation, or a measured efficiency).
  auto legacy = [](OverlapMechanism* m, double efficiency) {
    const bool supported = m->supported;
    *m = OverlapMechanism{};
    m->supported = supported;
    m->efficiency = efficiency;
  };
  if (!c.overlap_efficiency) {
    // Ablation: every supported mechanism hides all it can, and compute beside it is not slowed.
    for (OverlapMechanism* m : {&f.overlap.tp_comm, &f.overlap.dp_grad_reduce, &f.overlap.dp_param_gather,
                                &f.overlap.fsdp_param_gather, &f.overlap.pp_p2p, &f.overlap.cp_ring,
                                &f.overlap.ep_all_to_all, &f.overlap.tp_comm_backward}) {
      if (m->supported) legacy(m, 1);
    }
  }
  if (!c.ep_overlap_default_off &&
      (f.name == "megatron-core" || f.name == "nemo" || f.name == "megatron-bridge")) {
    // The earlier preset (before 2026-11-25, docs/validation_informed.yaml): EP all-to-all
    // overlapped at 0.6 for every Megatron-Core family job.
    legacy(&f.overlap.ep_all_to_all, 0.6);
    f.overlap.ep_all_to_all.supported = true;
  }
  if (!c.launch_floor && f.launch.kernel_launch_overhead_s > kFormerHostCostPerKernelS) {
    // The host cost per kernel an eager preset had before the DeepSeek-V3 trace's measurement
    // (docs/validation_informed.yaml, S26): the same figure for the launches its code issues and
    // for those of Transformer Engine's per-expert loop, which had no figure of their own.
    f.launch.kernel_launch_overhead_s = kFormerHostCostPerKernelS;
    f.launch.looped_launch_overhead_s = kFormerHostCostPerKernelS;
  }
  // A per-expert GEMM at the bare launch call's cost (gemm_call_overhead_s 0), as before
  // 2026-11-30: with expert_gemm_calls off, and with launch_floor off, which restores those costs.
  if (!c.expert_gemm_calls || !c.launch_floor) f.launch.gemm_call_overhead_s = 0;
  if (!c.expert_bias_eager) f.expert_bias_eager = false;
  if (!c.expert_clamp_eager) f.expert_clamp_eager = false;
  if (!c.scaled_rope_eager) f.scaled_rope_eager = false;
  if (!c.embedding_lookup_matmul) f.embedding_lookup_matmul = false;
  if (!c.input_embedding) f.dense_embedding_grad = false;
  if (!c.moe_router_kernels) {
    // The preprocess split of kernels_before_sync stays: it is that count's own decomposition.
    f.launch.moe.group_limited_router_kernels = 0;
    f.launch.moe.fused_router_kernels = 0;
    f.launch.moe.flex_fused_router_kernels_before_sync = 0;
  }
  if (!c.userbuffers_as_run) {
    f.overlap.tp_comm.compute_streams = 0;
    f.overlap.tp_comm.fp8_rs_ring_exchange = false;
  }
  if (!c.fsdp_semantics) f.sharding = ShardingModel{};
  // Overlap efficiencies measured on the cluster replace the preset's.
  for (const RateProfile::Overlap& o : job.profile.overlaps) {
    OverlapMechanism* m = o.mechanism == "tp_comm"             ? &f.overlap.tp_comm
                          : o.mechanism == "dp_grad_reduce"    ? &f.overlap.dp_grad_reduce
                          : o.mechanism == "dp_param_gather"   ? &f.overlap.dp_param_gather
                          : o.mechanism == "fsdp_param_gather" ? &f.overlap.fsdp_param_gather
                          : o.mechanism == "pp_p2p"            ? &f.overlap.pp_p2p
                          : o.mechanism == "cp_ring"           ? &f.overlap.cp_ring
                          : o.mechanism == "ep_all_to_all"     ? &f.overlap.ep_all_to_all
                                                               : nullptr;
    if (m != nullptr) legacy(m, o.efficiency);
  }
  return f;
}

}  // namespace

// The per-micro-batch costs of a dense layer, an MoE layer and the output layer (step_time.h).
// A hybrid model's "dense" layer is the mean of its Mamba, attention and MLP layers weighted by
// their counts, its MoE layer the 'E' block (the stage sums below take layers in these shares).
// One MTP depth's block (MtpBlock): a transformer's is a layer of its last layer's type (dense
// or moe, not copied); a hybrid's the layers of its hybrid_mtp_pattern, summed into `mtp`.
struct StepLayerCosts {
  LayerCost dense, moe, logits;
  // The input embedding's work (StepModel::InputEmbedding), on the single stage's cost when PP is 1
  // (with PP on the first stage, never the slowest: StepModel::LastStageExtra).
  LayerCost embedding;
  LayerCost mtp;
  bool mtp_own = false;
  // Each MTP depth's projection of [norm(h); norm(emb)] (eh_proj, 2h -> h, column-parallel;
  // Megatron-Core multi_token_prediction.py) and its two input norms; zero without MTP depths.
  LayerCost mtp_proj;
  const LayerCost& MtpBlock(bool last_layer_moe) const { return mtp_own ? mtp : last_layer_moe ? moe : dense; }
};


// Sub-layers a layer holds (StepModel::Layer): a transformer layer is attention + MLP or
// attention + MoE; a hybrid model's layer one of the four (Megatron-Core
// hybrid_layer_allocation.py Symbols M, *, -, E).
enum LayerPart : unsigned { kAttentionPart = 1, kMlpPart = 2, kMoePart = 4, kMambaPart = 8 };
constexpr unsigned kDenseLayerParts = kAttentionPart | kMlpPart;
constexpr unsigned kMoeLayerParts = kAttentionPart | kMoePart;

// into += k * c, term by term (every member of a LayerCost is additive).
void AddScaled(LayerCost& into, const LayerCost& c, double k) {
  for (auto member : {&LayerCost::gemm_fwd, &LayerCost::gemm_bwd, &LayerCost::attn_fwd, &LayerCost::attn_bwd,
                      &LayerCost::elem_fwd, &LayerCost::elem_bwd, &LayerCost::tp_fwd, &LayerCost::tp_bwd,
                      &LayerCost::cp, &LayerCost::ep_fwd, &LayerCost::ep_bwd, &LayerCost::launch}) {
    into.*member += (c.*member).Scaled(k);
  }
  into.ep_a2a_s += k * c.ep_a2a_s;
  into.ep_dispatch_s += k * c.ep_dispatch_s;
  into.ep_etp_s += k * c.ep_etp_s;
  into.pre_dispatch_fwd_s += k * c.pre_dispatch_fwd_s;
  into.pre_dispatch_bwd_s += k * c.pre_dispatch_bwd_s;
  for (auto member : {&ModuleForward::core_attn, &ModuleForward::mlp, &ModuleForward::mlp_up, &ModuleForward::moe_act,
                      &ModuleForward::layernorm, &ModuleForward::mla_up_proj, &ModuleForward::moe,
                      &ModuleForward::shared_experts, &ModuleForward::activation_functions,
                      &ModuleForward::every_second_mm, &ModuleForward::mlp_act}) {
    into.module.*member += (c.module.*member).Scaled(k);
  }
}

namespace {

// Expected number of `groups` equal groups (ranks, nodes) of an MoE layer's `experts` that hold at
// least one of a token's k distinct experts, with balanced uniform routing (k of E drawn without
// replacement, E/groups in each group): groups x (1 - prod_{i<k} (E - E/groups - i) / (E - i)).
// Shared by DeepEP's per-node dispatch and Megatron-Core's permute of the rows a rank receives.
double ExpectedGroupsReached(double experts, double groups, double k) {
  if (groups <= 1) return 1;
  if (!(experts >= k) || k <= 0) return std::min(groups, std::max(1.0, k));
  double miss = 1;  // probability that none of the k experts is in a given group
  const double per_group = experts / groups;
  for (int i = 0; i < static_cast<int>(k); ++i) miss *= std::max(0.0, (experts - per_group - i) / (experts - i));
  return groups * (1 - miss);
}

// The same count under group-limited routing (DeepSeek-V3 report Sec. 2.1.2, node-limited
// routing; Megatron-Core moe_utils.py group_limited_topk, HF n_group / topk_group): the E experts
// in `routed_groups` equal contiguous groups, a token's k experts drawn from the
// `max_routed_groups` groups of highest score, a group's score the sum of its top k /
// max_routed_groups experts' scores. Balanced (random) scores choose the groups uniformly. EP
// places experts contiguously, so:
// - each of the `parts` holds routed_groups / parts whole groups (routed_groups a multiple of
//   parts): a part is reached when one of its groups is chosen, taking each chosen group to hold
//   one of the token's experts (its top experts made its score): hypergeometric,
//   parts x (1 - C(G - G/parts, g) / C(G, g));
// - each group spans parts / routed_groups parts (parts a multiple of routed_groups): the k experts
//   uniform over the g chosen groups' g E / G experts on their g parts / G parts
//   (ExpectedGroupsReached);
// - otherwise, or without a limit, ExpectedGroupsReached over all E. Never more than that.
double ExpectedGroupsReachedLimited(double experts, double parts, double k, int64_t routed_groups,
                                    int64_t max_routed_groups) {
  const double unlimited = ExpectedGroupsReached(experts, parts, k);
  const double G = static_cast<double>(routed_groups), g = static_cast<double>(max_routed_groups);
  if (routed_groups <= 1 || max_routed_groups <= 0 || max_routed_groups >= routed_groups || parts <= 1) return unlimited;
  const int64_t n = static_cast<int64_t>(parts);
  if (static_cast<double>(n) != parts) return unlimited;
  if (routed_groups % n == 0) {
    const double per_part = G / parts;
    double none = 1;  // C(G - per_part, g) / C(G, g): no chosen group on a given part
    for (int i = 0; i < max_routed_groups; ++i) none *= std::max(0.0, (G - per_part - i) / (G - i));
    return std::min(unlimited, parts * (1 - none));
  }
  if (n % routed_groups == 0) {
    return std::min(unlimited, ExpectedGroupsReached(g * experts / G, g * parts / G, k));
  }
  return unlimited;
}

class StepModel {
 public:
  // `gemm_model`: a GEMM model built from the job's hardware and profile (GemmModel::Create),
  // or nullptr to build one. `layers_needed` false: Run() is given the layer costs, so nothing
  // only the layers use (GEMM model, parameter counts, attention rates) is prepared.
  explicit StepModel(const Job& job, const GemmModel* gemm_model = nullptr, bool layers_needed = true)
      : job_(job),
        fw_(AllOn(job) ? job.framework : fw_copy_.emplace(Effective(job))),
        m_(Resolve(job.model, m_storage_)),
        t_(job.training),
        p_(job.parallelism),
        place_(PlaceGroups(job.parallelism, job.GpusPerNode(), job.framework.expert_parallel_after_cp)) {
    bw_ = job.profile.hbm_bandwidth_bytes_per_s;
    // Under autocast, the GEMM dtype (its fp32 norm and residual traffic and the weight casts are
    // not counted: docs/MODEL.md).
    e_act_ = BytesPerElement(t_.precision.Autocast() ? t_.precision.gemm : t_.precision.params);
    e_in_ = BytesPerElement(t_.precision.gemm);
    mx_ = t_.precision.gemm == DType::kFP8 && t_.precision.fp8_recipe == Fp8Recipe::kMxfp8;
    rowwise_ = t_.precision.gemm == DType::kFP8 && t_.precision.fp8_recipe == Fp8Recipe::kRowwise;
    fp8_transpose_ = job.hardware.architecture != "blackwell";
    quantize_bw_fraction_ = Fp8QuantizeBandwidthFraction(t_.precision.fp8_recipe, !fp8_transpose_);
    // Under fp8 the attention core, the output head and the router run in the parameters' dtype.
    sixteen_bit_dtype_ = t_.precision.gemm != DType::kFP8 ? t_.precision.gemm : t_.precision.params;
    // The gradient buffer the wgrad accumulates into (Megatron's main_grad: fp32 with
    // grad_reduce_in_fp32, else the parameters' dtype; precision.grads).
    e_grad_ = BytesPerElement(t_.precision.grads);
    tokens_ = static_cast<double>(t_.micro_batch_size) * t_.seq_length / p_.cp;
    sp_ = p_.SequenceParallelOn();
    elem_factor_ = std::max(1.0, fw_.elementwise_traffic_factor);
    host_ratio_on_ = job_.choices.host_overhead_ratio;
    launch_floor_ = t_.HostLaunchesLayers() && fw_.launch.kernel_launch_overhead_s > 0 &&
                    fw_.launch.kernels_per_layer_forward > 0;
    layers_needed_ = layers_needed;
    if (!layers_needed) return;
    if (gemm_model != nullptr) {
      gm_ = gemm_model;
    } else {
      thread_gemm_ = ThreadGemmModel(job.hardware, job.profile);
      if (thread_gemm_ != nullptr) {
        gm_ = &thread_gemm_->model;
        memo_ = &thread_gemm_->memo;
        passes_ = &thread_gemm_->passes;
      }
    }
    pc_ = CountParameters(m_);
    if (t_.flash_attention) AttentionRates();
  }

  // The step from the layer costs (computed here when `layers` is nullptr).
  StepTimeEstimate Run(const StepLayerCosts* layers = nullptr);
  // One layer's per-module times (step_time.h EstimateLayerModules).
  LayerModuleTimes Modules(bool moe) {
    LayerModuleTimes out;
    modules_ = &out;
    LayerCost c;
    Layer(moe ? kMoeLayerParts : kDenseLayerParts, c);
    modules_ = nullptr;
    return out;
  }
  StepLayerCosts Layers() {
    StepLayerCosts c;
    FillLayers(c);
    return c;
  }
  // Fills freshly constructed (zero) layer costs in place: each LayerCost is over a kilobyte, so
  // they are not built and copied.
  void FillLayers(StepLayerCosts& c) {
    if (m_.Hybrid()) {
      // A hybrid: each kind of layer once, its non-MoE kinds averaged by their counts.
      const HybridLayerCounts n = m_.HybridCounts();
      const double non_moe = static_cast<double>(n.NonMoe());
      // The host launch floor is the average layer's (the host issues the kernels of a stage's
      // layers one after another: a short attention layer's launches are hidden by the long
      // Mamba or MLP layer beside it, as inside a transformer layer).
      LaunchShares dense;
      for (auto [part, count] : {std::pair<unsigned, int64_t>{kMambaPart, n.mamba}, {kAttentionPart, n.attention},
                                 {kMlpPart, n.mlp}}) {
        if (count == 0) continue;
        LayerCost one;
        Layer(part, one, /*launch_floor=*/false);
        const double w = static_cast<double>(count) / non_moe;
        AddScaled(c.dense, one, w);
        dense.Add(SharesOf(part), w);
      }
      if (non_moe > 0) LaunchFloor(kDenseLayerParts, c.dense, &dense);
      if (m_.MoeLayerCount() > 0) {
        Layer(kMoePart, c.moe, /*launch_floor=*/false);
        // An MoE layer's wait for its token counts (LaunchFloor) drains the queue the layer before
        // it filled: its floor is that of the pair, as a transformer MoE layer's is of its
        // attention and MoE halves, less the layer before's own.
        LayerCost pair = c.dense;
        pair.launch = Work{};
        AddScaled(pair, c.moe, 1.0);
        LaunchShares with_moe = non_moe > 0 ? dense : LaunchShares{};
        with_moe.Add(SharesOf(kMoePart), 1.0);
        LaunchFloor(kMoeLayerParts, pair, &with_moe);
        c.moe.launch = pair.launch;
        c.moe.launch_bwd = pair.launch_bwd;
        c.moe.launch_less_dense = non_moe > 0;
        c.moe.launch_pair_s = pair.launch.time_s;
        if (non_moe > 0) c.moe.launch.time_s = std::max(0.0, pair.launch.time_s - c.dense.launch.time_s);
        c.moe.launch.compute_s = c.moe.launch.time_s;
      }
      if (!m_.hybrid_mtp_pattern.empty()) {
        // One MTP depth: the module's layers one after another (Megatron-Core
        // MultiTokenPredictionLayer over the pattern after '/'), its launch floor that of
        // their kernels together.
        c.mtp_own = true;
        unsigned parts = 0;
        LaunchShares mtp;
        for (char k : m_.hybrid_mtp_pattern) {
          const unsigned part = k == 'M' ? kMambaPart : k == '*' ? kAttentionPart : k == '-' ? kMlpPart : kMoePart;
          LayerCost one;
          Layer(part, one, /*launch_floor=*/false);
          AddScaled(c.mtp, one, 1.0);
          parts |= part;
          mtp.Add(SharesOf(part), 1.0);
        }
        LaunchFloor(parts, c.mtp, &mtp);
      }
    } else {
      Layer(kDenseLayerParts, c.dense);
      if (m_.MoeLayerCount() > 0) Layer(kMoeLayerParts, c.moe);
    }
    Logits(c.logits);
    if (fw_.embedding_lookup_matmul) {
      EmbeddingLookupMatmul(c.embedding);
    } else if (fw_.dense_embedding_grad) {
      InputEmbedding(c.embedding);
    }
    if (job_.MtpDepths() > 0) {
      const double h = static_cast<double>(m_.hidden_size);
      Gemm(tokens_, h / p_.tp, 2 * h, c.mtp_proj);
      Elementwise(2 * 2 * e_act_ * tokens_ * h / (sp_ ? p_.tp : 1), c.mtp_proj);  // enorm, hnorm: read + write
    }
  }

 private:
  double GemmRate(double m, double n, double k, DType d) {
    const auto r = job_.profile.GemmRate(d, m, n, k);
    if (r.flat) return r.flops_per_s * WaveEfficiency(m, n, job_.hardware.sm_count);
    if (r.extrapolated && !warned_gemm_) {
      warned_gemm_ = true;
      warnings_.push_back(absl::StrCat("GEMM rate for ", DTypeName(d),
                                       " extrapolated beyond the profile's measured shapes"));
    }
    return r.flops_per_s;
  }
  // The GEMM shape model's estimate of one m x k by k x n product (batch of them), or the flat
  // profile rate when the model cannot be built. Flags extrapolation once.
  // The reference stays valid until the next call (a memo entry, or the overflow slot).
  const GemmEstimate& EstimateGemm(double m, double n, double k, double batch = 1) {
    return EstimateGemmIn(t_.precision.gemm, batch, m, n, k, false, 0);
  }
  // The same in dtype `d` with the accumulation mode, C traffic and row scaling (GemmShape); MXFP8
  // when `d` is the job's fp8 under that recipe. Memoized: in the thread's memo of the model when
  // the model is the thread's (ThreadGemmModel), else in this prediction's; a shape found with
  // nothing to flag returns at once.
  const GemmEstimate& EstimateGemmIn(DType d, double batch, double m, double n, double k, bool split,
                                     double c_bytes, bool row = false) {
    return EstimateGemmKey(GemmMemoKey::Of(d, batch, m, n, k, split, c_bytes, mx_ && d == DType::kFP8, row));
  }
  // The unfused attention core's batched QK^T / AV products: in the activations' 16-bit type
  // whatever the linear layers' GEMM dtype (Transformer Engine's fp8 covers its Linear modules;
  // UnfusedDotProductAttention runs torch.baddbmm / bmm on the bf16 q, k, v).
  const GemmEstimate& EstimateAttentionBmm(double m, double n, double k, double batch) {
    return EstimateGemmKey(GemmMemoKey::Of(sixteen_bit_dtype_, batch, m, n, k, false, 0, false));
  }
  const GemmEstimate& EstimateGemmKey(const GemmMemoKey& key) {
    uint32_t slot = 0;  // unused when found
    const GemmMemoEntry* e = memo_->Find(key, &slot);
    if (e != nullptr && e->plain) return e->estimate;
    return EstimateGemmSlow(key, e, slot);
  }
  // EstimateGemmKey for a shape not yet in the memo (`found` nullptr: `slot` is where it goes),
  // refused by the model, or extrapolated (flagged once per prediction).
  [[gnu::noinline]] const GemmEstimate& EstimateGemmSlow(const GemmMemoKey& key, const GemmMemoEntry* found,
                                                         uint32_t slot) {
    const GemmShape s = key.Shape();
    if (found == nullptr) {
      GemmMemoEntry* added = memo_->Add(key, slot);
      added->modelled = gm_ != nullptr && gm_->TryEstimate(s, &added->estimate);
      added->plain = added->modelled && !added->estimate.extrapolated();
      found = added;
    }
    if (!found->modelled) {  // the flat profile rate (job-dependent: never in the thread's memo)
      EstimateGemmFlat(s, &overflow_);
      return overflow_;
    }
    if (found->estimate.extrapolated() && !warned_gemm_) WarnGemmExtrapolated(s, found->estimate);
    return found->estimate;
  }
  void WarnGemmExtrapolated(const GemmShape& s, const GemmEstimate& e) {
    warned_gemm_ = true;
    warnings_.push_back(absl::StrCat(
        "GEMM ", static_cast<int64_t>(s.m), "x", static_cast<int64_t>(s.n), "x", static_cast<int64_t>(s.k), " ",
        DTypeName(s.dtype), ": ",
        e.dtype_borrowed       ? "rate borrowed from another dtype"
        : e.unaligned_fallback ? "unaligned shape (fallback kernel)"
                               : "outside the profile's measured shapes"));
  }
  // The flat profile rate's roofline, when the GEMM model cannot be built or refuses the shape.
  void EstimateGemmFlat(const GemmShape& s, GemmEstimate* out) {
    const double m = s.m, n = s.n, k = s.k, batch = s.batch;
    GemmEstimate& e = *out;
    e = GemmEstimate{};
    const double f = 2 * m * n * k * batch;
    const double rate = GemmRate(m, n, k, s.dtype) * Fp8ScalingRateFraction(s);
    const double b = ((m * k + k * n) * BytesPerElement(s.dtype) + m * n * e_act_) * batch;
    e.compute_s = f / rate;
    e.memory_s = b / bw_;
    e.time_s = std::max(e.compute_s, e.memory_s);
    e.bound = e.compute_s >= e.memory_s ? GemmBound::kCompute : GemmBound::kMemory;
  }
  // The forward, dgrad and wgrad estimates of a linear layer's m x k by k x n GEMM. Backward at
  // its own shapes (the calibration sweep's three passes, calibrate/gemm_shapes.h): dgrad
  // dX[m, k] = dY[m, n] W (m, k, n) and wgrad dW[n, k] = dY^T X (n, k, m), fp8 with split
  // accumulation (GemmShape::split_accumulation). The wgrad accumulates into the gradient buffer
  // across micro-batches: Megatron-Core's gradient_accumulation_fusion (TE
  // fuse_wgrad_accumulation, beta = 1) reads and writes it in the gradient dtype in the GEMM's
  // epilogue; frameworks without the fusion move at least those bytes in autograd's .grad add.
  // Memoized as one entry when all three are plain, else the three estimates in turn (their
  // warnings in that order). Valid until the next call.
  const GemmPassesEntry& GemmPasses(double m, double n, double k, DType d) {
    const bool mx = mx_ && d == DType::kFP8, row = rowwise_ && d == DType::kFP8;
    const GemmPassesKey key{std::bit_cast<uint64_t>(m), std::bit_cast<uint64_t>(n), std::bit_cast<uint64_t>(k),
                            std::bit_cast<uint64_t>(e_grad_),
                            static_cast<uint64_t>(d) << 2 | static_cast<uint64_t>(row) << 1 | static_cast<uint64_t>(mx)};
    uint32_t slot;
    if (const GemmPassesEntry* e = passes_->Find(key, &slot); e != nullptr) return *e;
    return GemmPassesSlow(key, slot, m, n, k, d);
  }
  // GemmPasses for passes not in its memo (`slot`: where Find's probe ended).
  [[gnu::noinline]] const GemmPassesEntry& GemmPassesSlow(const GemmPassesKey& key, uint32_t slot, double m,
                                                          double n, double k, DType d) {
    const bool split = d == DType::kFP8;
    bool plain = true;
    auto take = [&](const GemmEstimate& e, GemmEstimate* out) {
      *out = e;
      plain = plain && &e != &overflow_ && !e.extrapolated();
    };
    // Built in the scratch entry, then kept when all three are plain (at `slot`: the estimates
    // add to the other table only).
    GemmPassesEntry& t = passes_scratch_;
    // torchao's row-wise recipe scales the forward GEMM per row (a CUTLASS kernel) and runs the
    // two backward GEMMs per-tensor with unit scales, then rescales their outputs
    // (torchao/float8/config.py, float8_ops.py): only the forward pass is row-scaled.
    take(EstimateGemmIn(d, 1, m, n, k, false, 0, rowwise_ && d == DType::kFP8), &t.fwd);
    take(EstimateGemmIn(d, 1, m, k, n, split, 0), &t.dgrad);
    take(EstimateGemmIn(d, 1, n, k, m, split, 2 * e_grad_), &t.wgrad);
    if (!plain) return t;
    GemmPassesEntry* out = passes_->Add(key, slot);
    *out = t;
    return *out;
  }
  // Forward GEMM m x k by k x n by the GEMM shape model; backward (dgrad + wgrad: the same FLOPs
  // twice) 2x. `into` (optional) also receives the forward work, for the module it belongs to.
  void Gemm(double m, double n, double k, LayerCost& c, double count = 1, Work* into = nullptr) {
    GemmIn(t_.precision.gemm, m, n, k, c, count, into);
  }
  // A linear layer the frameworks keep in 16 bits under an fp8 job (GemmIn in sixteen_bit_dtype_):
  // the output head (Megatron-Core gpt_model.py output_layer is tensor_parallel.ColumnParallelLinear,
  // not a Transformer Engine module, so TE's fp8_autocast leaves it in bf16; torchtitan's float8
  // converter filters "output" by default) and the MoE router (router.py: a plain matmul in the
  // router dtype, fp32 or the params').
  void Gemm16(double m, double n, double k, LayerCost& c, double count = 1, Work* into = nullptr) {
    GemmIn(sixteen_bit_dtype_, m, n, k, c, count, into);
  }
  void GemmIn(DType d, double m, double n, double k, LayerCost& c, double count, Work* into) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    const GemmPassesEntry& est = GemmPasses(m, n, k, d);
    const double e_in = d == t_.precision.gemm ? e_in_ : BytesPerElement(d);
    const double f = 2 * m * n * k * count;
    const double b = ((m * k + k * n) * e_in + m * n * e_act_) * count;
    // The forward work is added to each Work that receives it (the same sums as adding one
    // forward Work to each: its other terms are zero).
    c.gemm_fwd.Gemm(est.fwd, count, f, b);
    if (into != nullptr) into->Gemm(est.fwd, count, f, b);
    c.gemm_bwd.Gemm(est.dgrad, count, f, ((m * n + n * k) * e_in + m * k * e_act_) * count);
    c.gemm_bwd.Gemm(est.wgrad, count, f, ((n * m + m * k) * e_in + 2 * n * k * e_grad_) * count);
    if (d == DType::kFP8) {
      // The quantization of the activation input forward and of the output gradient backward,
      // by the job's FP8 recipe (Fp8QuantizeBytesPerElement), at the share of the HBM bandwidth
      // TE's quantize kernels reach (Fp8QuantizeBandwidthFraction).
      const double q = Fp8QuantizeBytesPerElement(t_.precision.fp8_recipe, e_act_, true, fp8_transpose_);
      const double cast_bw = bw_ * quantize_bw_fraction_;
      const double cast_bytes = q * m * k * count, cast_s = cast_bytes / cast_bw;
      c.elem_fwd.BytesIn(cast_bytes, cast_s);
      if (into != nullptr) into->BytesIn(cast_bytes, cast_s);
      c.elem_bwd.Bytes(q * m * n * count, cast_bw);
      // Row-wise: the backward GEMMs' outputs (dgrad m x k, wgrad n x k) rescaled afterwards
      // (float8_ops.py: output *= scale), read and written.
      if (rowwise_) c.elem_bwd.Bytes(2 * e_act_ * (m * k + n * k) * count, bw_);
      // torchao casts the k x n weight at each use (ElementwiseModel.fp8_weight_cast_every_use,
      // torchao roofline_utils.py's weight counts): forward tensorwise amax + cast (2 e + 1),
      // row-wise the cast (e + 1); backward the cast for the input gradient (e + 1), row-wise after
      // a transposed copy (2 e). Not when the weight arrives in fp8 (an fp8 all-gather).
      if (fw_.fp8_weight_cast_every_use && !t_.fp8_param_gather &&
          (t_.precision.fp8_recipe == Fp8Recipe::kTensorwise || rowwise_)) {
        const double ew = BytesPerElement(sixteen_bit_dtype_), weights = k * n * count;
        const double fwd_b = (rowwise_ ? ew + 1 : 2 * ew + 1) * weights;
        const double bwd_b = (rowwise_ ? 3 * ew + 1 : ew + 1) * weights;
        c.elem_fwd.BytesIn(fwd_b, fwd_b / cast_bw);
        if (into != nullptr) into->BytesIn(fwd_b, fwd_b / cast_bw);
        c.elem_bwd.Bytes(bwd_b, cast_bw);
      }
    }
  }
  // Forward work of `count` m x k by k x n GEMMs, not charged to any layer (Gemm charges it; the
  // module accounting of torchtitan's op SAC uses it alone).
  Work GemmForward(double m, double n, double k, double count = 1) {
    Work w;
    if (m <= 0 || n <= 0 || k <= 0) return w;
    // The forward pass as Gemm costs it (row-scaled under torchao's row-wise recipe).
    w.Gemm(EstimateGemmIn(t_.precision.gemm, 1, m, n, k, false, 0, rowwise_), count, 2 * m * n * k * count,
           ((m * k + k * n) * e_in_ + m * n * e_act_) * count);
    return w;
  }
  // Elementwise work of `bytes` forward and 2x backward, at the framework's traffic factor.
  void Elementwise(double bytes, LayerCost& c, Work* into = nullptr, Work* into2 = nullptr) {
    const double b = bytes * elem_factor_, t = b / bw_;
    c.elem_fwd.BytesIn(b, t);
    c.module.activation_functions.BytesIn(b, t);
    if (into != nullptr) into->BytesIn(b, t);
    if (into2 != nullptr) into2->BytesIn(b, t);
    c.elem_bwd.Bytes(2 * bytes * elem_factor_, bw_);
  }
  double Comm(Collective coll, const GroupPlacement& g, double size_bytes);
  // What `comm_s` of communication costs when mechanism `o` overlaps it, in `chunks` pipelined
  // pieces, with `window_s` of compute (framework.h PipelinedExposed / ContentionCost); the
  // compute beside it is slowed by the profile's measured contention of `compute` beside
  // `communication` (or the SMs the mechanism reserves). Unsupported: all exposed. Legacy
  // (no chunking): the single efficiency, no separate contention.
  OverlapCost Overlap(const OverlapMechanism& o, double comm_s, double window_s, double chunks,
                      std::string_view compute = "gemm", std::string_view communication = "nccl") const {
    if (!(comm_s > 0)) return {};
    if (!o.supported) return {comm_s, 0};
    if (!o.Structured()) return {o.Exposed(comm_s, window_s), 0};
    OverlapCost c;
    c.exposed_s = o.concurrent ? std::max(0.0, comm_s - std::max(0.0, window_s)) : PipelinedExposed(comm_s, window_s, chunks);
    const double measured = job_.profile.FindContention(compute, communication).slowdown;
    c.contention_s = ContentionCost(comm_s - c.exposed_s, o.Slowdown(measured));
    return c;
  }
  // Transformer Engine userbuffers TP overlap of one layer (comm_gemm_overlap.cpp, TE v2.9):
  // `comm_s` of TP communication, half all-gathers feeding `ag` GEMMs, half reduce-scatters of
  // `rs` GEMMs' outputs (forward shapes). Forward: each AG-fed GEMM split into TP pieces along m,
  // the first on local data (ring exchange on copy engines: exposed = max(0, C - W (n-1)/n)). Each
  // RS GEMM either split into o.chunks pieces (pipeline, the BF16 configs; the last piece's
  // reduce-scatter exposed) on o.compute_sm_fraction of the SMs for its whole duration, or, with
  // fp8 GEMMs where o.fp8_rs_ring_exchange, into TP pieces whose outputs go out on copy engines,
  // the local piece last (exposed as the AG ring), at most two pieces in flight, then a reduce
  // kernel over the TP partial outputs (bf16: reads m x n, writes m/TP x n). Backward: the dgrad
  // GEMMs of the RS layers (proj, FC2) split into TP pieces beside their ring all-gather; the rest
  // (bulk overlaps beside unsplit dgrad / wgrad GEMMs) as a concurrent window. Pieces run on
  // o.compute_streams streams (SplitGemmSeconds); they still finish in order, spread over the split
  // GEMM's time, which is what the exposure formulas assume (equal pieces over that time: the last
  // AG piece waits for the last chunk; the RS pieces' transfers follow them; with the ring's local
  // piece last the RS ring's exposure is max(0, C - W (n-1)/n) like the AG's). The splitting,
  // SM-margin and reduce costs are the
  // GEMM shape model's time of the split GEMMs minus the unsplit ones (plus the reduce's bytes at
  // the HBM rate); they, and the measured contention of the hidden part of the copy-engine and bulk
  // transfers, are the result's contention_s. The pipelined reduce-scatter's hidden part adds no
  // measured contention: its kernels run on the SMs the margin keeps from the GEMM (the margin is
  // its contention, OverlapMechanism::Slowdown).
  template <typename Shapes>
  OverlapCost UserbuffersCost(const OverlapMechanism& o, double comm_s, const Shapes& ag, const Shapes& rs,
                              bool backward) {
    OverlapCost out;
    if (!(comm_s > 0)) return out;
    const double tp = std::max<int64_t>(1, p_.tp), half = comm_s / 2;
    const double f = o.compute_sm_fraction > 0 ? o.compute_sm_fraction : 1.0;
    const double splits = o.chunks > 0 ? o.chunks : tp;
    const double streams = std::max(1, o.compute_streams);
    const double slowdown = job_.profile.FindContention("gemm", "nccl").slowdown;
    auto gemm_s = [&](double m, double n, double k) { return EstimateGemm(m, n, k).time_s; };
    // A ring of TP pieces whose first (all-gather) or last (reduce-scatter) piece is local: only
    // what outruns the other pieces' `w` seconds of GEMMs is exposed.
    auto ring_exposed = [&](double w) { return std::max(0.0, half - w * (tp - 1) / tp); };
    double w_ag = 0, w_rs = 0, penalty = 0;
    if (!backward) {
      for (const auto& g : ag) {
        const double whole = gemm_s(g.m, g.n, g.k), split = SplitGemmSeconds(gemm_s, g.m, g.n, g.k, tp, streams, 1.0);
        w_ag += split;
        penalty += split - whole;
      }
      const bool rs_ring = o.fp8_rs_ring_exchange && t_.precision.gemm == DType::kFP8;
      double reduce_s = 0;
      for (const auto& g : rs) {
        const double whole = gemm_s(g.m, g.n, g.k);
        // The P2P reduce-scatter starts piece i after piece i - 2 has finished: two in flight.
        const double split = rs_ring ? SplitGemmSeconds(gemm_s, g.m, g.n, g.k, tp, std::min(2.0, streams), 1.0)
                                     : SplitGemmSeconds(gemm_s, g.m, g.n, g.k, splits, streams, f);
        w_rs += split;
        penalty += split - whole;
        if (rs_ring && bw_ > 0) reduce_s += RingReduceScatterReduceBytes(g.m, g.n, tp, 2.0) / bw_;
      }
      const double ag_exposed = ring_exposed(w_ag);
      const double rs_exposed = rs_ring ? ring_exposed(w_rs) : PipelinedExposed(half, w_rs, splits);
      out.exposed_s = ag_exposed + rs_exposed;
      // The copy-engine halves' hidden part at the measured NCCL contention (an upper bound for
      // transfers that take no SMs); the pipelined reduce-scatter's none beyond its SM margin.
      const double ce_hidden = !job_.choices.userbuffers_as_run ? comm_s - out.exposed_s
                                                                : (half - ag_exposed) + (rs_ring ? half - rs_exposed : 0.0);
      out.contention_s = penalty + reduce_s + ContentionCost(ce_hidden, slowdown);
      return out;
    }
    // Backward: ring all-gather beside the split dgrad GEMMs of proj / FC2 (dgrad shape m x k x n).
    for (const auto& g : rs) {
      const double whole = gemm_s(g.m, g.k, g.n), split = SplitGemmSeconds(gemm_s, g.m, g.k, g.n, tp, streams, 1.0);
      w_ag += split;
      penalty += split - whole;
      // The rest of the backward GEMMs of these layers and all of the AG-fed layers' (dgrad and
      // wgrad, unsplit) are the bulk window.
      w_rs += gemm_s(g.k, g.n, g.m);
    }
    for (const auto& g : ag) w_rs += gemm_s(g.m, g.k, g.n) + gemm_s(g.k, g.n, g.m);
    const double ag_exposed = ring_exposed(w_ag);
    const double bulk_exposed = std::max(0.0, half - w_rs);
    out.exposed_s = ag_exposed + bulk_exposed;
    out.contention_s = penalty + ContentionCost(comm_s - out.exposed_s, slowdown);
    return out;
  }
  // DeepEP's normal kernels (deepseek-ai/DeepEP; DeepSeek-V3 report Sec. 3.2.2): one dispatch and
  // one combine of `tokens` local tokens of width h. Across nodes each token goes once to every
  // node that holds one of its experts (then over NVLink to the GPUs), so a rank sends
  // tokens x (remote nodes per token) x h elements through its NIC: the expected distinct nodes
  // of k of the E experts, under group-limited routing the nodes its chosen groups lie on
  // (ExpectedGroupsReachedLimited; DeepSeek-V3: 8 groups, topk_group 4: at EP 64 on 8 nodes 4
  // nodes, at EP 32 on 4 nodes 3.14 instead of 3.61); of them (n - 1)/n remote. Dispatch in fp8 (1 byte and a 4-byte scale
  // per 128) for deepep-fp8, bf16 otherwise; combine in bf16. Inside one node: an all-to-all of
  // the k copies over NVLink. Times at the profile's all-to-all rate of the EP group's scope (one
  // NIC per GPU across nodes).
  // DeepEP / HybridEP dispatch + combine of `tokens` tokens, each routed to `k` experts (EpComm:
  // top-k, times the capacity factor when the router pads), `h` wide.
  // `dispatch_s` (may be null) receives the dispatch's part.
  double DeepEpDispatchCombine(double tokens, double h, double k, double* dispatch_s = nullptr) {
    const GroupPlacement& g = place_.ep;
    const double per_node = std::max<int64_t>(1, g.members_per_node);
    const double nodes = std::max(1.0, static_cast<double>(g.size) / per_node);
    const double dispatch_b = t_.moe_dispatcher == MoeDispatcher::kDeepEPFp8 ? 1.0 + 4.0 / 128 : e_act_;
    const double combine_b = e_act_;
    if (nodes <= 1) {
      // Inside a node a token goes once to every rank holding one of its experts, not once per
      // expert (DeepEP intranode dispatch by is_token_in_rank, deep_ep/buffer.py; HybridEP by
      // sparse_to_dense_map over the node's ranks, hybrid_ep.cu @7febc6e): the expected distinct
      // ranks of its k experts (the ranks R that the permute counts, ExpectedGroupsReachedLimited),
      // at the all-to-all rate of those bytes.
      const double ranks = ExpectedGroupsReachedLimited(static_cast<double>(m_.moe.routed_experts),
                                                        static_cast<double>(g.size), k, m_.moe.routed_groups,
                                                        m_.moe.max_routed_groups);
      const double d = Comm(Collective::kAllToAll, g, tokens * ranks * h * dispatch_b);
      if (dispatch_s != nullptr) *dispatch_s = d;
      return d + Comm(Collective::kAllToAll, g, tokens * ranks * h * combine_b);
    }
    const double distinct = ExpectedGroupsReachedLimited(static_cast<double>(m_.moe.routed_experts), nodes, k,
                                                         m_.moe.routed_groups, m_.moe.max_routed_groups);
    const double remote = distinct * (nodes - 1) / nodes;
    // Comm() times an all-to-all of S bytes a rank by the S (n - k)/n of them that leave its node
    // through its NIC (k members a node, the fewest any node holds): give it the S whose share
    // leaving the node is the NIC's bytes, S = bytes x n / (n - k). (Until 2026-11-29 this was
    // n / (n - 1), from before Comm() counted only the bytes that leave the node: the NIC's bytes
    // were charged (n - k)/(n - 1) of their time, 0.89 at EP 64 on 8 nodes, 0.53 at EP 16 on 2.)
    const double n = static_cast<double>(g.size);
    const double k_local = static_cast<double>(std::clamp<int64_t>(g.min_members_per_node, 1, g.members_per_node));
    // Exact for the one-NIC rate without a measured curve (the presets); a curve measured at
    // another layout is scaled as Comm() scales it. The leave-one-source-out ablation of the
    // one-NIC rate (ModelChoices::alltoall_one_nic off) keeps the former n / (n - 1).
    const double to_s = job_.choices.alltoall_one_nic ? n / std::max(1.0, n - k_local) : n / std::max(1.0, n - 1);
    const double d = Comm(Collective::kAllToAll, g, tokens * remote * h * dispatch_b * to_s);
    if (dispatch_s != nullptr) *dispatch_s = d;
    return d + Comm(Collective::kAllToAll, g, tokens * remote * h * combine_b * to_s);
  }
  // DualPipe (DeepSeek-V3 report Sec. 3.2.1): a forward and a backward chunk run together, the
  // all-to-all of each beside the other's compute; the communication kernels keep their SMs for
  // the whole step (DeepEP's 20 of 132 on H800, Sec. 3.2.2), so the compute beside them is slowed
  // by sm / (sm - 20). Per layer: the forward's and backward's dispatch and combine behind the
  // layer's forward and backward compute together; what exceeds it is exposed. Replaces the
  // layer's ep_fwd / ep_bwd (the step's schedule decides, so it is applied by Run, not Layer).
  //
  // Megatron-Core's --overlap-moe-expert-parallel-comm (core_r0.14+, the job's overlap_ep_comm)
  // pairs the same way in the 1F1B steady state: one micro-batch's forward beside another's
  // backward; the first forward and the last backward of the step run alone, so their share
  // (1/m of each direction) stays exposed (`unpaired_share`). Its all-to-all is NCCL's (the
  // profile's measured contention) unless the dispatcher is DeepEP (the profile's contention
  // beside DeepEP; under DualPipe, or without one, its 20 SMs' share).
  void DualPipeExposeEp(const LayerCost& c, Work* ep_fwd, Work* ep_bwd, double unpaired_share = 0) const {
    *ep_fwd = Work{};
    *ep_bwd = Work{};
    const double one = c.ep_a2a_s + c.ep_etp_s;
    if (one <= 0) return;
    const double comm = 2 * one;
    // What runs beside the communication is the other micro-batch's compute stream, elementwise
    // kernels included (the modules are run whole).
    double paired_exposed = 0;
    if (p_.Schedule() == PipelineSchedule::kDualPipe) {
      // DualPipe (DeepSeek-V3 report Fig. 4): a forward and a backward chunk's attention and MLP
      // beside both chunks' dispatch and combine, as one window.
      paired_exposed = std::max(0.0, comm - (LayerFwdS(c) + LayerBwdS(c)));
    } else {
      // Megatron-Core's combined 1F1B (models/common/model_chunk_schedule_plan.py
      // TransformerLayerSchedulePlan.run @d98e8a6) runs one layer's forward beside another's
      // backward in three phases, each exposing what its communication outlasts of its compute:
      //   comm stream:  combine_bwd       | dispatch_fwd, dispatch_bwd        | combine_fwd
      //   comp stream:  pre_dispatch_fwd  | mlp_bwd, mlp_bwd_dw, mlp_fwd      | pre_dispatch_bwd
      // (pre_dispatch: attention, layernorm, shared experts, router, dispatch preprocess:
      // LayerCost::pre_dispatch_*). Each backward all-to-all is costed as its forward (as
      // `comm` = 2 x one counts them); the ETP all-gather goes with the dispatch, the
      // reduce-scatter with the combine.
      const double a_f = c.pre_dispatch_fwd_s, a_b = c.pre_dispatch_bwd_s;
      const double mlp = std::max(0.0, LayerFwdS(c) + LayerBwdS(c) - a_f - a_b);
      const double dispatch = c.ep_dispatch_s + c.ep_etp_s / 2, combine = one - dispatch;
      paired_exposed = std::max(0.0, combine - a_f) + std::max(0.0, 2 * dispatch - mlp) + std::max(0.0, combine - a_b);
    }
    const double exposed = paired_exposed * (1 - unpaired_share) + comm * unpaired_share;
    const double sms = job_.hardware.sm_count > 0 ? static_cast<double>(job_.hardware.sm_count) : 132.0;
    // DeepEP under DualPipe (DeepSeek's own stack): its GEMMs are launched on the SMs DeepEP
    // leaves (DeepGEMM's num_sms; the DeepSeek-V3 trace's GEMMs run on 112 of 132 SMs and only
    // 1.05x as long beside DeepEP, docs/TRACES.md "Contention"), so the cost is the 20 SMs' share,
    // sms / (sms - 20) - 1. Beside Megatron-Core's EP overlap the GEMMs take every SM (TE sets no
    // SM margin by default): the profile's measured contention beside DeepEP's footprint, where
    // it has one.
    const RateProfile::ContentionLookup deepep = job_.profile.FindContention("gemm", "deepep");
    const bool sm_partitioned = p_.Schedule() == PipelineSchedule::kDualPipe || !deepep.found;
    const double measured = t_.moe_dispatcher == MoeDispatcher::kAllToAll
                                ? job_.profile.FindContention("gemm", "nccl").slowdown
                            : sm_partitioned ? sms / std::max(1.0, sms - kDeepEpSms) - 1
                                             : deepep.slowdown;
    const double slowdown = fw_.overlap.ep_all_to_all.Slowdown(measured);
    const double contention = ContentionCost(comm - exposed, slowdown);
    for (Work* w : {ep_fwd, ep_bwd}) {
      w->Comm(exposed / 2 * c.ep_a2a_s / one, place_.ep.scope);
      w->Comm(exposed / 2 * c.ep_etp_s / one, place_.etp.scope);
      w->Contention(contention / 2);
    }
  }
  // DeepEP's normal kernels' SMs by default (deepseek-ai/DeepEP deep_ep/buffer.py Buffer.num_sms
  // = 20; DeepSeek-V3 report Sec. 3.2.2: "only 20 SMs" for communication on the H800).
  static constexpr double kDeepEpSms = 20;
  // The share of the s x s score blocks a fused, block-skipping attention kernel computes: 1/2 for
  // causal attention; a sliding window of W tokens visits (W (W + 1)/2 + (s - W) W) / s keys per
  // query (each query its last min(i, W) keys), a chunked window (Llama 4's iRoPE layers)
  // (W + 1)/2, divided by s; global layers (every global_attention_every-th) keep 1/2
  // (FlashAttention-2/3 window_size skips the masked blocks: Dao-AILab/flash-attention "sliding
  // window (local) attention", v2.3). Not for unfused attention, which computes the whole score
  // matrix. `local`: the local layers' share; `local_fraction`: their fraction of the layers (0
  // without a window, or with a window as long as the sequence).
  struct KeyShares {
    double local = 0.5, local_fraction = 0;
  };
  KeyShares LayerKeyShares() const {
    const double s = static_cast<double>(t_.seq_length), w = static_cast<double>(m_.local_attention_window);
    if (w <= 0 || w >= s || m_.layers <= 0) return {};
    KeyShares k;
    k.local = m_.local_attention_kind == LocalAttentionKind::kChunked ? (w + 1) / 2 / s
                                                                      : (w * (w + 1) / 2 + (s - w) * w) / (s * s);
    k.local_fraction = static_cast<double>(m_.LocalAttentionLayerCount()) / static_cast<double>(m_.layers);
    return k;
  }
  // Chunks of one overlapped operation over a group of `group` ranks (framework.proto
  // OverlapMechanism.chunks / chunks_per_group_rank).
  static double OpChunks(const OverlapMechanism& o, int64_t group) {
    return std::max(1.0, static_cast<double>(std::max(1, o.chunks))) *
           (o.chunks_per_group_rank ? static_cast<double>(std::max<int64_t>(1, group)) : 1.0);
  }
  // Add one layer's (one output layer's) per-micro-batch costs to `c`, which starts at zero:
  // the sub-layers in `parts` (LayerPart bits). The steps below, in this order; without
  // `launch_floor` the caller adds the host launch floor (a hybrid's, over its layer mix).
  void Layer(unsigned parts, LayerCost& c, bool launch_floor = true);
  // A forward GEMM of the layer, m x n x k (for Transformer Engine userbuffers' chunking).
  struct LayerGemmShape {
    double m, n, k;
  };
  // What Layer()'s steps share: the GEMMs beside the TP collectives, those fed by an all-gather
  // (QKV, FC1) and those whose output is reduce-scattered (proj, FC2); the layer's dimensions
  // (tokens T, hidden h, TP t, heads a, KV heads kv, head dims dqk / dv, micro-batch b, the
  // per-CP-rank sequence sq); the forward / backward time of the attention part and its GEMMs.
  struct LayerScratch {
    absl::InlinedVector<LayerGemmShape, 3> tp_ag_gemms, tp_rs_gemms;
    double T = 0, h = 0, t = 0, a = 0, kv = 0, dqk = 0, dv = 0;
    bool gated = false;
    int fm = 2;
    double b = 0, sq = 0;
    double attn_part_f = 0, attn_part_b = 0, attn_gemm_f = 0, attn_gemm_b = 0;
    // An MoE block's compute before its dispatch (router GEMM and passes, latent fc1, shared
    // experts, the all-to-all's permute), forward and backward: LayerCost::pre_dispatch_fwd_s / _bwd_s.
    double moe_pre_dispatch_f = 0, moe_pre_dispatch_b = 0;
  };
  static double LayerFwdS(const LayerCost& c) { return c.gemm_fwd.time_s + c.attn_fwd.time_s + c.elem_fwd.time_s; }
  static double LayerBwdS(const LayerCost& c) { return c.gemm_bwd.time_s + c.attn_bwd.time_s + c.elem_bwd.time_s; }
  // QKV (or MLA down / up) and output projections: GEMMs by the shape model, DeepSeek-V2 Sec.
  // 2.1 and Megatron-Core multi_latent_attention.py for MLA's TP split.
  void AttentionProjections(LayerCost& c, LayerScratch& s);
  // Attention core: a fused kernel's roofline at the measured attention rate (causal half), or
  // batched QK^T / AV GEMMs plus scale-mask-softmax and dropout bytes.
  void AttentionCore(LayerCost& c, LayerScratch& s);
  // An MoE layer's router, routed and shared experts, activations, routing and permute bytes
  // (Megatron-Core router.py / token_dispatcher.py, TE permutation.py).
  void MoeBlock(LayerCost& c, LayerScratch& s);
  // A dense layer's MLP GEMMs and activation (torchtitan FeedForward for the SAC module split).
  void DenseMlp(LayerCost& c, LayerScratch& s);
  // A hybrid's Mamba-2 mixer as Megatron-Core trains it (megatron/core/ssm/mamba_mixer.py
  // forward / _ssm_training, use_mamba_mem_eff_path on by default): in_proj and out_proj GEMMs,
  // the layout copies around mamba_split_conv1d_scan_combined, its causal conv and the SSD
  // chunk scan's batched matmuls (state-spaces/mamba mamba_ssm/ops/triton/ssd_combined.py), the
  // gated RMSNorm.
  void MambaMixer(LayerCost& c, LayerScratch& s);
  // Norms, residual adds, dropout masks and RoPE (MLA's query/key assembly) as memory-bound
  // bytes; the attention / MLP split of the layer's time into modules_.
  void NormsAndElementwise(unsigned parts, LayerCost& c, const LayerScratch& s);
  // TP all-gather / reduce-scatter (or all-reduce), overlapped as the framework's mechanism does
  // (Megatron-LM 2022; TE userbuffers).
  void TpComm(unsigned parts, LayerCost& c, const LayerScratch& s);
  // CP ring exchange of K and V behind the attention core (TE context_parallel.py p2p).
  void CpComm(LayerCost& c, const LayerScratch& s);
  // MoE dispatch / combine over EP and ETP (Megatron-Core MoEAlltoAllTokenDispatcher, DeepEP).
  void EpComm(bool moe, LayerCost& c, const LayerScratch& s);
  // The communication part of modules_ (EstimateLayerModules).
  void FillModuleComm(bool moe, const LayerCost& c);
  // A layer's launch shares (LaunchFloor): of a transformer layer's kernels_per_layer_forward, the
  // share it launches, the share partial CUDA graphs capture (TrainingConfig::cuda_graph_scope) and
  // the graph launches that replace those, one a captured part, forward and backward each.
  struct LaunchShares {
    double kernels = 0, captured = 0, graphs = 0;
    void Add(const LaunchShares& o, double w) {
      kernels += o.kernels * w;
      captured += o.captured * w;
      graphs += o.graphs * w;
    }
  };
  // Host launch floor of an eager framework (framework preset's kernels per layer x launch
  // overhead; an MoE layer adds its block's launches and may wait for the GPU once per forward).
  // `shares`: the layer's launch shares (a hybrid's averaged kinds); nullptr: SharesOf(parts).
  void LaunchFloor(unsigned parts, LayerCost& c, const LaunchShares* shares = nullptr);
  // What recomputation adds to a layer's launch floor (LayerCost::launch_bwd above): the
  // backward's host holds the recomputed forward's launches too and its GPU the recomputed work
  // `recomputed_gpu_s`; `share` of the layers recomputed (full recomputation of
  // recompute_num_layers).
  double RecomputeLaunchDelta(const LayerCost& c, double recomputed_gpu_s, double share) const;
  // The shares of `parts`: each half (attention, MLP, the MoE block's dense part) 0.5 of the
  // kernels, a Mamba layer 1 (LaunchShare), captured as the graphed parts say (moe or moe_router
  // the MoE block's dense part; moe_preprocess one more graph launch).
  LaunchShares SharesOf(unsigned parts) const {
    const TrainingConfig::CudaGraphScope g = t_.GraphedParts();
    LaunchShares s;
    s.kernels = LaunchShare(parts);
    for (auto [part, half, graphed] : {std::tuple<unsigned, double, bool>{kAttentionPart, 0.5, g.attn},
                                       {kMlpPart, 0.5, g.mlp},
                                       {kMoePart, 0.5, g.moe || g.moe_router},
                                       {kMambaPart, 1.0, g.mamba}}) {
      if ((parts & part) && graphed) {
        s.captured += half;
        s.graphs += 1;
      }
    }
    if ((parts & kMoePart) && g.moe_preprocess) s.graphs += 1;
    return s;
  }
  // A layer's share of a transformer layer's kernels: a hybrid's attention, MLP or MoE layer
  // half (the preset's count is both halves'), its Mamba layer all of it (LaunchFloor).
  static double LaunchShare(unsigned parts) {
    return parts == kDenseLayerParts || parts == kMoeLayerParts || (parts & kMambaPart) ? 1.0 : 0.5;
  }
  // What Run()'s steps share: micro-batches m, pp, vpp v, the slowest stage's layers and MoE
  // share, and per micro-batch of that stage the work by term (forward and backward apart where
  // the bubble and the DP overlap windows read them), the last stage's extra work, the average
  // stage's time.
  struct RunScratch {
    double m = 0, pp = 0, v = 0, layers_per_stage = 0, moe_frac = 0;
    bool uneven = false, last_is_slowest = true;
    int64_t mtp_layers = 0;
    Work gemm_f, gemm_b, attn_f, attn_b, elem_f, elem_b, gemm, attn, elem, tp, cp, ep, launch, recompute, pp_comm;
    Work last_extra_gemm, last_extra_elem, last_extra_tp, last_extra_attn, last_extra_ep;
    // The MTP blocks' launch floor (an eager framework launches their kernels as a layer's).
    Work last_extra_launch;
    Work stage_common, last_extra;
    double stage_avg_s = 0;
  };
  // What the DP steps of Run() share: the local parameter counts, grad-reduce and param-gather
  // bytes per element, HSDP replicas, the sharding group, the dense and expert DP groups, the
  // HSDP replica all-reduce time, one micro-batch's backward / forward time (the overlap
  // windows), and the exposed and contention seconds summed so far.
  struct DpScratch {
    LocalParameters local;
    double eg = 0, e_gather = 0;
    int64_t replicas = 1, shard = 1;
    GroupPlacement dense_group, expert_group;
    GroupPlacement replica_group;  // HSDP: the replicas of one shard
    double replica_bytes = 0;      // HSDP: the gradient shard all-reduced across the replicas
    double bwd_mb_s = 0, fwd_mb_s = 0, exp_s = 0, contention_s = 0;
  };
  // Layers of the slowest stage, even split: ceil(layers / (pp * vpp)) per chunk (Megatron-Core
  // chunk assignment), warning when uneven.
  void ChunkLayers(RunScratch& r);
  // Uneven first / last stage (Megatron-Core --decoder-first/last-pipeline-num-layers): which
  // stage is the slowest, and its layers.
  void SlowestStage(const StepLayerCosts& layers, RunScratch& r);
  // Per micro-batch work of the slowest stage's layers by term, the EP overlap with another
  // micro-batch (DeepSeek-V3 DualPipe) and the recomputation (full or selective, Korthikanti et
  // al. 2022).
  void StageSums(const StepLayerCosts& layers, RunScratch& r);
  // PP send/recv of the activations, its overlap in the interleaved schedule's steady state
  // (Megatron-Core schedules.py).
  void PipelineComm(RunScratch& r);
  // The last stage's output layer, loss and MTP modules (DeepSeek-V3 report Sec. 2.2); the
  // stage sums and the average stage's time.
  void LastStageExtra(const StepLayerCosts& layers, RunScratch& r);
  // Per-step breakdown of the stage terms and the pipeline bubble per schedule (DeepSeek-V3
  // report Table 2; Narayanan et al. 2021 Sec. 2.2; Qi et al. 2023).
  void StageBreakdown(const RunScratch& r, StepBreakdown& br);
  // Dense and expert DP group collective of `c` on the given bytes.
  double DpReduce(const DpScratch& d, Collective c, double dense_bytes, double expert_bytes) {
    return Comm(c, d.dense_group, dense_bytes) + Comm(c, d.expert_group, expert_bytes);
  }
  // `size_bytes` issued as `units` collectives of 1/units each (FSDP's per-unit gathers and
  // reduce-scatters, DDP / distributed-optimizer buckets): each collective pays its own latency,
  // which grows with the ring's steps (NCCL src/graph/tuning.cc: ring latency = base + (n - 1)
  // steps; EstimateCollective), so a per-layer unit over hundreds of ranks is latency-bound where
  // one collective of the same bytes is not. units <= 1 (or ModelChoices::dp_collective_per_unit
  // off): one collective.
  double CommIn(Collective c, const GroupPlacement& g, double size_bytes, double units) {
    if (!(units > 1) || !job_.choices.dp_collective_per_unit) return Comm(c, g, size_bytes);
    return units * Comm(c, g, size_bytes / units);
  }
  // DpReduce in `units` collectives per group (CommIn).
  double DpReduceIn(const DpScratch& d, Collective c, double dense_bytes, double expert_bytes, double units) {
    return CommIn(c, d.dense_group, dense_bytes, units) + CommIn(c, d.expert_group, expert_bytes, units);
  }
  // HSDP: the gradient shards all-reduced across the replicas, per unit or bucket like the
  // reduce-scatter before it (FSDP2 HSDP all-reduces each group's shard after its reduce-scatter,
  // _fsdp_collectives.py foreach_reduce; Megatron's distributed-optimizer instances per bucket).
  double ReplicaAllReduce(const DpScratch& d, double units) {
    return CommIn(Collective::kAllReduce, d.replica_group, d.replica_bytes, units);
  }
  // What `comm` costs behind `window` under mechanism `mech` in `chunks` pieces (all exposed
  // when the job does not overlap DP communication).
  OverlapCost DpOverlapped(const OverlapMechanism& mech, double comm, double window, double chunks) {
    return t_.overlap_dp_comm ? Overlap(mech, comm, window, chunks) : OverlapCost{comm, 0};
  }
  static void DpAdd(DpScratch& d, const OverlapCost& c, double times = 1) {
    d.exp_s += times * c.exposed_s;
    d.contention_s += times * c.contention_s;
  }
  // DP groups, HSDP replica all-reduce and overlap windows.
  void DpSetup(const RunScratch& r, DpScratch& d);
  // FSDP / ZeRO-3 gathers and reduce-scatters (Zhao et al. 2023 Sec. 3) and FSDP2's copies
  // (pytorch _fsdp_collectives.py) into `fsdp_copy`.
  // `reshard_after_forward` false: FSDP SHARD_GRAD_OP (the framework's ZeRO-2 when
  // zero2_is_shard_grad_op), one gather per micro-batch kept for the backward.
  void FsdpComm(const RunScratch& run, DpScratch& d, Work& fsdp_copy, bool reshard_after_forward);
  // DDP all-reduce or ZeRO-1/2 reduce-scatter + all-gather in buckets (or per layer of the
  // stage, `run.layers_per_stage`).
  void DdpZeroComm(const RunScratch& run, DpScratch& d);
  // Optimizer step bytes per parameter (Megatron optimizer.py), memory-bound.
  Work OptimizerStep(const DpScratch& d);
  // Muon's Newton-Schulz GEMMs over the matrices this rank owns (Optimizer::kMuon).
  Work MuonNewtonSchulz(const DpScratch& d, double opt_params);
  // The intra-node busbw of a collective: the profile's entry, else the datasheet link (the cap
  // of the cross-node rates in Comm; 0 for an entry given as points only).
  double IntraNodeBusbw(Collective coll) const {
    const CollectiveRate* intra = job_.profile.FindCollective(coll, Scope::kIntraNode);
    return intra ? intra->busbw_bytes_per_s : job_.hardware.intra_node_bandwidth_bytes_per_s;
  }
  void Logits(LayerCost& c);
  // The input embedding (and a learned position table) as one-hot matmuls (framework.h
  // Framework::embedding_lookup_matmul; praxis embedding_softmax.py): forward and weight-gradient
  // GEMMs and the one-hot tensor's write, on the output layer's stage when PP is 1.
  void EmbeddingLookupMatmul(LayerCost& c);
  // The input embedding as PyTorch / Megatron-Core run it (Framework::dense_embedding_grad), on
  // the output layer's cost when one stage holds both (PP 1): per micro-batch, forward the
  // gather (read T rows of h, write T x h) and over TP the vocabulary mask's zeroing write and the
  // all-reduce (SP: reduce-scatter; its backward an all-gather) of T x h; backward the zeroed
  // V/tp x h gradient (write), the rows' scatter (read T x h, write T x h) and the gradient's add
  // into the gradient buffer (read it, read and write the buffer in its dtype).
  void InputEmbedding(LayerCost& c);
  // Per micro-batch, the input embedding's dense gradient into the gradient buffer, by the job's
  // sharding (0 without Framework::dense_embedding_grad).
  double EmbeddingGradIntoBufferBytes() const;
  // Attention-kernel rates of the framework on this GPU, or the profile's.
  // The fused attention kernel's rates for this job (attn_rate_*_), and for its sliding-window
  // layers (attn_local_rate_*_: the kernel's windowed measurements at the model's window).
  void AttentionRates();

  const Job& job_;
  std::optional<Framework> fw_copy_;  // only when a ModelChoices mechanism is off (not built otherwise)
  const Framework& fw_;
  ModelShape m_storage_;  // only when the job's shape is not resolved
  const ModelShape& m_;
  const TrainingConfig& t_;
  const Parallelism& p_;
  const Placement place_;
  double bw_ = 0, e_act_ = 2, e_in_ = 2, e_grad_ = 4, tokens_ = 0, elem_factor_ = 1;
  bool sp_ = false, launch_floor_ = false, layers_needed_ = true;
  bool host_ratio_on_ = true;  // ModelChoices::host_overhead_ratio
  // RoPE runs eager: the framework's TE fused RoPE takes no YaRN attention factor
  // (ElementwiseModel.scaled_rope_eager) and the model's rotary cos / sin carry one.
  bool ScaledRopeEager() const {
    return fw_.scaled_rope_eager && m_.rope_attention_factor > 0 && m_.rope_attention_factor != 1 &&
           !m_.mla.enabled() && m_.learned_position_embeddings == 0;
  }
  bool mx_ = false;  // MXFP8 block-scaled GEMMs (GemmShape::mx_block_scaled)
  bool rowwise_ = false;  // torchao row-wise scaling (GemmShape::row_scaled on the forward GEMMs)
  bool fp8_transpose_ = true;  // per-tensor fp8 writes a transposed copy (Fp8QuantizeBytesPerElement)
  double quantize_bw_fraction_ = 1;  // Fp8QuantizeBandwidthFraction
  DType sixteen_bit_dtype_ = DType::kBF16;  // the attention core, output head, router: the GEMM dtype, but the params' under fp8
  bool warned_gemm_ = false, warned_comm_ = false, warned_curve_ = false, warned_attention_ = false;
  std::shared_ptr<ThreadGemm> thread_gemm_;  // the thread's model and memo, when none was given
  const GemmModel* gm_ = nullptr;
  GemmMemo own_memo_;          // this prediction's memos when the model is not the thread's
  GemmPassesMemo own_passes_;
  GemmMemo* memo_ = &own_memo_;  // the thread's (thread_gemm_->memo), or own_memo_
  GemmPassesMemo* passes_ = &own_passes_;
  GemmEstimate overflow_;           // a flat-rate estimate
  GemmPassesEntry passes_scratch_;  // passes not kept (one estimate not plain)
  ParameterCounts pc_;
  double attn_rate_fwd_ = 0, attn_rate_bwd_ = 0;
  double attn_local_rate_fwd_ = 0, attn_local_rate_bwd_ = 0;
  std::vector<std::string> warnings_;
  LayerModuleTimes* modules_ = nullptr;  // filled by Layer() when set (EstimateLayerModules)
};

double StepModel::Comm(Collective coll, const GroupPlacement& g, double size_bytes) {
  if (g.size <= 1 || size_bytes <= 0) return 0;
  const RateProfile& prof = job_.profile;
  const CollectiveRate* r = prof.FindCollective(coll, g.scope);
  CollectiveRate fallback;
  if (r == nullptr) {
    // No measured rate: the datasheet link as busbw, its latency as alpha.
    const Hardware& hw = job_.hardware;
    fallback.collective = coll;
    fallback.scope = g.scope;
    fallback.busbw_bytes_per_s = g.scope == Scope::kIntraNode ? hw.intra_node_bandwidth_bytes_per_s
                                                              : hw.inter_node_bandwidth_bytes_per_s;
    fallback.alpha_s = g.scope == Scope::kIntraNode ? hw.intra_node_latency_s : hw.inter_node_latency_s;
    r = &fallback;
    if (!warned_comm_) {
      warned_comm_ = true;
      warnings_.push_back(absl::StrCat("no ", CollectiveName(coll), " ", ScopeName(g.scope),
                                       " rate in the profile; using the datasheet link"));
    }
  }
  // An all-to-all is not striped: every rank sends (n - k)/n of its bytes to other nodes through
  // its own NIC, and "Alltoall cannot aggregate the bandwidth of multiple NICs, so the performance
  // you should see is the performance of a single NIC" (NVIDIA/nccl-tests issue #267; #130:
  // across nodes alltoall busbw "will go down to 1x the network bandwidth per GPU").
  if (g.scope == Scope::kInterNode && g.members_per_node > 1 && r->points.empty() &&
      (coll != Collective::kAllToAll || !job_.choices.alltoall_one_nic)) {
    // Hierarchical group: k members per node stripe over k NICs, capped by the intra-node rate.
    CollectiveRate striped = *r;
    striped.busbw_bytes_per_s = std::min(IntraNodeBusbw(coll), r->busbw_bytes_per_s * g.members_per_node);
    return EstimateCollective(striped, g.size, size_bytes, g.members_per_node, false).time_s;
  }
  // The one-NIC all-to-all without a measured curve: the NIC's rate applies to the bytes that
  // leave the node, (n - k)/n of each rank's (k members per node), while the rest crosses NVLink
  // beside it. As a busbw (nccl-tests' (n - 1)/n of the algorithm bandwidth), that is the NIC rate
  // x (n - 1)/(n - k): 2 nodes ~2x the NIC, going down to 1x as the nodes grow (NVIDIA/nccl-tests
  // #130, S. Jeaugey: "On 2 nodes, 50% of the traffic is inter-node so you should see BusBW = 2x
  // network bandwidth per GPU. As the number of nodes increases, it will go down to 1x").
  // k is the fewest members any node holds (GroupPlacement::min_members_per_node): where groups
  // straddle nodes unevenly, the ranks on the emptier node send the most across and the
  // collective waits for them. As k nears n the bytes that stay on the node dominate: the busbw
  // is capped by the intra-node all-to-all's.
  if (coll == Collective::kAllToAll && g.scope == Scope::kInterNode && r->points.empty() &&
      g.members_per_node > 1 && g.size > g.members_per_node) {
    CollectiveRate per_nic = *r;
    const int64_t k = std::clamp<int64_t>(g.min_members_per_node, 1, g.members_per_node);
    const double cap = IntraNodeBusbw(coll);
    per_nic.busbw_bytes_per_s *= static_cast<double>(g.size - 1) / static_cast<double>(g.size - k);
    // (An intra-node entry given as points only has no busbw: no cap then, not a zero rate.)
    if (cap > 0) per_nic.busbw_bytes_per_s = std::min(cap, per_nic.busbw_bytes_per_s);
    return EstimateCollective(per_nic, g.size, size_bytes, g.members_per_node, false).time_s;
  }
  // A measured curve (interpolated; scaled to other group sizes and layouts, flagged).
  if (!r->points.empty()) {
    const CollectiveRate* best = prof.FindCollective(coll, g.scope, g.size, g.members_per_node);
    if (best != nullptr && !best->points.empty()) r = best;
  }
  // The reason is written only while the curve warning has not been given (once per prediction).
  const bool explain = !warned_curve_ && !r->points.empty();
  // The warning's own words lead the reason, so that the warning is built in one string: joined
  // in a buffer on the stack (names of at most 14 characters and an int64: under 64 bytes).
  char prefix[64];
  size_t prefix_len = 0;
  if (explain) {
    const absl::AlphaNum ranks(g.size);
    for (absl::string_view piece : {absl::string_view(CollectiveName(coll)), absl::string_view(" "),
                                    absl::string_view(ScopeName(g.scope)), absl::string_view(" over "), ranks.Piece(),
                                    absl::string_view(" ranks: ")}) {
      std::memcpy(prefix + prefix_len, piece.data(), piece.size());
      prefix_len += piece.size();
    }
  }
  CollectiveEstimate e = EstimateCollective(*r, g.size, size_bytes, g.members_per_node, explain,
                                            absl::string_view(prefix, prefix_len));
  if (e.extrapolated && explain) {
    warned_curve_ = true;
    warnings_.push_back(std::move(e.reason));
  }
  return e.time_s;
}

void StepModel::AttentionRates() {
  // Attention runs in the activation dtype (fp8 recipes keep dot-product attention in bf16
  // unless fp8 attention is enabled: Transformer Engine NVTE_FP8_DPA defaults off).
  const DType dtype = t_.precision.params == DType::kFP16 ? DType::kFP16 : DType::kBF16;
  // ModelChoices::attention_shape_rates off: the rates nearest a 128-wide head for every model, no
  // windowed rates (before 2026-11-29, sixteenth session).
  const bool shape_rates = job_.choices.attention_shape_rates;
  const int64_t head_dim = shape_rates ? m_.QkHeadDim() : 0;
  const AttentionKernel::Lookup r = fw_.attention.Rate(job_.hardware.architecture, dtype, t_.seq_length / p_.cp, true,
                                                       job_.hardware.name, head_dim);
  if (r.found) {
    attn_rate_fwd_ = r.forward_flops_per_s;
    attn_rate_bwd_ = r.backward_flops_per_s;
    attn_local_rate_fwd_ = attn_rate_fwd_, attn_local_rate_bwd_ = attn_rate_bwd_;
    // Sliding-window layers: the kernel's windowed rates (FLOPs over the band) where it has them.
    if (shape_rates && m_.local_attention_window > 0 && m_.local_attention_kind == LocalAttentionKind::kSliding) {
      const AttentionKernel::Lookup l = fw_.attention.Rate(job_.hardware.architecture, dtype, t_.seq_length / p_.cp,
                                                           true, job_.hardware.name, head_dim,
                                                           m_.local_attention_window);
      if (l.found) attn_local_rate_fwd_ = l.forward_flops_per_s, attn_local_rate_bwd_ = l.backward_flops_per_s;
    }
    return;
  }
  if (!fw_.attention.rates.empty() && !warned_attention_) {
    // A kernel measured elsewhere only (sdpa-cudnn: Hopper) selected on another GPU.
    warned_attention_ = true;
    warnings_.push_back(absl::StrCat("attention kernel ", fw_.attention.kernel, " has no measured rate on ",
                                     job_.hardware.architecture, ": attention at the ",
                                     job_.profile.attention_flops_per_s > 0 ? "profile's attention rate"
                                                                            : "GEMM rate of its shape"));
  }
  if (job_.profile.attention_flops_per_s > 0) {
    attn_rate_fwd_ = attn_rate_bwd_ = job_.profile.attention_flops_per_s;
  } else {
    const double dqk = m_.QkHeadDim();
    attn_rate_fwd_ = attn_rate_bwd_ = GemmRate(t_.seq_length / p_.cp, t_.seq_length, dqk, sixteen_bit_dtype_);
  }
  attn_local_rate_fwd_ = attn_rate_fwd_, attn_local_rate_bwd_ = attn_rate_bwd_;
}

void StepModel::Layer(unsigned parts, LayerCost& c, bool launch_floor) {
  const bool moe = (parts & kMoePart) != 0;
  const bool gated = m_.ffn_type == FfnType::kSwiGlu || m_.ffn_type == FfnType::kGeGlu;
  LayerScratch s;
  s.T = tokens_, s.h = m_.hidden_size, s.t = p_.tp;
  s.a = m_.attention_heads, s.kv = m_.kv_heads;
  s.dqk = m_.QkHeadDim(), s.dv = m_.VHeadDim();
  s.gated = gated;
  s.fm = gated ? 3 : 2;
  if (parts & kAttentionPart) {
    AttentionProjections(c, s);
    AttentionCore(c, s);
  }
  if (parts & kMambaPart) MambaMixer(c, s);
  s.attn_part_f = LayerFwdS(c), s.attn_part_b = LayerBwdS(c);
  s.attn_gemm_f = c.gemm_fwd.time_s, s.attn_gemm_b = c.gemm_bwd.time_s;
  if (moe) {
    MoeBlock(c, s);
  } else if (parts & kMlpPart) {
    DenseMlp(c, s);
  }
  NormsAndElementwise(parts, c, s);
  TpComm(parts, c, s);
  if (parts & kAttentionPart) CpComm(c, s);
  EpComm(moe, c, s);
  if (modules_ != nullptr) FillModuleComm(moe, c);
  if (launch_floor) LaunchFloor(parts, c);
}

void StepModel::AttentionProjections(LayerCost& c, LayerScratch& s) {
  ModuleForward& mod = c.module;
  const double T = s.T, h = s.h, t = s.t, a = s.a, kv = s.kv, dqk = s.dqk, dv = s.dv;
  const ParameterCounts& pc = pc_;
  // Attention projections: input side (QKV or MLA down/up) and output.
  const double attn_in = pc.attention_gemm - a * dv * h;
  if (m_.mla.enabled()) {
    // MLA (DeepSeek-V2 Sec. 2.1; Megatron-Core multi_latent_attention.py): the down projections
    // h -> q_lora_rank and h -> kv_lora_rank + rope key are replicated across TP ranks; the up
    // projections to the heads (Megatron's "mla_up_proj" module) are split by TP. Without a
    // query LoRA the queries are one h x heads*qk_head_dim projection.
    const double ql = m_.mla.q_lora_rank, kl = m_.mla.kv_lora_rank;
    const double nope = m_.mla.qk_nope_head_dim;
    Gemm(T, (ql > 0 ? ql : 0) + kl + m_.mla.qk_rope_head_dim, h, c);
    if (ql > 0) {
      Gemm(T, a * dqk / t, ql, c, 1, &mod.mla_up_proj);
    } else {
      Gemm(T, a * dqk / t, h, c);
    }
    Gemm(T, a * (nope + dv) / t, kl, c, 1, &mod.mla_up_proj);
    (void)attn_in;
  } else {
    Gemm(T, attn_in / (h * t), h, c);
    s.tp_ag_gemms.push_back({T, attn_in / (h * t), h});
    // torchtitan's Attention runs wq, wk, wv, wo as separate mm calls: wk (2nd) and wo (4th)
    // are recomputed by its op SAC.
    // Layer costs are shared across recompute settings (the layout search caches them), so this
    // is costed for every job; the shapes are memoized.
    mod.every_second_mm += GemmForward(T, kv * dqk / t, h);
    mod.every_second_mm += GemmForward(T, h, a * dv / t);
  }
  Gemm(T, h, a * dv / t, c);
  s.tp_rs_gemms.push_back({T, h, a * dv / t});
}

void StepModel::AttentionCore(LayerCost& c, LayerScratch& s) {
  ModuleForward& mod = c.module;
  const double t = s.t, a = s.a, dqk = s.dqk, dv = s.dv;
  // Attention core.
  const double b = t_.micro_batch_size, sq = static_cast<double>(t_.seq_length) / p_.cp;
  s.b = b, s.sq = sq;
  const double skv = static_cast<double>(t_.seq_length);
  const double heads = a / t;
  const double scores = b * heads * sq * skv;
  if (t_.flash_attention) {
    // Causal: half the blocks; with a local window, the layers' average share of the keys a
    // fused kernel visits (LayerKeyShares). A layer's cost is the layers' average: the global
    // layers' FLOPs at the kernel's whole-sequence rates, the sliding-window layers' band at its
    // windowed rates (AttentionRates), as one effective rate.
    const KeyShares k = LayerKeyShares();
    const double f_global = 2 * scores * (dqk + dv) * 0.5 * (1 - k.local_fraction);
    const double f_local = 2 * scores * (dqk + dv) * k.local * k.local_fraction;
    const double f = f_global + f_local;
    auto effective = [&](double global_rate, double local_rate) {
      if (!(f_local > 0) || !(local_rate > 0) || !(global_rate > 0)) return global_rate;
      return f / (f_global / global_rate + f_local / local_rate);
    };
    const double rate_fwd = effective(attn_rate_fwd_, attn_local_rate_fwd_);
    const double rate_bwd = effective(attn_rate_bwd_, attn_local_rate_bwd_);
    const double io = e_act_ * b * sq * heads * (2 * dqk + 2 * dv);  // Q, K, V in, O out
    c.attn_fwd.Roofline(f, io, rate_fwd, bw_);
    c.attn_bwd.Roofline(2.5 * f, 2 * io, rate_bwd, bw_);
    mod.core_attn += c.attn_fwd;
  } else {
    // Batched QK^T (sq x dqk by dqk x skv) and AV (sq x skv by skv x dv) per head.
    const double qk_bytes = b * heads * (sq * dqk + dqk * skv + sq * skv) * e_act_;
    const double av_bytes = b * heads * (sq * skv + skv * dv + sq * dv) * e_act_;
    const GemmEstimate qk = EstimateAttentionBmm(sq, skv, dqk, b * heads);
    const GemmEstimate av = EstimateAttentionBmm(sq, dv, skv, b * heads);
    c.attn_fwd.Gemm(qk, 1, 2 * scores * dqk, qk_bytes);
    c.attn_fwd.Gemm(av, 1, 2 * scores * dv, av_bytes);
    c.attn_bwd.Gemm(qk, 2, 4 * scores * dqk, 2 * qk_bytes);
    c.attn_bwd.Gemm(av, 2, 4 * scores * dv, 2 * av_bytes);
    // Fused scale-mask-softmax (read + write), dropout (read, write, 1-byte mask).
    const double drop = t_.dropout ? 2 * e_act_ + 1 : 0;
    c.attn_fwd.Bytes(scores * (2 * e_act_ + drop) * elem_factor_, bw_);
    c.attn_bwd.Bytes(scores * (3 * e_act_ + drop) * elem_factor_, bw_);
    mod.core_attn += c.attn_fwd;
  }
}

void StepModel::MoeBlock(LayerCost& c, LayerScratch& s) {
  ModuleForward& mod = c.module;
  const double T = s.T, h = s.h, t = s.t;
  const bool gated = s.gated;
  const int fm = s.fm;
  const double E = m_.moe.routed_experts, k = m_.moe.top_k, fe = m_.moe.expert_ffn_hidden_size;
  const double etp = static_cast<double>(p_.Etp());
  Work moe_fwd_before = c.gemm_fwd;
  moe_fwd_before += c.elem_fwd;
  // Router on the rank's sequence-parallel share of the tokens (Megatron-Core's MoE layer input
  // is [s/tp, b, h] with SP; router.py TopKRouter: gating GEMM, then scores (softmax or
  // sigmoid), top-k, the probabilities and the auxiliary loss, in fp32 over T x E).
  const double t_local = T / t;
  // What runs before the dispatch (LayerCost::pre_dispatch_*): the router, fc1_latent_proj, the
  // shared experts and (below) the routing passes and the all-to-all's permute, as deltas of the
  // layer's forward and backward times.
  auto before_dispatch = [&](auto&& add) {
    const double f = LayerFwdS(c), b = LayerBwdS(c);
    add();
    s.moe_pre_dispatch_f += LayerFwdS(c) - f;
    s.moe_pre_dispatch_b += LayerBwdS(c) - b;
  };
  before_dispatch([&] { Gemm16(t_local, E, h, c); });
  // Latent MoE (Megatron-Core moe_layer.py, moe_latent_size): fc1_latent_proj h -> w before the
  // dispatch and fc2_latent_proj w -> h after the combine, TELinear parallel_mode "duplicated"
  // (not split by TP) on the rank's own tokens; the routed experts and the dispatched rows are
  // w wide (w = h without one).
  const double w = static_cast<double>(m_.moe.ExpertWidth(m_.hidden_size));
  if (m_.moe.latent_size > 0) {
    before_dispatch([&] { Gemm(t_local, w, h, c); });
    Gemm(t_local, h, w, c);
  }
  // Tokens each GPU dispatches: its T/tp sequence-parallel share, gathered over ETP
  // (Megatron-Core's MoE layer runs with sequence parallelism when TP > 1).
  const double t_rank = T * etp / t;
  // Each expert's rows: its balanced share, padded to capacity when the job pads
  // (token_dispatcher.py drop_and_pad: tokens_per_expert = capacity x EP).
  const double pad = t_.MoePaddedRowsFactor();
  const double per_expert_tokens = t_rank * k * p_.ep / E * pad;
  const double local_experts = E / p_.ep;
  Gemm(per_expert_tokens, (fm - 1) * fe / etp, w, c, local_experts);
  Gemm(per_expert_tokens, w, fe / etp, c, local_experts);
  if (m_.moe.shared_experts > 0) {
    const double fs = m_.moe.shared_expert_ffn_hidden_size * m_.moe.shared_experts;
    before_dispatch([&] {
      Gemm(T, (fm - 1) * fs / t, h, c, 1, &mod.shared_experts);
      Gemm(T, h, fs / t, c, 1, &mod.shared_experts);
    });
    s.tp_ag_gemms.push_back({T, (fm - 1) * fs / t, h});
    s.tp_rs_gemms.push_back({T, h, fs / t});
  }
  const double routed_act = (gated ? 3 : 2) * e_act_ * t_rank * k * pad * fe / etp;
  const double shared_act = (gated ? 3 : 2) * e_act_ * T * m_.moe.shared_experts *
                            m_.moe.shared_expert_ffn_hidden_size / t;
  // Routing: the routing map Transformer Engine's fused permute builds (make_row_id_map: about
  // 17 T E + 4 T (2k + 1) bytes) and four fp32 passes over the T x E scores (logits read, scores
  // written, probabilities written, top-k read): 16 T E bytes (TE transformer_engine/common/
  // triton/permutation.py; Megatron-Core moe/router.py, moe_utils.py).
  const double routing = t_local * (33 * E + 4 * (2 * k + 1));
  // Rows this rank's experts receive (balanced routing; padded to capacity when the job pads).
  const double rows = t_rank * k * pad;
  double permute = 0;
  if (t_.moe_dispatcher == MoeDispatcher::kAllToAll) {
    // TE fused permute / unpermute around the all-to-all (token_dispatcher.py with
    // moe_permute_fusion; the unfused torch path moves the same token rows): forward, permute
    // reads each local row once and writes its k copies, the chunk sort by local expert reads
    // and writes every received row (only with more than one local expert), and the combine
    // side mirrors it: e h (2 T + 2 T k + 4 N) bytes (TE permutation.py _permute_kernel,
    // _unpermute_kernel, sort_chunks_by_map).
    permute = e_act_ * w * (2 * t_local + 2 * t_local * k * pad + (local_experts > 1 ? 4 * rows : 0.0));
    // fp8 GEMMs: each expert's rows padded to the fp8 alignment and unpadded after (TE
    // Fp8Padding / Fp8Unpadding, one read and write of [N, w] each).
    if (t_.precision.gemm == DType::kFP8) permute += 4 * e_act_ * rows * w;
  } else if (t_.moe_dispatcher == MoeDispatcher::kDeepEP || t_.moe_dispatcher == MoeDispatcher::kHybridEP) {
    // Megatron-Core's flex dispatcher with DeepEP (token_dispatcher.py _DeepepManager,
    // get_permuted_hidden_states_by_experts / get_restored_hidden_states_by_experts): DeepEP
    // delivers each token once to every rank that holds one of its experts; TE's permute then
    // writes a row per local expert (reads the R received rows, writes the N expert rows) and the
    // unpermute before the combine reads N and writes R: e h (2 R + 2 N) forward. R = t_rank x the
    // ranks a token reaches (ExpectedGroupsReachedLimited).
    // HybridEP (_HybridEPManager, core_r0.16): Megatron takes the dispatched rows as they are, but
    // DeepEP's hybrid-ep dispatch_with_permute runs the same permute as a kernel of its own after
    // the dispatch kernel, and the unpermute before the combine (deepseek-ai/DeepEP hybrid-ep
    // @7febc6e csrc/hybrid_ep/executor/executor.cu l.280 permute_launcher, l.355
    // unpermute_launcher; hybrid_ep.cu l.319 enable_permute): the same bytes. It pads each
    // expert's rows to the fp8 GEMMs' alignment itself (pad_multiple), so no Fp8Padding pass.
    const double received = t_rank * ExpectedGroupsReachedLimited(E, static_cast<double>(p_.ep), k, m_.moe.routed_groups,
                                                                  m_.moe.max_routed_groups);
    permute = e_act_ * w * (2 * received + 2 * rows);
    if (t_.precision.gemm == DType::kFP8 && t_.moe_dispatcher == MoeDispatcher::kDeepEP) {
      permute += 4 * e_act_ * rows * w;
    }
  }
  // deepep-fp8 (DeepSeek's own stack) has no separate permute here: its module times are held
  // against the DeepSeek-V3 training trace (tests/deepseek_trace_test.cc).
  Elementwise(routed_act, c, &mod.moe_act);
  before_dispatch([&] { Elementwise(shared_act, c, &mod.shared_experts); });
  // Before the dispatch too: the router's passes and the routing map, and the all-to-all
  // dispatcher's preprocess, its permute (half of `permute`: the unpermute after the combine is
  // the other; token_dispatcher.py MoEAlltoAllTokenDispatcher.dispatch_preprocess). DeepEP permutes
  // the rows it received, after the dispatch.
  const double pre_permute = t_.moe_dispatcher == MoeDispatcher::kAllToAll ? permute / 2 : 0.0;
  before_dispatch([&] { Elementwise(routing + pre_permute, c); });
  Elementwise(permute - pre_permute, c);
  if (fw_.expert_bias_eager && m_.linear_bias) {
    // The fc2 bias in an eager loop per local expert (Megatron-Core moe/experts.py _apply_bias at
    // core_r0.16 b0cc2706: torch.cat([t + b * p for t, b, p in zip(split(out), biases,
    // split(probs))])): forward, b x p written (e), the add reads the GEMM output and b x p and
    // writes (3e), the cat reads and writes (2e): 6e per element of the [N, h] output; backward,
    // the cat's split, the add's gradient and the bias / probability reductions: 8e.
    const double elems = rows * w;
    c.elem_fwd.Bytes(6 * e_act_ * elems * elem_factor_, bw_);
    c.elem_bwd.Bytes(8 * e_act_ * elems * elem_factor_, bw_);
  }
  if (fw_.expert_clamp_eager && m_.activation_clamp && gated) {
    // GPT-OSS's clamped GLU in Megatron-Core (fusions/fused_bias_geglu.py
    // weighted_bias_quick_geglu_impl, core_r0.16 b0cc2706 l.410-442): the clamp runs eager before
    // the compiled activation. Forward, the two clamps over the [N, F] halves (read + write: 4 N F
    // elements) and the cat back to [N, 2F] (4 N F); backward, the two ClampBackward (gradient and
    // input read, gradient written: 6 N F) and the cat's split (4 N F). Part of the activation:
    // recomputed with moe_act / activation_functions.
    const double nf = t_rank * k * fe / etp;
    const double fwd = 8 * e_act_ * nf * elem_factor_, fwd_s = fwd / bw_;
    c.elem_fwd.BytesIn(fwd, fwd_s);
    c.module.activation_functions.BytesIn(fwd, fwd_s);
    mod.moe_act.BytesIn(fwd, fwd_s);
    c.elem_bwd.Bytes(10 * e_act_ * nf * elem_factor_, bw_);
  }
  Work moe_fwd = c.gemm_fwd;
  moe_fwd += c.elem_fwd;
  // Everything the MoE block added to the forward.
  mod.moe = moe_fwd.Scaled(1.0);
  mod.moe.time_s -= moe_fwd_before.time_s;
  mod.moe.compute_s -= moe_fwd_before.compute_s;
  mod.moe.memory_s -= moe_fwd_before.memory_s;
  mod.moe.flops -= moe_fwd_before.flops;
  mod.moe.bytes -= moe_fwd_before.bytes;
}

void StepModel::DenseMlp(LayerCost& c, LayerScratch& s) {
  ModuleForward& mod = c.module;
  const double T = s.T, h = s.h, t = s.t;
  const bool gated = s.gated;
  const int fm = s.fm;
  const double f = m_.ffn_hidden_size;
  Work mlp_up;
  Gemm(T, (fm - 1) * f / t, h, c, 1, &mlp_up);
  mod.mlp += mlp_up;
  mod.mlp_up += mlp_up;
  Gemm(T, h, f / t, c, 1, &mod.mlp);
  s.tp_ag_gemms.push_back({T, (fm - 1) * f / t, h});
  s.tp_rs_gemms.push_back({T, h, f / t});
  // torchtitan's FeedForward: w2(silu(w1(x)) * w3(x)), mm calls 5 (w1), 6 (w3), 7 (w2): w3 is
  // recomputed; without a gate (w1, w2: calls 5, 6) w2 is.
  if (!m_.mla.enabled()) mod.every_second_mm += gated ? GemmForward(T, f / t, h) : GemmForward(T, h, f / t);
  const double act = (gated ? 3 : 2) * e_act_ * T * f / t;
  Work before = c.elem_fwd;
  Elementwise(act, c, &mod.mlp, &mod.mlp_up);
  mod.mlp_act = c.elem_fwd;
  mod.mlp_act.time_s -= before.time_s;
  mod.mlp_act.memory_s -= before.memory_s;
  mod.mlp_act.bytes -= before.bytes;
}

void StepModel::MambaMixer(LayerCost& c, LayerScratch& s) {
  const MambaShape& mb = m_.mamba;
  const double T = s.T, h = s.h, t = s.t;
  // Per TP rank: heads, groups and d_inner split by TP (mamba_mixer.py nheads_local_tp,
  // ngroups_local_tp, d_inner_local_tp); in_proj is column-, out_proj row-parallel.
  const double proj = static_cast<double>(mb.InProjOutputs()) / t, d_in = static_cast<double>(mb.InnerSize()) / t;
  const double conv = static_cast<double>(mb.ConvChannels()) / t;
  const double heads = static_cast<double>(mb.num_heads) / t, groups = static_cast<double>(mb.num_groups) / t;
  const double N = mb.state_dim, P = mb.head_dim;
  const double Q = std::min(static_cast<double>(mb.chunk_size), static_cast<double>(t_.seq_length) / p_.cp);
  Gemm(T, proj, h, c);
  s.tp_ag_gemms.push_back({T, proj, h});
  Gemm(T, h, d_in, c);
  s.tp_rs_gemms.push_back({T, h, d_in});
  // _ssm_training: rearrange(zxBCdt, "l b d -> b l d").contiguous() before the fused kernel and
  // y back after it, each a read and a write (forward; their gradients the same backward); with
  // one sequence per micro-batch the views are already contiguous and nothing is copied.
  if (t_.micro_batch_size > 1) {
    const double copies = 2 * e_act_ * T * (proj + d_in) * elem_factor_;
    c.elem_fwd.Bytes(copies, bw_);
    c.elem_bwd.Bytes(copies, bw_);
  }
  // The depthwise causal conv + SiLU over [x, B, C] (causal_conv1d_fwd): read and write; the
  // memory-efficient path recomputes it in backward (ssd_combined.py MambaSplitConv1dScanCombinedFn
  // .backward), then its backward reads x and dout and writes dx.
  const double conv_bytes = 2 * e_act_ * T * conv * elem_factor_;
  c.elem_fwd.Bytes(conv_bytes, bw_);
  c.elem_bwd.Bytes(conv_bytes + 1.5 * conv_bytes, bw_);
  // The SSD chunk scan (Dao & Gu 2024, arXiv:2405.21060 Sec. 6; state-spaces/mamba
  // mamba_ssm/ops/triton/ssd_combined.py _mamba_chunk_scan_combined_fwd), per chunk of Q tokens:
  // chunk_state B^T X (N x P x Q per head), bmm_chunk C B^T (Q x Q x N per group), chunk_scan
  // (C B^T o L) X (causal: half of Q x P x Q per head) and C times the passed states (Q x P x N per
  // head); state_passing reads and writes the chunk states (N x P per head and chunk, in the
  // parameters' dtype: mamba_training_ssm_states_dtype None), chunk_state writes and chunk_scan
  // reads them; x, B and C are read twice, z once, the output written. Backward
  // (_mamba_chunk_scan_combined_bwd): the states and C B^T recomputed, then the gradients of both
  // operands of every forward matmul, twice the bytes. A roofline at the profile's SSD rate, else
  // kSsdPeakFraction of the GPU's dense bf16 peak (the scan kernels run in bf16 / fp32 whatever
  // the GEMMs' dtype; step_time.h). A chunk longer than the sequence is the sequence.
  const double f_ssd = 2 * T * (2 * heads * P * N + groups * Q * N + heads * Q * P / 2);
  const double f_recompute = 2 * T * (heads * P * N + groups * Q * N);
  const double states_bytes = T / Q * heads * P * N * e_act_;
  const double io_bytes = e_act_ * T * (4 * d_in + 4 * groups * N);
  const double ssd_rate = job_.profile.ssd_flops_per_s > 0 ? job_.profile.ssd_flops_per_s
                                                           : kSsdPeakFraction * job_.hardware.PeakFlops(DType::kBF16);
  if (ssd_rate > 0) {
    c.attn_fwd.Roofline(f_ssd, 4 * states_bytes + io_bytes, ssd_rate, bw_);
    c.attn_bwd.Roofline(2 * f_ssd + f_recompute, 8 * states_bytes + 2 * io_bytes, ssd_rate, bw_);
  }
  // The RMSNorm over d_inner (mamba_mixer.py self.norm; the z gate is applied inside the scan
  // kernel, which reads z): read y, write. Not the "layernorm" of selective recompute (the
  // TransformerLayer norms).
  Elementwise(2 * e_act_ * T * d_in, c);
}

void StepModel::NormsAndElementwise(unsigned parts, LayerCost& c, const LayerScratch& s) {
  ModuleForward& mod = c.module;
  const double T = s.T, h = s.h, t = s.t, a = s.a, kv = s.kv, dqk = s.dqk, dv = s.dv;
  const double ffn_part_f = LayerFwdS(c) - s.attn_part_f, ffn_part_b = LayerBwdS(c) - s.attn_part_b;
  const double ffn_gemm_f = c.gemm_fwd.time_s - s.attn_gemm_f, ffn_gemm_b = c.gemm_bwd.time_s - s.attn_gemm_b;
  // Norms and residual adds (+ dropout masks) on h-wide activations: one of each per sub-layer
  // (two in a transformer layer, one in a hybrid's).
  const bool attention = (parts & kAttentionPart) != 0;
  const double sublayers = static_cast<double>(std::popcount(parts));
  const double xh = T * h / (sp_ ? t : 1);
  const double norms = sublayers * (2 * e_act_ * xh);
  // A hybrid's Mamba, attention and MLP layers fuse their norm into the first linear
  // (TELayerNormColumnParallelLinear, hybrid_layer_specs.py): selective "layernorm" recompute has
  // nothing to rerun there; its MoE layers keep a separate pre-MLP TENorm.
  const bool fused_norm = m_.Hybrid() && !(parts & kMoePart);
  Elementwise(norms, c, fused_norm ? nullptr : &mod.layernorm);
  double elem = sublayers * (3 * e_act_ * xh + (t_.dropout ? xh : 0));
  double rope = attention && m_.learned_position_embeddings == 0 ? 2 * e_act_ * T * (a + kv) * dqk / t : 0.0;
  if (attention && m_.mla.enabled()) {
    // MLA's unfused query/key assembly (Megatron-Core multi_latent_attention.py, as DeepSeek's
    // own): RoPE on the rotary parts of q (every head) and of the shared k_pe, the q_a and kv_a
    // norms, q = cat(q_nope, q_pe) and k = cat(k_nope, k_pe expanded to every head) written as
    // heads x qk_head_dim, v made contiguous; per token, bytes e (2 a rope + 2 rope + 2 (ql + kl)
    // + 2 a dqk + a (nope + dqk) + 2 a dv), heads split by TP.
    const double rope_d = m_.mla.qk_rope_head_dim, nope = m_.mla.qk_nope_head_dim;
    const double ql = m_.mla.q_lora_rank, kl = m_.mla.kv_lora_rank;
    rope = e_act_ * T *
           ((2 * a * rope_d + 2 * a * dqk + a * (nope + dqk) + 2 * a * dv) / t + 2 * rope_d + 2 * (ql + kl));
  }
  elem += rope;
  Elementwise(elem, c);
  double rope_eager_f_s = 0, rope_eager_b_s = 0;
  if (attention && ScaledRopeEager()) {
    // Megatron-Core rope_utils.py _apply_rotary_pos_emb_bshd (core_r0.16 b0cc2706 l.92-126), per
    // value of q and of k: forward t * cos (2 e), rotate_half's neg and cat (3 e), * sin (2 e), the
    // add (3 e), the final cat with the empty pass-through part (2 e) = 12 e; backward the two
    // products' gradients (4 e), rotate_half's (3 e), their sum (3 e), the slice's (3 e) = 13 e
    // (counted from the autograd graph, not measured). The fused kernel's 2 e / 4 e are above.
    const double qk = T * (a + kv) * dqk / t;
    const double fwd = (12 - 2) * e_act_ * qk * elem_factor_, bwd = (13 - 4) * e_act_ * qk * elem_factor_;
    c.elem_fwd.Bytes(fwd, bw_);
    c.elem_bwd.Bytes(bwd, bw_);
    rope_eager_f_s = fwd / bw_;
    rope_eager_b_s = bwd / bw_;
  }
  // Norms and residual adds: one of each per sub-layer, half to each; RoPE to attention.
  const double shared_f = (norms + elem - rope) * elem_factor_ / bw_, rope_f = rope * elem_factor_ / bw_;
  // Before the dispatch: the attention sub-layer with its residual add, both norms (the pre-MLP
  // norm precedes the router), RoPE, and the MoE block's router and shared experts; backward
  // twice the elementwise bytes, as the module times below count them.
  const double pre_elem_f = (norms + (attention ? (elem - rope) / sublayers : 0.0)) * elem_factor_ / bw_;
  c.pre_dispatch_fwd_s = s.attn_part_f + s.moe_pre_dispatch_f + pre_elem_f + rope_f + rope_eager_f_s;
  c.pre_dispatch_bwd_s = s.attn_part_b + s.moe_pre_dispatch_b + 2 * pre_elem_f + 2 * rope_f + rope_eager_b_s;
  if (modules_ != nullptr) {
    modules_->attention_fwd_s = s.attn_part_f + shared_f / 2 + rope_f + rope_eager_f_s;
    modules_->attention_bwd_s = s.attn_part_b + shared_f + 2 * rope_f + rope_eager_b_s;
    modules_->mlp_fwd_s = ffn_part_f + shared_f / 2;
    modules_->mlp_bwd_s = ffn_part_b + shared_f;
    modules_->attention_gemm_fwd_s = s.attn_gemm_f;
    modules_->attention_gemm_bwd_s = s.attn_gemm_b;
    modules_->mlp_gemm_fwd_s = ffn_gemm_f;
    modules_->mlp_gemm_bwd_s = ffn_gemm_b;
  }
}

void StepModel::TpComm(unsigned parts, LayerCost& c, const LayerScratch& s) {
  const double T = s.T, h = s.h;
  const auto& tp_ag_gemms = s.tp_ag_gemms;
  const auto& tp_rs_gemms = s.tp_rs_gemms;
  // Tensor parallel communication, overlapped with the GEMMs when the framework does it
  // (overlap efficiency from the framework preset).
  if (p_.tp > 1) {
    const double S = T * h * e_act_;
    // One gather/scatter pair (or all-reduce) per TP block: attention (or a hybrid's Mamba
    // mixer: in_proj column-, out_proj row-parallel), and a dense layer's MLP or an MoE layer's
    // shared experts. An MoE layer's routed experts gather their dispatched tokens over ETP
    // instead (EpComm).
    const double blocks = ((parts & kAttentionPart) ? 1.0 : 0.0) + ((parts & kMambaPart) ? 1.0 : 0.0) +
                          ((parts & kMlpPart) ? 1.0 : 0.0) +
                          ((parts & kMoePart) && m_.moe.shared_experts > 0 ? 1.0 : 0.0);
    double fwd = 0;
    if (sp_) {
      fwd = blocks * (Comm(Collective::kAllGather, place_.tp, S) + Comm(Collective::kReduceScatter, place_.tp, S));
    } else {
      fwd = blocks * Comm(Collective::kAllReduce, place_.tp, S);
    }
    c.tp_fwd.Comm(fwd, place_.tp.scope);
    c.tp_bwd.Comm(fwd, place_.tp.scope);
    const OverlapMechanism& o = fw_.overlap.tp_comm;
    // Transformer Engine's userbuffers gather and scatter the sequence-parallel activations: they
    // run only with sequence parallelism (Megatron-LM arguments.py @d98e8a6: "Tensor parallel
    // communication/GEMM overlap can happen only when sequence parallelism is enabled"; requires
    // --sequence-parallel), as the layout search enumerates them; a job asking for them without
    // SP gets the framework's non-userbuffers path below.
    // (ModelChoices::userbuffers_as_run off: applied without SP, as before 2026-11-29.)
    if (t_.overlap_tp_comm && o.supported && (sp_ || !o.ag_ring_first_chunk_local || !job_.choices.userbuffers_as_run)) {
      // Each TP collective beside its adjacent GEMMs, in the mechanism's chunks; the backward's
      // window is its dgrad + wgrad GEMMs (Megatron-LM 2022: concurrent, backward only).
      auto cost = [&](double comm_s, double window_s, bool backward) {
        if (!o.ag_ring_first_chunk_local) return Overlap(o, comm_s, window_s, OpChunks(o, p_.tp));
        return UserbuffersCost(o, comm_s, tp_ag_gemms, tp_rs_gemms, backward);
      };
      if (!o.backward_only) {
        const OverlapCost f = cost(fwd, c.gemm_fwd.time_s, false);
        c.tp_fwd.ExposeComm(f.exposed_s);
        c.tp_fwd.Contention(f.contention_s);
      }
      const OverlapCost b = cost(fwd, c.gemm_bwd.time_s, true);
      c.tp_bwd.ExposeComm(b.exposed_s);
      c.tp_bwd.Contention(b.contention_s);
    } else if (fw_.overlap.tp_comm_backward.supported) {
      // The backward's TP communication beside its dgrad / wgrad GEMMs (always on: TE's
      // non-userbuffers path issues the input all-gather and the dgrad reduce-scatter
      // asynchronously); the forward's stays exposed.
      const OverlapMechanism& ob = fw_.overlap.tp_comm_backward;
      const OverlapCost b = Overlap(ob, fwd, c.gemm_bwd.time_s, OpChunks(ob, p_.tp));
      c.tp_bwd.ExposeComm(b.exposed_s);
      c.tp_bwd.Contention(b.contention_s);
    }
  }
}

void StepModel::CpComm(LayerCost& c, const LayerScratch& s) {
  const double t = s.t, a = s.a, kv = s.kv, dqk = s.dqk, dv = s.dv, b = s.b, sq = s.sq;
  // Context parallel ring exchange of K and V, hidden under the attention core as far as the
  // framework's ring overlap does.
  if (p_.cp > 1) {
    const double kv_width = m_.mla.enabled() ? a * (dqk + dv) : kv * (dqk + dv);
    const double kv_bytes = b * sq * kv_width / t * e_act_;
    const double step = Comm(Collective::kSendRecv, place_.cp, kv_bytes);
    const double fwd = (p_.cp - 1) * step, bwd = 2 * (p_.cp - 1) * step;
    const OverlapMechanism& o = fw_.overlap.cp_ring;
    if (o.supported && o.Structured()) {
      // Ring attention (Transformer Engine context_parallel.py, cp_comm_type p2p): step i
      // computes on the KV chunk it holds while the next chunk is sent and received; the first
      // step uses the local chunk, so each of the cp - 1 exchanges hides behind one step's
      // attention (1/cp of it) and only what exceeds that step is exposed.
      auto ring = [&](double comm, double attn) {
        const double per_step = comm / (p_.cp - 1), window = attn / p_.cp;
        const double exposed = (p_.cp - 1) * std::max(0.0, per_step - window);
        const double measured = job_.profile.FindContention("attention", "nccl").slowdown;
        return OverlapCost{exposed, ContentionCost(comm - exposed, o.Slowdown(measured))};
      };
      const OverlapCost f = ring(fwd, c.attn_fwd.time_s), b = ring(bwd, c.attn_bwd.time_s);
      c.cp.Comm(f.exposed_s + b.exposed_s, place_.cp.scope);
      c.cp.Contention(f.contention_s + b.contention_s);
      if (t_.flash_attention && job_.choices.cp_ring_merge) {
        // The ring's merges, after its steps (so not a window for the exchanges):
        // CpRingMergeBytes, on the attention core (a recomputed core_attn redoes them).
        const double rows = s.b * sq * a / t;  // the rank's query rows x heads
        const CpRingMerge m = CpRingMergeBytes(rows * dqk * e_act_, rows * dv * e_act_, kv_bytes, p_.cp);
        c.attn_fwd.Bytes(m.forward_bytes, bw_);
        c.attn_bwd.Bytes(m.backward_bytes, bw_);
        c.module.core_attn.Bytes(m.forward_bytes, bw_);
      }
    } else {
      c.cp.Comm(o.Exposed(fwd, c.attn_fwd.time_s) + o.Exposed(bwd, c.attn_bwd.time_s), place_.cp.scope);
    }
  }
}

void StepModel::EpComm(bool moe, LayerCost& c, const LayerScratch& s) {
  ModuleForward& mod = c.module;
  const double T = s.T;
  // MoE token dispatch and combine, forward and backward (Megatron-Core
  // MoEAlltoAllTokenDispatcher, megatron/core/transformer/moe/token_dispatcher.py): each rank
  // all-to-alls its T/tp sequence-parallel tokens x top-k over EP, then all-gathers the received
  // tokens over ETP; the combine reduce-scatters over ETP, then all-to-alls back. On the compute
  // stream: TP comm overlap does not cover it.
  if (moe && (p_.ep > 1 || p_.Etp() > 1)) {
    // Rows travel at the experts' width (latent MoE: moe_latent_size; token_dispatcher.py
    // hidden_dim = moe_latent_size or hidden_size). Capacity padding happens in the router
    // (moe_utils.py apply_router_token_dropping with pad_to_capacity: the routing map holds
    // capacity token-expert pairs per expert, the padding real tokens at probability 0), so every
    // dispatcher moves the padded pairs: the all-to-all's input splits are the capacity
    // (token_dispatcher.py drop_and_pad), HybridEP the padded map's pairs (Megatron-Core refuses
    // DeepEP with padding: ValidateJob).
    const double w = static_cast<double>(m_.moe.ExpertWidth(m_.hidden_size));
    const double k = m_.moe.top_k * t_.MoePaddedRowsFactor();
    const double S = T / p_.tp * k * w * e_act_;
    // The all-to-all dispatcher's dispatch and combine move the same bytes; DeepEP's may not.
    double dispatch_s = 0, a2a = 0;
    if (p_.ep > 1 && t_.moe_dispatcher == MoeDispatcher::kAllToAll) {
      dispatch_s = Comm(Collective::kAllToAll, place_.ep, S);
      a2a = 2 * dispatch_s;
    } else if (p_.ep > 1) {
      a2a = DeepEpDispatchCombine(T / p_.tp, w, k, &dispatch_s);
    }
    double etp_s = 0;
    if (p_.Etp() > 1) {
      const double gathered = S * static_cast<double>(p_.Etp());
      etp_s = Comm(Collective::kAllGather, place_.etp, gathered) + Comm(Collective::kReduceScatter, place_.etp, gathered);
    }
    const double one = a2a + etp_s;
    if (modules_ != nullptr) modules_->ep_transfer_s = one;
    const OverlapMechanism& o = fw_.overlap.ep_all_to_all;
    c.ep_a2a_s = a2a;
    c.ep_dispatch_s = dispatch_s;
    c.ep_etp_s = etp_s;
    // Exposed as it runs inside the layer: all of it, or a legacy single efficiency. Overlap
    // with another micro-batch (the job's overlap_ep_comm, DualPipe) is the schedule's: Run.
    auto expose = [&](Work& w, double compute_s) {
      if (one <= 0) return;
      const double e = o.supported && !o.Structured() ? o.Exposed(one, compute_s) : one;
      w.Comm(e * a2a / one, place_.ep.scope);
      w.Comm(e * etp_s / one, place_.etp.scope);
    };
    expose(c.ep_fwd, c.gemm_fwd.time_s);
    expose(c.ep_bwd, c.gemm_bwd.time_s);
    mod.moe += c.ep_fwd;
  }
}

void StepModel::FillModuleComm(bool moe, const LayerCost& c) {
  if (p_.Schedule() == PipelineSchedule::kDualPipe && moe) {
    Work f, b;
    DualPipeExposeEp(c, &f, &b);
    modules_->ep_fwd_s = f.time_s;
    modules_->ep_bwd_s = b.time_s;
  } else {
    modules_->ep_fwd_s = c.ep_fwd.time_s;
    modules_->ep_bwd_s = c.ep_bwd.time_s;
  }
  modules_->tp_fwd_s = c.tp_fwd.time_s;
  modules_->tp_bwd_s = c.tp_bwd.time_s;
  modules_->cp_s = c.cp.time_s;
}

void StepModel::LaunchFloor(unsigned parts, LayerCost& c, const LaunchShares* shares) {
  // Host launch floor: an eager framework cannot run a layer faster than it launches its
  // kernels (forward n kernels, backward ~2n), unless CUDA graphs replay them.
  if (!launch_floor_) return;
  const bool moe = (parts & kMoePart) != 0;
  // The framework's host cost per kernel it issues (Python, op dispatch, launch), measured on x86
  // DGX / HGX hosts, on this machine's host CPU (Hardware::host_overhead_ratio: Grace runs a
  // PyTorch op 2.46-2.75x slower, TransformerEngine issue #2053). The looped launches (a C++ loop
  // of launch calls) keep their x86 cost: the issue timed whole ops, not the launch call.
  const double host_ratio = host_ratio_on_ ? job_.hardware.host_overhead_ratio : 1.0;
  const double L = fw_.launch.kernel_launch_overhead_s * host_ratio;
  // The dense layer's kernels: n forward, 2n backward, and eager RoPE's own counts beside them.
  // A hybrid's attention, MLP or MoE layer is half a transformer layer's n (the preset's count
  // is both halves'); its Mamba layer n: LayerNorm + in_proj (2), the layout copy, the causal
  // conv and the SSD's five chunk kernels (mamba_split_conv1d_scan_combined: conv, chunk_cumsum,
  // chunk_state, state_passing, bmm_chunk, chunk_scan), the copy back, the gated norm, out_proj
  // and the residual add: 13 (counted from mamba_mixer.py and ssd_combined.py, not measured).
  // Partial CUDA graphs (training.cuda_graph_scope, Megatron-Core --cuda-graph-impl
  // transformer_engine): a captured part's kernels replay from its graph, one launch forward and
  // one backward (TE make_graphed_callables captures both); the rest stay on the host.
  const TrainingConfig::CudaGraphScope g = t_.GraphedParts();
  const LaunchShares s = shares != nullptr ? *shares : SharesOf(parts);
  const double n = static_cast<double>(fw_.launch.kernels_per_layer_forward) * std::max(0.0, s.kernels - s.captured);
  const bool rope_eager = (parts & kAttentionPart) && ScaledRopeEager() && !g.attn;
  const double n_f = n + s.graphs + (rope_eager ? fw_.launch.scaled_rope_kernels_forward : 0.0);
  const double n_b = 2 * n + s.graphs + (rope_eager ? fw_.launch.scaled_rope_kernels_backward : 0.0);
  const double gpu_fwd = c.gemm_fwd.time_s + c.attn_fwd.time_s + c.elem_fwd.time_s;
  const double gpu_bwd = c.gemm_bwd.time_s + c.attn_bwd.time_s + c.elem_bwd.time_s;
  // Recomputation re-runs the recomputed forward inside the backward, its launches with it
  // (torch.utils.checkpoint and Megatron-Core's CheckpointFunction re-execute the forward's
  // Python): kept here for RecomputeLaunchDelta, the whole forward's launches (full) and the MoE
  // block's (selective `moe`: moe_layer.py core_r0.16 moe_layer_recompute re-runs custom_forward:
  // router, dispatch, experts; below). The other selective modules' few kernels each are not
  // counted.
  const MoeLaunchModel& ml = fw_.launch.moe;
  if (!moe || ml.expert_gemms.empty()) {
    c.launch.Host(std::max(0.0, n_f * L - gpu_fwd) + std::max(0.0, n_b * L - gpu_bwd));
    c.launch_bwd = {n_b * L, gpu_bwd, n_f * L, 0.0};
    return;
  }
  // An MoE layer: the dense layer's n kernels stand for its attention half and norms; the MoE
  // block adds its router / dispatcher kernels and, per grouped linear, the expert GEMMs with
  // their quantize kernels (Transformer Engine GroupedLinear: one cuBLAS GEMM per local expert,
  // common/gemm/cublaslt_gemm.cu multi_stream_cublas_gemm; counts per dtype in the preset).
  const double local_experts = m_.moe.routed_experts / std::max<int64_t>(1, p_.ep);
  const ExpertGemmLaunches* e = &ml.expert_gemms.front();
  for (const ExpertGemmLaunches& x : ml.expert_gemms) {
    if (x.gemm_dtype == t_.precision.gemm) e = &x;
  }
  // Host seconds: the kernels the framework's code issues at L each, the per-expert ones (a C++
  // loop inside the grouped linear) at the launch call's own cost, but for the per-expert GEMMs:
  // each a cuBLAS(Lt) call (Transformer Engine v2.12 common/gemm/cublaslt_gemm.cu
  // multi_stream_cublas_gemm -> cublas_gemm: layouts, descriptor, preference, heuristic query,
  // cublasLtMatmul, per expert) at LaunchModel::gemm_call_overhead_s, on this machine's host CPU
  // like the framework's ops (the Grace ratio was measured on whole torch.nn.Linear calls, a
  // cuBLAS GEMM's host path).
  // A profile that measured them on its hosts (RateProfile::host_launch_call_s / host_gemm_call_s,
  // stepcast-calibrate's host-call pass) gives both instead, unscaled: they are this host's own
  // (not while ModelChoices::launch_floor restores the former costs).
  const RateProfile& prof = job_.profile;
  const bool measured = job_.choices.launch_floor;
  const double LE = measured && prof.host_launch_call_s > 0 ? prof.host_launch_call_s : fw_.launch.looped_launch_overhead_s;
  // gemm_call_overhead_s 0 (a preset without it; ModelChoices::expert_gemm_calls or launch_floor
  // off, Effective): the bare launch call's cost, x86 everywhere.
  const double G = fw_.launch.gemm_call_overhead_s <= 0 ? LE
                   : measured && prof.host_gemm_call_s > 0 ? prof.host_gemm_call_s
                                                           : fw_.launch.gemm_call_overhead_s * host_ratio;
  // The whole MoE block in a graph (scope moe, token drop only): its launches replay.
  const bool moe_block_graphed = g.moe;
  // One direction's grouped linears: `fixed` issued kernels each, and per local expert `kernels`
  // looped ones of which `gemms` are GEMM calls.
  const auto grouped_linears = [&](double fixed, double kernels, double gemms) {
    if (moe_block_graphed) return 0.0;
    const double calls = std::min(kernels, gemms);
    return ml.grouped_linears * (fixed * L + ((kernels - calls) * LE + calls * G) * local_experts);
  };
  const double experts_f = grouped_linears(e->kernels_forward, e->kernels_per_expert_forward, e->gemms_per_expert_forward);
  const double experts_b = grouped_linears(e->kernels_backward, e->kernels_per_expert_backward, e->gemms_per_expert_backward);
  // A biased model's fc2 bias, added in Python per local expert (ElementwiseModel.expert_bias_eager).
  const bool bias_loop = fw_.expert_bias_eager && m_.linear_bias && !moe_block_graphed;
  const double bias_f = bias_loop ? ml.bias_loop_kernels_per_expert_forward * local_experts * L : 0.0;
  const double bias_b = bias_loop ? ml.bias_loop_kernels_per_expert_backward * local_experts * L : 0.0;
  // Router and EP preprocess before the wait, by router kind, router fusion and dispatcher
  // (MoeLaunchModel::KernelsBeforeSync; the counts' sources in the preset).
  const bool flex = t_.moe_dispatcher != MoeDispatcher::kAllToAll;
  // Group-limited routing runs when the model limits the groups a token reaches (Megatron-Core
  // moe_utils.py _compute_topk: `if group_topk: group_limited_topk(...)`, moe_router_group_topk =
  // max_routed_groups), one group of all the experts included (Kimi K2's 1 / 1).
  double before = ml.KernelsBeforeSync(m_.moe.max_routed_groups > 0, t_.moe_router_fusion, flex);
  // Graphed router (scope moe_router): what stays eager before the wait is the EP preprocess
  // (preprocess_kernels; none with a flex dispatcher, which runs it in its kernels; the whole count
  // where the preset has no split), unless moe_preprocess is graphed too.
  if (g.moe || (g.moe_router && g.moe_preprocess)) {
    before = 0;
  } else if (g.moe_router) {
    before = flex ? 0.0 : (ml.preprocess_kernels > 0 ? ml.preprocess_kernels : before);
  }
  const double after = moe_block_graphed ? 0.0 : ml.kernels_after_sync;
  const double host_before_f = (n_f + before) * L, host_after_f = after * L + experts_f + bias_f;
  const double host_b = (n_b + 2 * (before + after)) * L + experts_b + bias_b;
  // The GPU's forward of the layer, the EP all-to-all included (on the compute stream in the
  // all-to-all dispatcher), and the part after the wait: the MoE block (module.moe holds its
  // router, experts and exposed dispatch / combine).
  const double g_f = gpu_fwd + c.ep_fwd.time_s, g_b = gpu_bwd + c.ep_bwd.time_s;
  const double g_after = std::min(g_f, c.module.moe.time_s), g_before = g_f - g_after;
  // A dropless dispatcher copies the token counts to the host and waits for them before the
  // variable-size all-to-all (Megatron-Core moe/token_dispatcher.py _maybe_dtoh_and_synchronize;
  // torchtitan models/common/token_dispatcher.py _sync_token_count_exchange): the GPU's queue
  // drains there, so the host's launches after the wait are not hidden behind the work before
  // it. Forward = max(host, GPU) before the wait + max(host, GPU) after; the backward reuses the
  // counts on the host and does not wait. Padded to capacity (drop and pad), the all-to-all
  // dispatcher knows every count in advance and does not wait (token_dispatcher.py core_r0.16
  // MoEAlltoAllTokenDispatcher.preprocess returns before any D2H copy; cuda_sync_point "no_sync").
  // HybridEP likewise: with drop and pad Megatron passes num_permuted_tokens (the capacity), so the
  // dispatch is non-blocking (core_r0.16 fused_a2a.py HybridEPDispatch: `non_blocking =
  // num_permuted_tokens is not None`; token_dispatcher.py _HybridEPManager.setup_metadata).
  // DeepEP refuses padding (ValidateJob).
  const bool padded = job_.choices.moe_router_kernels && t_.moe_pad_expert_input_to_capacity &&
                      t_.moe_expert_capacity_factor > 0 &&
                      (t_.moe_dispatcher == MoeDispatcher::kAllToAll || t_.moe_dispatcher == MoeDispatcher::kHybridEP);
  const bool sync = !padded && (ml.host_sync == MoeHostSync::kEveryLayer ||
                                (ml.host_sync == MoeHostSync::kWithExpertParallel && p_.ep > 1));
  const double floor_f = sync ? std::max(host_before_f, g_before) + std::max(host_after_f, g_after)
                              : std::max(host_before_f + host_after_f, g_f);
  c.launch.Host(std::max(0.0, floor_f - g_f) + std::max(0.0, host_b - g_b));
  c.launch_bwd = {host_b, g_b, host_before_f + host_after_f, before * L + host_after_f};
}

double StepModel::RecomputeLaunchDelta(const LayerCost& c, double recomputed_gpu_s, double share) const {
  if (t_.recompute == Recompute::kNone || share <= 0) return 0;
  const uint32_t mods = t_.recompute == Recompute::kSelective ? RecomputeModuleMask(t_.recompute_modules) : 0;
  // torchtitan's per-op SAC (`every_second_mm`) checkpoints the whole block: its recompute re-runs
  // every op of the forward through the dispatcher, the saved ones returning their stored output
  // (torch.utils.checkpoint create_selective_checkpoint_contexts; torchtitan
  // activation_checkpoint.py _apply_op_sac): the forward's host cost again.
  const double host_s = t_.recompute == Recompute::kFull || (mods & kRecomputeEverySecondMm) ? c.launch_bwd.rec_full_host_s
                        : (mods & kRecomputeMoe)                                            ? c.launch_bwd.rec_moe_host_s
                                                                                            : 0.0;
  const double hb = c.launch_bwd.host_s, gb = c.launch_bwd.gpu_s;
  return share * (std::max(0.0, hb + host_s - gb - recomputed_gpu_s) - std::max(0.0, hb - gb));
}

void StepModel::Logits(LayerCost& c) {
  const double T = tokens_, h = m_.hidden_size, t = p_.tp, V = m_.vocab_size;
  Gemm16(T, V / t, h, c);
  // Final norm, then the loss over T x V/t logits: a fused vocab-parallel fp32 cross entropy
  // (Megatron) reads the logits and writes/reads fp32 softmax statistics (e + 8 bytes forward,
  // 4 + e backward); a framework whose loss moves more gives its bytes per logit.
  c.elem_fwd.Bytes(2 * e_act_ * T * h / (sp_ ? t : 1) * elem_factor_, bw_);
  const double logits = T * V / t;
  if (fw_.cross_entropy_bytes_per_logit > 0) {
    const double per = fw_.cross_entropy_bytes_per_logit;
    c.elem_fwd.Bytes(logits * per / 3, bw_);
    c.elem_bwd.Bytes(logits * per * 2 / 3, bw_);
  } else {
    c.elem_fwd.Bytes(logits * (e_act_ + 8), bw_);
    c.elem_bwd.Bytes(logits * (4 + e_act_), bw_);
  }
  if (p_.tp > 1) {
    const double S = T * h * e_act_;
    const double one = sp_ ? Comm(Collective::kAllGather, place_.tp, S) : 0.0;
    const double back = Comm(sp_ ? Collective::kReduceScatter : Collective::kAllReduce, place_.tp, S);
    // Three small all-reduces of per-token statistics (max, sum, target logit).
    const double stats = 3 * Comm(Collective::kAllReduce, place_.tp, T * 4);
    c.tp_fwd.Comm(one + stats, place_.tp.scope);
    c.tp_bwd.Comm(back, place_.tp.scope);
  }
}

void StepModel::InputEmbedding(LayerCost& c) {
  const double T = tokens_, h = m_.hidden_size, t = p_.tp, V = m_.vocab_size;
  const double e = BytesPerElement(sixteen_bit_dtype_);  // the bf16 / fp16 parameters
  c.elem_fwd.Bytes(T * h * e + T * h * e_act_, bw_);
  if (p_.tp > 1) {
    c.elem_fwd.Bytes(T * h * e_act_, bw_);  // output_parallel[input_mask, :] = 0.0
    const double S = T * h * e_act_;
    if (sp_) {
      c.tp_fwd.Comm(Comm(Collective::kReduceScatter, place_.tp, S), place_.tp.scope);
      c.tp_bwd.Comm(Comm(Collective::kAllGather, place_.tp, S), place_.tp.scope);
    } else {
      c.tp_fwd.Comm(Comm(Collective::kAllReduce, place_.tp, S), place_.tp.scope);
    }
  }
  // The zeroed gradient and the rows' scatter; the gradient's way into the gradient buffer depends
  // on the sharding, which the layer costs do not read: LastStageExtra.
  const double table = V / t * h;
  c.elem_bwd.Bytes(table * e + T * h * (e_act_ + e), bw_);
}

double StepModel::EmbeddingGradIntoBufferBytes() const {
  // Megatron-Core DDP (ZeRO-1 / none): the backward hook's param.main_grad.add_(param.grad) reads
  // the gradient and reads and writes the buffer (distributed_data_parallel.py
  // _make_backward_post_hook); Megatron-FSDP (ZeRO-2 / ZeRO-3): _grad_acc copies it in
  // (megatron_fsdp.py: main_grad.copy_(grad)): read the gradient, write the buffer.
  if (!fw_.dense_embedding_grad || fw_.embedding_lookup_matmul) return 0;
  const double table = static_cast<double>(m_.vocab_size) / p_.tp * m_.hidden_size;
  const double e = BytesPerElement(sixteen_bit_dtype_);
  const bool fsdp = t_.sharding == Sharding::kZero2 || t_.sharding == Sharding::kZero3;
  return table * (e + (fsdp ? 1 : 2) * e_grad_);
}

void StepModel::EmbeddingLookupMatmul(LayerCost& c) {
  // The first stage's work, costed with the output layer's only when both are on one stage
  // (StepModel::LastStageExtra).
  const double T = tokens_, h = m_.hidden_size, t = p_.tp;
  // The token table (vocabulary-parallel over TP, as the output layer's) and a learned position
  // table, each: one_hot(ids) written in the 16-bit type and read by a T x h x rows GEMM forward,
  // read again by the weight gradient's h x rows x T GEMM (accumulated into the gradient); no input
  // gradient (the ids are integers). The position table's one-hot is as wide as the sequence: Praxis
  // slices the table to the batch's length first (TrainablePositionalEmbedding).
  const double positions = std::min<double>(m_.learned_position_embeddings, t_.seq_length);
  for (const double rows : {static_cast<double>(m_.vocab_size) / t, positions}) {
    if (!(rows > 0)) continue;
    const GemmEstimate fwd = EstimateGemmIn(sixteen_bit_dtype_, 1, T, h, rows, false, 0);
    const GemmEstimate wgrad = EstimateGemmIn(sixteen_bit_dtype_, 1, h, rows, T, false, 2 * e_grad_);
    const double e = BytesPerElement(sixteen_bit_dtype_), f = 2 * T * h * rows;
    c.elem_fwd.Bytes(T * rows * e, bw_);
    c.gemm_fwd.Gemm(fwd, 1, f, (T * rows + rows * h) * e + T * h * e_act_);
    c.gemm_bwd.Gemm(wgrad, 1, f, (T * rows + T * h) * e + 2 * rows * h * e_grad_);
  }
}

// Recomputed forward work of one layer under the job's recomputation (full: the whole forward;
// selective: the modules').
Work Recomputed(const LayerCost& c, const TrainingConfig& t) {
  Work w;
  if (t.recompute == Recompute::kFull) return c.Forward();
  if (t.recompute != Recompute::kSelective) return w;
  const ModuleForward& m = c.module;
  uint32_t mods = RecomputeModuleMask(t.recompute_modules);
  if (mods == 0) mods = kRecomputeCoreAttn;
  const bool elementwise_all = (mods & kRecomputeActivationFunctions) != 0;
  if (mods & kRecomputeCoreAttn) w += m.core_attn;
  // The MLP's input GEMMs are part of the whole MLP: counted once.
  if (mods & kRecomputeMlp) {
    w += m.mlp;
  } else if (mods & kRecomputeMlpUp) {
    w += m.mlp_up;
  }
  if (mods & kRecomputeMoe) w += m.moe;
  if ((mods & kRecomputeSharedExperts) && !(mods & kRecomputeMoe)) w += m.shared_experts;
  if (mods & kRecomputeMlaUpProj) w += m.mla_up_proj;
  if (mods & kRecomputeEverySecondMm) w += m.every_second_mm;
  if (elementwise_all) {
    w += m.activation_functions;
    // The MLP's activation is in both; count it once.
    if (mods & (kRecomputeMlp | kRecomputeMlpUp)) w += m.mlp_act.Scaled(-1);
  }
  // Elementwise modules already inside "activation_functions" are not counted twice.
  if ((mods & kRecomputeMoeAct) && !elementwise_all && !(mods & kRecomputeMoe)) w += m.moe_act;
  if ((mods & kRecomputeLayernorm) && !elementwise_all) w += m.layernorm;
  return w;
}

void StepModel::ChunkLayers(RunScratch& r) {
  const double pp = r.pp, v = r.v;
  // Slowest stage: ceil(layers / (pp * vpp)) layers in each of its vpp chunks; with an uneven
  // first / last stage (Megatron-Core --decoder-first/last-pipeline-num-layers), the first, a
  // middle and the last stage's layer counts, the last one also carrying the output layer, its
  // loss and any MTP module (chosen below, once those costs are known).
  const double chunks = pp * v;
  r.layers_per_stage = std::ceil(m_.layers / chunks) * v;
  r.uneven = p_.pp > 1 && (p_.first_stage_layers > 0 || p_.last_stage_layers > 0);
  if (!r.uneven && m_.layers % static_cast<int64_t>(chunks) != 0) {
    warnings_.push_back(absl::StrCat("layers ", m_.layers, " do not divide evenly into pp*vpp = ",
                                     static_cast<int64_t>(chunks), " chunks; the slowest stage has ",
                                     static_cast<int64_t>(r.layers_per_stage), " layers"));
  }
  r.moe_frac = static_cast<double>(m_.MoeLayerCount()) / m_.layers;
}

void StepModel::SlowestStage(const StepLayerCosts& layers, RunScratch& r) {
  const LayerCost& dense = layers.dense;
  const LayerCost& moe = layers.moe;
  const LayerCost& logits = layers.logits;
  const double moe_frac = r.moe_frac;
  const int64_t mtp_layers = r.mtp_layers;
  // Uneven pipeline: which stage is the slowest. A layer's time per micro-batch (forward,
  // backward, its communication), the last stage's extra (output layer, loss, MTP modules).
  auto layer_s = [](const LayerCost& c) {
    return c.gemm_fwd.time_s + c.gemm_bwd.time_s + c.attn_fwd.time_s + c.attn_bwd.time_s + c.elem_fwd.time_s +
           c.elem_bwd.time_s + c.tp_fwd.time_s + c.tp_bwd.time_s + c.ep_fwd.time_s + c.ep_bwd.time_s + c.cp.time_s;
  };
  const double per_layer = layer_s(dense) * (1 - moe_frac) + (moe_frac > 0 ? layer_s(moe) * moe_frac : 0.0);
  const double logits_s = layer_s(logits);
  const double extra = logits_s * (1 + mtp_layers) +
                       mtp_layers * (layer_s(layers.MtpBlock(m_.IsMoeLayer(m_.layers - 1))) + layer_s(layers.mtp_proj));
  const int64_t given_f = p_.first_stage_layers, given_l = p_.last_stage_layers;
  const int64_t middle_stages = p_.pp - (given_f > 0 ? 1 : 0) - (given_l > 0 ? 1 : 0);
  const double mid = middle_stages > 0 ? static_cast<double>(m_.layers - given_f - given_l) / middle_stages : 0.0;
  const double f = given_f > 0 ? given_f : mid, l = given_l > 0 ? given_l : mid;
  const double last_load = l * per_layer + extra, other_layers = std::max(f, mid);
  r.last_is_slowest = last_load >= other_layers * per_layer;
  r.layers_per_stage = r.last_is_slowest ? l : other_layers;
}

void StepModel::StageSums(const StepLayerCosts& layers, RunScratch& r) {
  const LayerCost& dense = layers.dense;
  const LayerCost& moe = layers.moe;
  const double m = r.m, v = r.v, layers_per_stage = r.layers_per_stage, moe_frac = r.moe_frac;
  // Per micro-batch work of one stage's layers, by term.
  auto layers_sum = [&](auto member) {
    Work w = (dense.*member).Scaled(layers_per_stage * (1 - moe_frac));
    if (moe_frac > 0) w += (moe.*member).Scaled(layers_per_stage * moe_frac);
    return w;
  };
  // Forward and backward kept apart too: the bubble's forward share and the DP overlap windows
  // read them.
  r.gemm_f = layers_sum(&LayerCost::gemm_fwd), r.gemm_b = layers_sum(&LayerCost::gemm_bwd);
  r.attn_f = layers_sum(&LayerCost::attn_fwd), r.attn_b = layers_sum(&LayerCost::attn_bwd);
  r.elem_f = layers_sum(&LayerCost::elem_fwd), r.elem_b = layers_sum(&LayerCost::elem_bwd);
  r.gemm = r.gemm_f;
  r.gemm += r.gemm_b;
  r.attn = r.attn_f;
  r.attn += r.attn_b;
  r.elem = r.elem_f;
  r.elem += r.elem_b;
  r.tp = layers_sum(&LayerCost::tp_fwd);
  r.tp += layers_sum(&LayerCost::tp_bwd);
  r.cp = layers_sum(&LayerCost::cp);
  r.ep = layers_sum(&LayerCost::ep_fwd);
  r.ep += layers_sum(&LayerCost::ep_bwd);
  const OverlapMechanism& ep_overlap = fw_.overlap.ep_all_to_all;
  if (moe_frac > 0 && (p_.Schedule() == PipelineSchedule::kDualPipe ||
                       (t_.overlap_ep_comm && ep_overlap.supported && ep_overlap.Structured()))) {
    Work f, b;
    DualPipeExposeEp(moe, &f, &b, p_.Schedule() == PipelineSchedule::kDualPipe ? 0.0 : 1.0 / m);
    f += b;
    r.ep = f.Scaled(layers_per_stage * moe_frac);
  }
  r.launch = layers_sum(&LayerCost::launch);
  // Recomputation: full recompute of recompute_num_layers layers per stage (all when 0), or
  // the selected modules of every layer.
  double recomputed_layers = layers_per_stage;
  if (t_.recompute == Recompute::kFull && t_.recompute_num_layers > 0) {
    recomputed_layers = std::min(layers_per_stage, static_cast<double>(t_.recompute_num_layers) * v);
  }
  const Work dense_rec = Recomputed(dense, t_), moe_rec = moe_frac > 0 ? Recomputed(moe, t_) : Work{};
  r.recompute = dense_rec.Scaled(recomputed_layers * (1 - moe_frac));
  if (moe_frac > 0) r.recompute += moe_rec.Scaled(recomputed_layers * moe_frac);
  // The recomputed forward's launches and GPU work in each layer's backward floor.
  if (t_.recompute != Recompute::kNone && layers_per_stage > 0) {
    const double share = recomputed_layers / layers_per_stage;
    const double dense_delta = RecomputeLaunchDelta(dense, dense_rec.time_s, share);
    double delta = dense_delta * layers_per_stage * (1 - moe_frac);
    if (moe_frac > 0) {
      // A hybrid's MoE layer: its floor is the pair's (the dense layer's included) less the dense
      // layer's, never below zero (as Layers clamps it).
      const double moe_delta =
          moe.launch_less_dense
              ? std::max(0.0, moe.launch_pair_s + RecomputeLaunchDelta(moe, dense_rec.time_s + moe_rec.time_s, share) -
                                  dense.launch.time_s - dense_delta) -
                    moe.launch.time_s
              : RecomputeLaunchDelta(moe, moe_rec.time_s, share);
      delta += moe_delta * layers_per_stage * moe_frac;
    }
    r.launch.Host(delta);
  }
}

void StepModel::PipelineComm(RunScratch& r) {
  const double m = r.m, pp = r.pp, v = r.v;
  Work& pp_comm = r.pp_comm;
  if (p_.pp > 1) {
    const double S = tokens_ * m_.hidden_size * e_act_ / p_.tp;  // scatter-gather optimisation
    const double p2p = 2 * v * Comm(Collective::kSendRecv, place_.pp, S);
    const Work fwd_bwd = [&] {
      Work w = r.gemm;
      w += r.attn;
      w += r.elem;
      return w;
    }();
    const OverlapMechanism& o = fw_.overlap.pp_p2p;
    if (o.supported && o.Structured()) {
      // Megatron-Core overlaps p2p only with the interleaved schedule (validate_args sets
      // overlap_p2p_comm False without VPP), and only in the steady state: the warm-up
      // micro-batches' transfers, num_warmup = 2 (p - 1) + (v - 1) p chunks on the first stage
      // (schedules.py forward_backward_pipelining_with_interleaving), and as many in the
      // cool-down, of the m v chunk passes, stay exposed.
      double exposed = p2p;
      if (!o.needs_vpp || v > 1) {
        const double warmup = o.steady_state_only ? 2 * (pp - 1) + (v - 1) * pp : 0.0;
        const double share = std::min(1.0, warmup / (m * v));
        exposed = p2p * share;
        pp_comm.Contention(ContentionCost(p2p - exposed, o.Slowdown(job_.profile.FindContention("gemm", "nccl").slowdown)));
      }
      pp_comm.Comm(exposed, place_.pp.scope);
    } else {
      pp_comm.Comm(o.Exposed(p2p, fwd_bwd.time_s), place_.pp.scope);
    }
  }
}

void StepModel::LastStageExtra(const StepLayerCosts& layers, RunScratch& r) {
  const LayerCost& logits = layers.logits;
  const int64_t mtp_layers = r.mtp_layers;
  const double pp = r.pp;
  // The last stage also runs the output layer and the loss.
  Work& last_extra_gemm = r.last_extra_gemm;
  Work& last_extra_elem = r.last_extra_elem;
  Work& last_extra_tp = r.last_extra_tp;
  Work& last_extra_attn = r.last_extra_attn;
  Work& last_extra_ep = r.last_extra_ep;
  last_extra_gemm = logits.gemm_fwd;
  last_extra_gemm += logits.gemm_bwd;
  last_extra_elem = logits.elem_fwd;
  last_extra_elem += logits.elem_bwd;
  last_extra_tp = logits.tp_fwd;
  last_extra_tp += logits.tp_bwd;
  // The input embedding, when the one stage holds it and the output layer.
  const LayerCost& embedding = layers.embedding;
  if (p_.pp == 1) {
    last_extra_gemm += embedding.gemm_fwd;
    last_extra_gemm += embedding.gemm_bwd;
    last_extra_elem += embedding.elem_fwd;
    last_extra_elem += embedding.elem_bwd;
    last_extra_tp += embedding.tp_fwd;
    last_extra_tp += embedding.tp_bwd;
    if (const double grad_bytes = EmbeddingGradIntoBufferBytes(); grad_bytes > 0 && bw_ > 0) {
      Work into_buffer;
      into_buffer.Bytes(grad_bytes, bw_);
      last_extra_elem += into_buffer;
    }
  } else if (fw_.embedding_lookup_matmul) {
    warnings_.push_back("the input embedding's one-hot matmul (the framework's embedding_lookup_matmul) runs on the "
                        "first pipeline stage and is not costed with PP > 1");
  }
  if (mtp_layers > 0) {
    // Multi-token prediction (DeepSeek-V3 report Sec. 2.2; Megatron-Core --mtp-num-layers puts
    // the MTP modules on the last pipeline stage): each module is one more transformer block of
    // the model's last layer type (a hybrid: its MTP pattern's layers), its eh_proj (2h -> h) and
    // input norms, and one more pass of the shared output head and its loss.
    const LayerCost& block = layers.MtpBlock(m_.IsMoeLayer(m_.layers - 1));
    const LayerCost& proj = layers.mtp_proj;
    const double k = static_cast<double>(mtp_layers);
    auto both = [](const Work& a, const Work& b) {
      Work w = a;
      w += b;
      return w;
    };
    last_extra_gemm += both(block.gemm_fwd, block.gemm_bwd).Scaled(k);
    last_extra_gemm += both(proj.gemm_fwd, proj.gemm_bwd).Scaled(k);
    last_extra_gemm += both(logits.gemm_fwd, logits.gemm_bwd).Scaled(k);
    last_extra_attn = both(block.attn_fwd, block.attn_bwd).Scaled(k);
    last_extra_elem += both(block.elem_fwd, block.elem_bwd).Scaled(k);
    last_extra_elem += both(proj.elem_fwd, proj.elem_bwd).Scaled(k);
    last_extra_elem += both(logits.elem_fwd, logits.elem_bwd).Scaled(k);
    last_extra_tp += both(block.tp_fwd, block.tp_bwd).Scaled(k);
    last_extra_tp += both(logits.tp_fwd, logits.tp_bwd).Scaled(k);
    last_extra_ep = both(block.ep_fwd, block.ep_bwd).Scaled(k);
    // Its kernels are launched as a layer's: the block's launch floor (LaunchFloor; until
    // 2026-11-30 computed and never added, found by the session's review).
    r.last_extra_launch = block.launch.Scaled(k);
  }

  Work& stage_common = r.stage_common;
  stage_common = r.gemm;
  stage_common += r.attn; stage_common += r.elem; stage_common += r.recompute; stage_common += r.launch;
  stage_common += r.tp; stage_common += r.cp; stage_common += r.ep; stage_common += r.pp_comm;
  Work& last_extra = r.last_extra;
  last_extra = last_extra_gemm;
  last_extra += last_extra_elem;
  last_extra += last_extra_tp;
  last_extra += last_extra_attn;
  last_extra += last_extra_ep;
  last_extra += r.last_extra_launch;
  // The last stage's extra work, averaged over the stages for the bubble either way.
  const double last_extra_avg_s = last_extra.time_s / pp;
  if (!r.last_is_slowest) {
    // A middle or the first stage sets the pace: the output layer's work is not on it.
    last_extra_gemm = last_extra_elem = last_extra_tp = last_extra_attn = last_extra_ep = last_extra = Work{};
    r.last_extra_launch = Work{};
  }
  r.stage_avg_s = stage_common.time_s * (m_.layers / pp) / r.layers_per_stage + last_extra_avg_s;
}

void StepModel::StageBreakdown(const RunScratch& r, StepBreakdown& br) {
  const double m = r.m, pp = r.pp, v = r.v, stage_avg_s = r.stage_avg_s;
  br.gemm_s = m * (r.gemm.time_s + r.last_extra_gemm.time_s);
  br.attention_s = m * (r.attn.time_s + r.last_extra_attn.time_s);
  br.elementwise_s = m * (r.elem.time_s + r.last_extra_elem.time_s);
  br.recompute_s = m * r.recompute.time_s;
  br.launch_overhead_s = m * (r.launch.time_s + r.last_extra_launch.time_s);
  br.tp_comm_s = m * (r.tp.time_s + r.last_extra_tp.time_s);
  br.cp_comm_s = m * r.cp.time_s;
  br.ep_comm_s = m * (r.ep.time_s + r.last_extra_ep.time_s);
  br.pp_comm_s = m * r.pp_comm.time_s;
  // Pipeline bubble per schedule, in units of one micro-batch's forward F and backward B on the
  // average stage (DeepSeek-V3 report Table 2; Narayanan et al. 2021 Sec. 2.2; Qi et al. 2023):
  //   1F1B / GPipe: (p-1)(F+B); interleaved 1F1B: (p-1)(F+B)/v; zero-bubble ZB-H1:
  //   (p-1)(F+B-2W) with W = B/2 (wgrad is half the backward GEMMs) = (p-1)F;
  //   DualPipe: (p/2-1)(F&B+B-3W) with F&B = F+B: (p/2-1)(F+B/2).
  if (p_.pp > 1) {
    const double fwd_share = [&] {
      Work f = r.gemm_f;
      f += r.attn_f;
      f += r.elem_f;
      const double all = r.gemm.time_s + r.attn.time_s + r.elem.time_s;
      return all > 0 ? f.time_s / all : 1.0 / 3;
    }();
    const double F = stage_avg_s * fwd_share, B = stage_avg_s - F;
    switch (p_.Schedule()) {
      case PipelineSchedule::k1F1B:
      case PipelineSchedule::kGPipe: br.pipeline_bubble_s = (pp - 1) * stage_avg_s; break;
      case PipelineSchedule::kInterleaved1F1B: br.pipeline_bubble_s = (pp - 1) / v * stage_avg_s; break;
      case PipelineSchedule::kZeroBubble: br.pipeline_bubble_s = (pp - 1) * F / v; break;
      case PipelineSchedule::kDualPipe: br.pipeline_bubble_s = std::max(0.0, pp / 2 - 1) * (F + B / 2); break;
    }
  }
}

void StepModel::DpSetup(const RunScratch& r, DpScratch& d) {
  // The counts made for the layers when there are any (not when Run was given layer costs).
  d.local = LocalParameterCount(job_, false, layers_needed_ ? pc_ : CountParameters(m_));
  d.eg = BytesPerElement(t_.precision.grad_reduce);
  d.e_gather = t_.fp8_param_gather ? 1.0 : e_act_;
  d.replicas = std::max<int64_t>(1, p_.dp_replicate);
  d.shard = p_.ShardGroup();
  const int64_t replicas = d.replicas, shard = d.shard;
  d.dense_group = PlaceGroups({.tp = p_.tp, .dp = shard}, job_.GpusPerNode()).dp;
  d.expert_group =
      PlaceGroups({.tp = p_.Etp() * p_.ep, .dp = std::max<int64_t>(1, p_.Edp() / replicas)}, job_.GpusPerNode()).dp;
  // HSDP: the gradient shards are all-reduced across the replicas.
  if (replicas > 1 && t_.sharding != Sharding::kNone) {
    d.replica_group = PlaceGroups({.tp = p_.tp * shard, .dp = replicas}, job_.GpusPerNode()).dp;
    d.replica_bytes = d.local.total() / shard * d.eg;
  }
  const Work bwd_mb = [&] {
    Work w = r.gemm_b;
    w += r.attn_b;
    w += r.elem_b;
    return w;
  }();
  const Work fwd_mb = [&] {
    Work w = r.gemm_f;
    w += r.attn_f;
    w += r.elem_f;
    return w;
  }();
  d.bwd_mb_s = bwd_mb.time_s;
  d.fwd_mb_s = fwd_mb.time_s;
}

void StepModel::FsdpComm(const RunScratch& run, DpScratch& d, Work& fsdp_copy, bool reshard_after_forward) {
  const double m = run.m, layers_per_stage = run.layers_per_stage;
  const LocalParameters& local = d.local;
  const double eg = d.eg, ep_ = d.e_gather;
  const int64_t shard = d.shard;
  const OverlapModel& o = fw_.overlap;
  // FSDP / ZeRO-3 (FSDP paper, Zhao et al. 2023, arXiv:2304.11277 Sec. 3): parameters
  // gathered before each forward (and again before the backward when resharded after the
  // forward), gradients reduce-scattered after each backward. With PP and the framework's
  // gather-once semantics: one gather and one reduce-scatter per step.
  const bool once_pp = p_.pp > 1 && fw_.sharding.gather_once_per_step_with_pp;
  const bool once_rs = once_pp || fw_.sharding.reduce_once_per_step_with_accumulation;
  const double gathers_per_mb = reshard_after_forward && !once_pp ? 2 : 1;
  // Units the collectives are issued in: one per layer of the stage (FSDP wrapping each
  // block), or the mechanism's buckets (DeepSpeed ZeRO-3: gathers in stage3_prefetch_bucket_size
  // buckets, reduce-scatters in reduce_bucket_size ones, dp_grad_reduce's). Each unit's gather
  // and reduce-scatter is its own collective, with its own latency.
  const OverlapMechanism& og = o.fsdp_param_gather;
  const double units = og.per_layer ? layers_per_stage : og.Buckets(local.total(), ep_, shard);
  const double rs_units = og.per_layer || !o.dp_grad_reduce.Structured() ? units
                                                                         : o.dp_grad_reduce.Buckets(local.total(), eg, shard);
  const double ag = DpReduceIn(d, Collective::kAllGather, local.dense * ep_, local.expert * ep_, units);
  const double rs = DpReduceIn(d, Collective::kReduceScatter, local.dense * eg, local.expert * eg, rs_units);
  const double replica_ar = ReplicaAllReduce(d, rs_units);
  // The backward's gathers and reduce-scatters cross the same links (NCCL on the same NICs /
  // NVLinks): structured, they are one pipelined stream per unit behind the backward (the
  // first unit's gather and the last unit's reduce-scatter exposed); legacy, each hidden
  // behind its share of the window at its mechanism's efficiency.
  auto pair = [&](double ag_s, double rs_s, double window_s) {
    const double total = ag_s + rs_s;
    if (total <= 0) return OverlapCost{};
    if (og.Structured() && fw_.sharding.backward_gathers_exposed) {
      // FSDP1 BACKWARD_POST: each unit waits for its own gather; the reduce-scatters are
      // pipelined behind the backward.
      OverlapCost c = DpOverlapped(og, rs_s, window_s, units);
      c.exposed_s += ag_s;
      return c;
    }
    if (og.Structured()) return DpOverlapped(og, total, window_s, units);
    const double ag_window = window_s * ag_s / total, rs_window = window_s * rs_s / total;
    const OverlapCost a = DpOverlapped(og, ag_s, ag_window, 1), r = DpOverlapped(o.dp_grad_reduce, rs_s, rs_window, 1);
    return OverlapCost{a.exposed_s + r.exposed_s, a.contention_s + r.contention_s};
  };
  // FSDP2's copies on the compute stream around its collectives (framework.proto
  // ShardingModel.gather_copy_out / reduce_scatter_copy_in): per all-gather the gathered
  // parameters are read and written once (split_with_sizes_copy); per reduce-scatter the
  // unsharded gradients (parameter dtype, at least 2 bytes) are read and written at the
  // reduce dtype (chunk_cat). pytorch torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py.
  // No sharding group (one rank): nothing is gathered (torchtitan applies fully_shard only
  // when FSDP is enabled, dp_shard > 1).
  if (shard > 1) {
    const double gathers = once_pp ? 1.0 : m * gathers_per_mb;
    const double reduces = once_rs ? 1.0 : m;
    const double e_grad = std::max(2.0, BytesPerElement(t_.precision.params));
    double copy_bytes = 0;
    if (fw_.sharding.gather_copy_out) copy_bytes += gathers * 2 * ep_ * local.total();
    if (fw_.sharding.reduce_scatter_copy_in) copy_bytes += reduces * (e_grad + eg) * local.total();
    fsdp_copy.Bytes(copy_bytes, bw_);
  }
  if (once_pp) {
    DpAdd(d, DpOverlapped(og, ag, d.fwd_mb_s, units));
    DpAdd(d, pair(0, rs + replica_ar, d.bwd_mb_s));
  } else {
    DpAdd(d, DpOverlapped(og, ag, d.fwd_mb_s, units), m);
    const double bwd_ag = gathers_per_mb > 1 ? ag : 0.0;
    if (once_rs) {
      // Gradients reduced once, after the last micro-batch's backward.
      DpAdd(d, pair(bwd_ag, 0, d.bwd_mb_s), m - 1);
      DpAdd(d, pair(bwd_ag, rs + replica_ar, d.bwd_mb_s));
    } else {
      // HSDP: the replica all-reduce after each reduce-scatter where the framework issues it every
      // micro-batch (framework.proto replica_all_reduce_every_micro_batch), else after the last.
      const double replica_ar_each = fw_.sharding.replica_all_reduce_every_micro_batch ? replica_ar : 0.0;
      DpAdd(d, pair(bwd_ag, rs + replica_ar_each, d.bwd_mb_s), m - 1);
      DpAdd(d, pair(bwd_ag, rs + replica_ar, d.bwd_mb_s));
    }
  }
}

void StepModel::DdpZeroComm(const RunScratch& run, DpScratch& d) {
  const LocalParameters& local = d.local;
  const double eg = d.eg, ep_ = d.e_gather;
  const int64_t shard = d.shard;
  const OverlapModel& o = fw_.overlap;
  // DDP (all-reduce) or ZeRO-1/2 / Megatron distributed optimizer: gradients reduced in
  // buckets during the last micro-batch's backward (the last bucket exposed), updated
  // parameters all-gathered in buckets during the next forward (the first bucket exposed).
  // Each bucket is its own collective, with its own latency (DpReduceIn). A ZeRO-2 that
  // reduces every micro-batch on an FSDP unit structure (Megatron-FSDP optim_grads: each unit's
  // _post_backward hook reduce-scatters its gradients) issues them per unit.
  const double params = local.total();
  const bool zero2_every_mb = t_.sharding == Sharding::kZero2 && fw_.sharding.zero2_reduces_every_micro_batch;
  const bool per_layer = o.dp_grad_reduce.per_layer || (zero2_every_mb && o.fsdp_param_gather.per_layer);
  const double grad_buckets = per_layer ? std::max(1.0, run.layers_per_stage) : o.dp_grad_reduce.Buckets(params, eg, shard);
  if (t_.sharding == Sharding::kNone) {
    const double ar = DpReduceIn(d, Collective::kAllReduce, local.dense * eg, local.expert * eg, grad_buckets);
    DpAdd(d, DpOverlapped(o.dp_grad_reduce, ar, d.bwd_mb_s, grad_buckets));
  } else {
    const double gather_buckets = o.dp_param_gather.Buckets(params, ep_, shard);
    const double rs = DpReduceIn(d, Collective::kReduceScatter, local.dense * eg, local.expert * eg, grad_buckets);
    const double ag = DpReduceIn(d, Collective::kAllGather, local.dense * ep_, local.expert * ep_, gather_buckets);
    // ZeRO-2 that reduces every micro-batch (framework.proto zero2_reduces_every_micro_batch):
    // the earlier micro-batches' reduce-scatters behind their own backward too.
    if (zero2_every_mb && run.m > 1) {
      DpAdd(d, DpOverlapped(o.dp_grad_reduce, rs, d.bwd_mb_s, grad_buckets), run.m - 1);
    }
    DpAdd(d, DpOverlapped(o.dp_grad_reduce, rs + ReplicaAllReduce(d, grad_buckets), d.bwd_mb_s, grad_buckets));
    DpAdd(d, DpOverlapped(o.dp_param_gather, ag, d.fwd_mb_s, gather_buckets));
  }
}

Work StepModel::OptimizerStep(const DpScratch& d) {
  const LocalParameters& local = d.local;
  const double ep_ = d.e_gather;
  // Optimizer step: memory-bound over the local (sharded) parameters.
  const double opt_params = t_.sharding == Sharding::kNone
                                ? local.total()
                                : local.dense / d.shard + local.expert / std::max<int64_t>(1, p_.Edp() / d.replicas);
  // Bytes per parameter of Megatron's mixed-precision optimizer step (optimizer.py,
  // FP16OptimizerWithFP16Params / DistributedOptimizer): copy model grads to fp32 main grads
  // when they are narrower (read eg, write 4); fp16 loss scaling: unscale + inf check (read 4,
  // write 4); gradient-norm clip (read 4); Adam/SGD update (read master, grad, states; write
  // master, states); copy master back to the model params (read master, write params).
  const double gb = BytesPerElement(t_.precision.grads);
  const double mb = BytesPerElement(t_.precision.master_weights);
  double sb = BytesPerElement(t_.precision.optimizer_states);
  int states = 2;
  if (t_.optimizer == Optimizer::kAdamW8bit) sb = 1;
  if (t_.optimizer == Optimizer::kSgd || t_.optimizer == Optimizer::kMuon) states = 1;
  double per_param = 0;
  if (gb < 4) per_param += gb + 4;
  if (t_.precision.params == DType::kFP16) per_param += 8;
  per_param += 4;                                  // grad-norm
  per_param += 2 * mb + 2 * states * sb + 4;       // update
  if (t_.precision.master_weights != t_.precision.params) per_param += mb + ep_;  // copy back
  Work opt;
  opt.Bytes(opt_params * per_param, bw_);
  if (t_.optimizer == Optimizer::kMuon) opt += MuonNewtonSchulz(d, opt_params);
  return opt;
}

Work StepModel::MuonNewtonSchulz(const DpScratch& d, double opt_params) {
  // Muon orthogonalises each weight matrix's update X (m x n, m <= n) with 5 Newton-Schulz
  // iterations, each A = X X^T (m x m over n), B = A A (m x m over m) and B X (m x n over m):
  // 2m^2n + 2m^3 + 2m^2n FLOPs (Jordan et al. 2024, "Muon", zeropower_via_newtonschulz5; Moonlight,
  // arXiv:2502.16982, Sec. 2.1). The local matrices: the experts' h x f_e (three per expert), the
  // dense parameters as h x h (attention projections; an MLP's h x f costs less per parameter,
  // and the embedding and output layer, on the end stages, run AdamW in Muon's recipes: so this
  // bounds the dense part from above). In the job's GEMM dtype (Muon's reference runs bf16).
  // Each rank orthogonalises the share of the matrices it owns (Megatron's layer-wise
  // distributed Muon; Moonlight Algorithm 1 gathers each matrix to the ranks of its shard): the
  // local matrices x opt_params / local parameters.
  Work w;
  const LocalParameters& local = d.local;
  if (local.total() <= 0) return w;
  const double share = opt_params / local.total();
  const double h = m_.hidden_size;
  constexpr double kIterations = 5;
  auto newton_schulz = [&](double m, double n, double count) {
    if (m > n) std::swap(m, n);
    w += GemmForward(m, m, n, kIterations * count);
    w += GemmForward(m, m, m, kIterations * count);
    w += GemmForward(m, n, m, kIterations * count);
  };
  if (local.dense > 0 && h > 0) newton_schulz(h, h, share * local.dense / (h * h));
  const double fe = m_.moe.expert_ffn_hidden_size;
  if (local.expert > 0 && h > 0 && fe > 0) newton_schulz(h, fe, share * local.expert / (h * fe));
  return w;
}

StepTimeEstimate StepModel::Run(const StepLayerCosts* layers) {
  StepTimeEstimate out;
  RunScratch r;
  r.m = static_cast<double>(job_.MicroBatchesPerStep());
  r.pp = p_.pp, r.v = p_.vpp;
  ChunkLayers(r);
  std::optional<StepLayerCosts> own;
  if (layers == nullptr) {
    FillLayers(own.emplace());
    layers = &*own;
  }
  r.mtp_layers = job_.MtpDepths();
  if (r.uneven) SlowestStage(*layers, r);
  StageSums(*layers, r);
  PipelineComm(r);
  LastStageExtra(*layers, r);
  StepBreakdown& br = out.breakdown;
  StageBreakdown(r, br);

  // Data-parallel gradient reduction and parameter gathers (ZeRO / FSDP), with the overlap the
  // framework achieves.
  Work dp;
  Work fsdp_copy;  // memory-bound copies around FSDP's collectives, on the compute stream
  DpScratch d;
  DpSetup(r, d);
  if (t_.sharding == Sharding::kZero3) {
    FsdpComm(r, d, fsdp_copy, fw_.sharding.reshard_after_forward);
  } else if (t_.sharding == Sharding::kZero2 && fw_.sharding.zero2_is_shard_grad_op) {
    FsdpComm(r, d, fsdp_copy, false);
  } else {
    DdpZeroComm(r, d);
  }
  dp.Comm(d.exp_s, d.dense_group.scope);
  dp.Contention(d.contention_s);
  br.dp_comm_s = dp.time_s;
  br.elementwise_s += fsdp_copy.time_s;
  const Work opt = OptimizerStep(d);
  br.optimizer_s = opt.time_s;

  // Split of the step by limiting resource.
  Work per_mb_last = r.stage_common;
  per_mb_last += r.last_extra;
  Work all = per_mb_last.Scaled(r.m);
  all += dp;
  all += fsdp_copy;
  all += opt;
  out.compute_bound_s = all.compute_s;
  out.memory_bound_s = all.memory_s;
  out.network_intra_node_s = all.intra_s;
  out.network_inter_node_s = all.inter_s;
  out.bubble_s = br.pipeline_bubble_s;
  out.executed_flops = all.flops;
  out.hbm_bytes = all.bytes;
  out.step_time_s = br.Total();
  const double big_rate = job_.profile.GemmRate(t_.precision.gemm, 8192, 8192, 8192).flops_per_s;
  out.machine_balance_flops_per_byte = big_rate / bw_;
  out.warnings = std::move(warnings_);
  return out;
}

}  // namespace

double Fp8QuantizeBytesPerElement(Fp8Recipe r, double input_bytes, bool column_wise, bool fp8_transpose) {
  constexpr double kMxScale = 1.0 / 32;  // one E8M0 byte per 32-element block
  switch (r) {
    case Fp8Recipe::kMxfp8: return input_bytes + (1 + kMxScale) * (column_wise ? 2 : 1);
    case Fp8Recipe::kDelayed: return input_bytes + 1 + (column_wise && fp8_transpose ? 1 : 0);
    // torchao's row-wise cast (torchao/float8/float8_linear.py; its roofline_utils.py counts the
    // same): the forward cast reads the tensor, writes its fp8 rows and keeps a bf16 copy for the
    // backward (e + 1 + e), whose cast along the other axis reads that copy and writes fp8 (e + 1).
    case Fp8Recipe::kRowwise: return column_wise ? 3 * input_bytes + 2 : input_bytes + 1;
    case Fp8Recipe::kTensorwise: break;
  }
  return 2 * input_bytes + 1 + (column_wise && fp8_transpose ? 1 : 0);
}

double Fp8QuantizeBandwidthFraction(Fp8Recipe r, bool blackwell) {
  if (!blackwell) return 1.0;
  switch (r) {
    case Fp8Recipe::kTensorwise: return 1.732 / 2.335;
    case Fp8Recipe::kMxfp8: return 1.265 / 1.823;
    case Fp8Recipe::kDelayed: break;
    case Fp8Recipe::kRowwise: break;  // torchao's own casts: not measured by TE's benchmark
  }
  return 1.0;
}

StepTimeEstimate EstimateStepTime(const Job& job) { return StepModel(job).Run(); }

LayerModuleTimes EstimateLayerModules(const Job& job, bool moe_layer) {
  return StepModel(job).Modules(moe_layer && job.model.MoeLayerCount() > 0);
}

std::shared_ptr<const StepLayerCosts> ComputeStepLayerCosts(const Job& job, const GemmModel* gemm_model) {
  return std::make_shared<const StepLayerCosts>(StepModel(job, gemm_model).Layers());
}

StepTimeEstimate EstimateStepTime(const Job& job, const StepLayerCosts& layers) {
  return StepModel(job, nullptr, false).Run(&layers);
}

}  // namespace stepcast

