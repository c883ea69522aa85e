#include "core/step_time.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
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
  void Bytes(double b, double bw) {
    bytes += b;
    time_s += b / bw;
    memory_s += b / bw;
  }
  void Comm(double t, Scope scope) {
    time_s += t;
    (scope == Scope::kIntraNode ? intra_s : inter_s) += t;
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

// Everything one layer (or the logits) costs per micro-batch, by term.
struct LayerCost {
  Work gemm_fwd, gemm_bwd, attn_fwd, attn_bwd, elem_fwd, elem_bwd;
  Work tp_fwd, tp_bwd, cp, ep;
  Work Forward() const {
    Work w = gemm_fwd; w += attn_fwd; w += elem_fwd; w += tp_fwd; return w;
  }
};

class StepModel {
 public:
  explicit StepModel(const Job& job)
      : job_(job),
        m_(job.model.Resolved()),
        t_(job.training),
        p_(job.parallelism),
        place_(PlaceGroups(job.parallelism, job.GpusPerNode())) {
    bw_ = job.profile.hbm_bandwidth_bytes_per_s;
    e_act_ = BytesPerElement(t_.precision.params);
    e_in_ = BytesPerElement(t_.precision.gemm);
    tokens_ = static_cast<double>(t_.micro_batch_size) * t_.seq_length / p_.cp;
    sp_ = p_.sequence_parallel && p_.tp > 1;
  }

  StepTimeEstimate Run();

 private:
  double GemmRate(double m, double n, double k) {
    const auto r = job_.profile.GemmRate(t_.precision.gemm, m, n, k);
    if (r.flat) return r.flops_per_s * WaveEfficiency(m, n, job_.hardware.sm_count);
    if (r.extrapolated && !warned_gemm_) {
      warned_gemm_ = true;
      warnings_.push_back(absl::StrCat("GEMM rate for ", DTypeName(t_.precision.gemm),
                                       " extrapolated beyond the profile's measured shapes"));
    }
    return r.flops_per_s;
  }
  // Forward GEMM m x k by k x n; backward (dgrad + wgrad) 2x.
  void Gemm(double m, double n, double k, LayerCost& c, double count = 1) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    const double rate = GemmRate(m, n, k);
    const double f = 2 * m * n * k * count;
    const double b = ((m * k + k * n) * e_in_ + m * n * e_act_) * count;
    c.gemm_fwd.Roofline(f, b, rate, bw_);
    c.gemm_bwd.Roofline(2 * f, 2 * b, rate, bw_);
    if (t_.precision.gemm == DType::kFP8) {
      // Transformer Engine fp8 with current scaling: an amax pass (read), the cast (read, write)
      // and the transposed copy Hopper/Blackwell fp8 GEMMs need for wgrad/dgrad (write), of the
      // activation input forward and of the output gradient backward: 2e + 2 bytes/element.
      c.elem_fwd.Bytes((2 * e_act_ + 2) * m * k * count, bw_);
      c.elem_bwd.Bytes((2 * e_act_ + 2) * m * n * count, bw_);
    }
  }
  double Comm(Collective coll, const GroupPlacement& g, double size_bytes);
  LayerCost Layer(bool moe);
  LayerCost Logits();

  const Job& job_;
  const ModelShape m_;
  const TrainingConfig& t_;
  const Parallelism& p_;
  const Placement place_;
  double bw_ = 0, e_act_ = 2, e_in_ = 2, tokens_ = 0;
  bool sp_ = false;
  bool warned_gemm_ = false;
  std::vector<std::string> warnings_;
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
    warnings_.push_back(absl::StrCat("no ", CollectiveName(coll), " ", ScopeName(g.scope),
                                     " rate in the profile; using the datasheet link"));
  }
  if (g.scope == Scope::kInterNode && g.members_per_node > 1 && r->points.empty()) {
    // Hierarchical group: k members per node stripe over k NICs, capped by the intra-node rate.
    CollectiveRate striped = *r;
    const CollectiveRate* intra = prof.FindCollective(coll, Scope::kIntraNode);
    const double cap = intra ? intra->busbw_bytes_per_s : job_.hardware.intra_node_bandwidth_bytes_per_s;
    striped.busbw_bytes_per_s = std::min(cap, r->busbw_bytes_per_s * g.members_per_node);
    return CollectiveTime(striped, g.size, size_bytes);
  }
  return CollectiveTime(*r, g.size, size_bytes);
}

LayerCost StepModel::Layer(bool moe) {
  LayerCost c;
  const double T = tokens_, h = m_.hidden_size, t = p_.tp;
  const double a = m_.attention_heads, kv = m_.kv_heads;
  const double dqk = m_.QkHeadDim(), dv = m_.VHeadDim();
  const ParameterCounts pc = CountParameters(m_);
  const int fm = m_.ffn_type == FfnType::kSwiGlu ? 3 : 2;

  // Attention projections: input side (QKV or MLA down/up) and output.
  const double attn_in = pc.attention_gemm - a * dv * h;
  Gemm(T, attn_in / (h * t), h, c);
  Gemm(T, h, a * dv / t, c);

  // Attention core.
  const double b = t_.micro_batch_size, sq = static_cast<double>(t_.seq_length) / p_.cp;
  const double skv = static_cast<double>(t_.seq_length);
  const double heads = a / t;
  const double scores = b * heads * sq * skv;
  if (t_.flash_attention) {
    const double f = 2 * scores * (dqk + dv) * 0.5;  // causal: half the blocks
    const double rate = job_.profile.attention_flops_per_s > 0 ? job_.profile.attention_flops_per_s
                                                               : GemmRate(sq, skv, dqk);
    const double io = e_act_ * b * sq * heads * (2 * dqk + 2 * dv);  // Q, K, V in, O out
    c.attn_fwd.Roofline(f, io, rate, bw_);
    c.attn_bwd.Roofline(2.5 * f, 2 * io, rate, bw_);
  } else {
    const double qk_rate = GemmRate(b * heads * sq, skv, dqk);
    const double qk_bytes = b * heads * (sq * dqk + dqk * skv + sq * skv) * e_act_;
    const double av_bytes = b * heads * (sq * skv + skv * dv + sq * dv) * e_act_;
    c.attn_fwd.Roofline(2 * scores * dqk, qk_bytes, qk_rate, bw_);
    c.attn_fwd.Roofline(2 * scores * dv, av_bytes, qk_rate, bw_);
    c.attn_bwd.Roofline(4 * scores * dqk, 2 * qk_bytes, qk_rate, bw_);
    c.attn_bwd.Roofline(4 * scores * dv, 2 * av_bytes, qk_rate, bw_);
    // Fused scale-mask-softmax (read + write), dropout (read, write, 1-byte mask).
    const double drop = t_.dropout ? 2 * e_act_ + 1 : 0;
    c.attn_fwd.Bytes(scores * (2 * e_act_ + drop), bw_);
    c.attn_bwd.Bytes(scores * (3 * e_act_ + drop), bw_);
  }

  // FFN.
  if (moe) {
    const double E = m_.moe.routed_experts, k = m_.moe.top_k, fe = m_.moe.expert_ffn_hidden_size;
    Gemm(T, E, h, c);  // router
    const double per_expert_tokens = T * k * p_.ep / E;
    const double local_experts = E / p_.ep;
    Gemm(per_expert_tokens, (fm - 1) * fe / t, h, c, local_experts);
    Gemm(per_expert_tokens, h, fe / t, c, local_experts);
    if (m_.moe.shared_experts > 0) {
      const double fs = m_.moe.shared_expert_ffn_hidden_size * m_.moe.shared_experts;
      Gemm(T, (fm - 1) * fs / t, h, c);
      Gemm(T, h, fs / t, c);
    }
    const double act = (fm == 3 ? 3 : 2) * e_act_ * T * (k * fe + m_.moe.shared_experts *
                                                         m_.moe.shared_expert_ffn_hidden_size) / t;
    const double permute = 2 * 2 * e_act_ * T * k * h / (sp_ ? t : 1);  // dispatch + combine
    c.elem_fwd.Bytes(act + permute, bw_);
    c.elem_bwd.Bytes(2 * (act + permute), bw_);
  } else {
    const double f = m_.ffn_hidden_size;
    Gemm(T, (fm - 1) * f / t, h, c);
    Gemm(T, h, f / t, c);
    const double act = (fm == 3 ? 3 : 2) * e_act_ * T * f / t;
    c.elem_fwd.Bytes(act, bw_);
    c.elem_bwd.Bytes(2 * act, bw_);
  }

  // Norms and residual adds (+ dropout masks) on h-wide activations.
  const double xh = T * h / (sp_ ? t : 1);
  double elem = 2 * (2 * e_act_ * xh) + 2 * (3 * e_act_ * xh + (t_.dropout ? xh : 0));
  if (m_.learned_position_embeddings == 0) elem += 2 * e_act_ * T * (a + kv) * dqk / t;  // RoPE
  c.elem_fwd.Bytes(elem, bw_);
  c.elem_bwd.Bytes(2 * elem, bw_);

  // Tensor parallel communication.
  if (p_.tp > 1) {
    const double S = T * h * e_act_;
    double fwd = 0;
    if (sp_) {
      fwd = 2 * Comm(Collective::kAllGather, place_.tp, S) + 2 * Comm(Collective::kReduceScatter, place_.tp, S);
    } else {
      fwd = 2 * Comm(Collective::kAllReduce, place_.tp, S);
    }
    c.tp_fwd.Comm(fwd, place_.tp.scope);
    c.tp_bwd.Comm(fwd, place_.tp.scope);
    if (t_.overlap_tp_comm) {
      c.tp_fwd.ExposeComm(std::max(0.0, fwd - c.gemm_fwd.time_s));
      c.tp_bwd.ExposeComm(std::max(0.0, fwd - c.gemm_bwd.time_s));
    }
  }
  // Context parallel ring exchange of K and V, hidden under the attention core where it can.
  if (p_.cp > 1) {
    const double kv_width = m_.mla.enabled() ? a * (dqk + dv) : kv * (dqk + dv);
    const double kv_bytes = b * sq * kv_width / t * e_act_;
    const double step = Comm(Collective::kSendRecv, place_.cp, kv_bytes);
    const double fwd = (p_.cp - 1) * step, bwd = 2 * (p_.cp - 1) * step;
    const double exposed = std::max(0.0, fwd - c.attn_fwd.time_s) + std::max(0.0, bwd - c.attn_bwd.time_s);
    c.cp.Comm(exposed, place_.cp.scope);
  }
  // Expert parallel all-to-all: dispatch and combine, forward and backward.
  if (moe && p_.ep > 1) {
    const double S = T * m_.moe.top_k * h * e_act_;
    c.ep.Comm(4 * Comm(Collective::kAllToAll, place_.ep, S), place_.ep.scope);
  }
  return c;
}

LayerCost StepModel::Logits() {
  LayerCost c;
  const double T = tokens_, h = m_.hidden_size, t = p_.tp, V = m_.vocab_size;
  Gemm(T, V / t, h, c);
  // Final norm, vocab-parallel cross entropy in fp32 (logits read, fp32 softmax written/read).
  c.elem_fwd.Bytes(2 * e_act_ * T * h / (sp_ ? t : 1) + T * V / t * (e_act_ + 8), bw_);
  c.elem_bwd.Bytes(T * V / t * (4 + e_act_), bw_);
  if (p_.tp > 1) {
    const double S = T * h * e_act_;
    const double one = sp_ ? Comm(Collective::kAllGather, place_.tp, S) : 0.0;
    const double back = Comm(sp_ ? Collective::kReduceScatter : Collective::kAllReduce, place_.tp, S);
    // Three small all-reduces of per-token statistics (max, sum, target logit).
    const double stats = 3 * Comm(Collective::kAllReduce, place_.tp, T * 4);
    c.tp_fwd.Comm(one + stats, place_.tp.scope);
    c.tp_bwd.Comm(back, place_.tp.scope);
  }
  return c;
}

StepTimeEstimate StepModel::Run() {
  StepTimeEstimate out;
  const double m = static_cast<double>(job_.MicroBatchesPerStep());
  const double pp = p_.pp, v = p_.vpp;
  // Slowest stage: ceil(layers / (pp * vpp)) layers in each of its vpp chunks.
  const double chunks = pp * v;
  const double layers_per_stage = std::ceil(m_.layers / chunks) * v;
  if (m_.layers % static_cast<int64_t>(chunks) != 0) {
    warnings_.push_back(absl::StrCat("layers ", m_.layers, " do not divide evenly into pp*vpp = ",
                                     static_cast<int64_t>(chunks), " chunks; the slowest stage has ",
                                     static_cast<int64_t>(layers_per_stage), " layers"));
  }
  const double moe_frac = static_cast<double>(m_.MoeLayerCount()) / m_.layers;

  const LayerCost dense = Layer(false);
  LayerCost moe;
  if (moe_frac > 0) moe = Layer(true);
  const LayerCost logits = Logits();

  // Per micro-batch work of one stage's layers, by term.
  auto layers_sum = [&](auto member) {
    Work w = (dense.*member).Scaled(layers_per_stage * (1 - moe_frac));
    if (moe_frac > 0) w += (moe.*member).Scaled(layers_per_stage * moe_frac);
    return w;
  };
  Work gemm = layers_sum(&LayerCost::gemm_fwd);
  gemm += layers_sum(&LayerCost::gemm_bwd);
  Work attn = layers_sum(&LayerCost::attn_fwd);
  attn += layers_sum(&LayerCost::attn_bwd);
  Work elem = layers_sum(&LayerCost::elem_fwd);
  elem += layers_sum(&LayerCost::elem_bwd);
  Work tp = layers_sum(&LayerCost::tp_fwd);
  tp += layers_sum(&LayerCost::tp_bwd);
  Work cp = layers_sum(&LayerCost::cp);
  Work ep = layers_sum(&LayerCost::ep);
  Work recompute;
  if (t_.recompute == Recompute::kFull) {
    recompute = dense.Forward().Scaled(layers_per_stage * (1 - moe_frac));
    if (moe_frac > 0) recompute += moe.Forward().Scaled(layers_per_stage * moe_frac);
  } else if (t_.recompute == Recompute::kSelective && !t_.flash_attention) {
    recompute = layers_sum(&LayerCost::attn_fwd);
  }
  Work pp_comm;
  if (p_.pp > 1) {
    const double S = tokens_ * m_.hidden_size * e_act_ / p_.tp;  // scatter-gather optimisation
    pp_comm.Comm(2 * v * Comm(Collective::kSendRecv, place_.pp, S), place_.pp.scope);
  }
  // The last stage also runs the output layer and the loss.
  Work last_extra_gemm = logits.gemm_fwd;
  last_extra_gemm += logits.gemm_bwd;
  Work last_extra_elem = logits.elem_fwd;
  last_extra_elem += logits.elem_bwd;
  Work last_extra_tp = logits.tp_fwd;
  last_extra_tp += logits.tp_bwd;

  Work stage_common = gemm;
  stage_common += attn; stage_common += elem; stage_common += recompute;
  stage_common += tp; stage_common += cp; stage_common += ep; stage_common += pp_comm;
  Work last_extra = last_extra_gemm;
  last_extra += last_extra_elem;
  last_extra += last_extra_tp;
  const double stage_avg_s = stage_common.time_s * (m_.layers / pp) / layers_per_stage + last_extra.time_s / pp;

  StepBreakdown& br = out.breakdown;
  br.gemm_s = m * (gemm.time_s + last_extra_gemm.time_s);
  br.attention_s = m * attn.time_s;
  br.elementwise_s = m * (elem.time_s + last_extra_elem.time_s);
  br.recompute_s = m * recompute.time_s;
  br.tp_comm_s = m * (tp.time_s + last_extra_tp.time_s);
  br.cp_comm_s = m * cp.time_s;
  br.ep_comm_s = m * ep.time_s;
  br.pp_comm_s = m * pp_comm.time_s;
  br.pipeline_bubble_s = (pp - 1) / v * stage_avg_s;

  // Data-parallel gradient reduction (and ZeRO parameter gathers).
  Work dp;
  {
    const LocalParameters local = LocalParameterCount(job_);
    const double eg = BytesPerElement(t_.precision.grads), ep_ = e_act_;
    const GroupPlacement dense_group = PlaceGroups({.tp = p_.tp, .dp = p_.dp * p_.cp}, job_.GpusPerNode()).dp;
    GroupPlacement expert_group = dense_group;
    expert_group.size = p_.dp * p_.cp / p_.ep;
    auto reduce = [&](Collective c, double dense_bytes, double expert_bytes) {
      return Comm(c, dense_group, dense_bytes) + Comm(c, expert_group, expert_bytes);
    };
    const Work bwd_mb = [&] {
      Work w = layers_sum(&LayerCost::gemm_bwd);
      w += layers_sum(&LayerCost::attn_bwd);
      w += layers_sum(&LayerCost::elem_bwd);
      return w;
    }();
    const Work fwd_mb = [&] {
      Work w = layers_sum(&LayerCost::gemm_fwd);
      w += layers_sum(&LayerCost::attn_fwd);
      w += layers_sum(&LayerCost::elem_fwd);
      return w;
    }();
    const Scope scope = dense_group.scope;
    double exposed = 0, total = 0;
    if (t_.sharding == Sharding::kZero3) {
      const double ag = reduce(Collective::kAllGather, local.dense * ep_, local.expert * ep_);
      const double rs = reduce(Collective::kReduceScatter, local.dense * eg, local.expert * eg);
      total = m * (2 * ag + rs);
      exposed = t_.overlap_dp_comm
                    ? m * (std::max(0.0, ag - fwd_mb.time_s) + std::max(0.0, ag + rs - bwd_mb.time_s))
                    : total;
    } else if (t_.sharding == Sharding::kNone) {
      const double ar = reduce(Collective::kAllReduce, local.dense * eg, local.expert * eg);
      total = ar;
      exposed = t_.overlap_dp_comm ? std::max(0.0, ar - bwd_mb.time_s) : ar;
    } else {
      const double rs = reduce(Collective::kReduceScatter, local.dense * eg, local.expert * eg);
      const double ag = reduce(Collective::kAllGather, local.dense * ep_, local.expert * ep_);
      total = rs + ag;
      exposed = t_.overlap_dp_comm
                    ? std::max(0.0, rs - bwd_mb.time_s) + std::max(0.0, ag - fwd_mb.time_s)
                    : total;
    }
    (void)total;
    dp.Comm(exposed, scope);
    br.dp_comm_s = dp.time_s;

    // Optimizer step: memory-bound over the local (sharded) parameters.
    const double opt_params = t_.sharding == Sharding::kNone
                                  ? local.total()
                                  : local.dense / (p_.dp * p_.cp) + local.expert / (p_.dp * p_.cp / p_.ep);
    // Bytes per parameter of Megatron's mixed-precision optimizer step (optimizer.py,
    // FP16OptimizerWithFP16Params / DistributedOptimizer): copy model grads to fp32 main grads
    // when they are narrower (read eg, write 4); fp16 loss scaling: unscale + inf check (read 4,
    // write 4); gradient-norm clip (read 4); Adam/SGD update (read master, grad, states; write
    // master, states); copy master back to the model params (read master, write params).
    const double mb = BytesPerElement(t_.precision.master_weights);
    double sb = BytesPerElement(t_.precision.optimizer_states);
    int states = 2;
    if (t_.optimizer == Optimizer::kAdamW8bit) sb = 1;
    if (t_.optimizer == Optimizer::kSgd) states = 1;
    double per_param = 0;
    if (eg < 4) per_param += eg + 4;
    if (t_.precision.params == DType::kFP16) per_param += 8;
    per_param += 4;                                  // grad-norm
    per_param += 2 * mb + 2 * states * sb + 4;       // update
    if (t_.precision.master_weights != t_.precision.params) per_param += mb + e_act_;  // copy back
    Work opt;
    opt.Bytes(opt_params * per_param, bw_);
    br.optimizer_s = opt.time_s;

    // Split of the step by limiting resource.
    Work per_mb_last = stage_common;
    per_mb_last += last_extra;
    Work all = per_mb_last.Scaled(m);
    all += dp;
    all += opt;
    out.compute_bound_s = all.compute_s;
    out.memory_bound_s = all.memory_s;
    out.network_intra_node_s = all.intra_s;
    out.network_inter_node_s = all.inter_s;
    out.bubble_s = br.pipeline_bubble_s;
    out.executed_flops = all.flops;
    out.hbm_bytes = all.bytes;
  }
  out.step_time_s = br.Total();
  const double big_rate = job_.profile.GemmRate(t_.precision.gemm, 8192, 8192, 8192).flops_per_s;
  out.machine_balance_flops_per_byte = big_rate / bw_;
  out.warnings = std::move(warnings_);
  return out;
}

}  // namespace

StepTimeEstimate EstimateStepTime(const Job& job) { return StepModel(job).Run(); }

}  // namespace stepcast
