#include "core/memory.h"

#include <algorithm>
#include <cmath>

namespace stepcast {

double LayerActivationBytes(const ModelShape& in, const LayerActivationInput& x) {
  const ModelShape m = in.Resolved();
  const double s = x.seq_tokens, b = x.micro_batch, t = x.tp, e = x.bytes_per_activation;
  const double h = m.hidden_size, a = m.attention_heads, kv = m.kv_heads;
  const double dqk = m.QkHeadDim(), dv = m.VHeadDim();
  const double sb = s * b;
  const double sp = x.sequence_parallel ? 1.0 / t : 1.0;
  const double mask = x.dropout ? 1.0 : 0.0;  // 1-byte dropout masks

  if (x.recompute == Recompute::kFull) return e * sb * h * sp;  // checkpointed layer input

  // Replicated across TP ranks unless sequence parallel (Korthikanti's "10"):
  // norm inputs 2 x e*sbh, QKV input e*sbh, MLP input e*sbh, two dropout masks sbh each.
  double replicated = 2 * e * sb * h + e * sb * h + e * sb * h + 2 * mask * sb * h;
  // Split by TP (Korthikanti's "24/t" for GPT): Q, K, V, projection input, MLP internals.
  const double kv_width = m.mla.enabled() ? a * (dqk + dv) : kv * (dqk + dv);
  double split = e * sb * (a * dqk + kv_width) + e * sb * a * dv;
  auto mlp_internal = [&](double f) {
    return m.ffn_type == FfnType::kSwiGlu ? 3 * e * sb * f : 2 * e * sb * f;
  };
  if (x.moe_layer) {
    const double routed = m.moe.top_k * mlp_internal(m.moe.expert_ffn_hidden_size);
    const double shared = m.moe.shared_experts * mlp_internal(m.moe.shared_expert_ffn_hidden_size);
    // Dispatched token copies (input to experts) and their combine inputs.
    split += routed + shared + 2 * e * sb * h * m.moe.top_k;
  } else {
    split += mlp_internal(m.ffn_hidden_size);
  }
  double core = 0;
  if (!x.flash_attention && x.recompute != Recompute::kSelective) {
    const double scores = a * b * s * x.kv_tokens;
    core = e * scores + (x.dropout ? (mask + e) * scores : 0.0);
  }
  if (x.flash_attention) split += 4.0 * a * sb;  // fp32 log-sum-exp per head and token
  return replicated * sp + split / t + core / t;
}

LocalParameters LocalParameterCount(const Job& job) {
  const ModelShape m = job.model.Resolved();
  const Parallelism& p = job.parallelism;
  const ParameterCounts c = CountParameters(m);
  const double h = m.hidden_size;
  // Expert weights (routed experts only) of the whole model.
  double expert_total = 0;
  if (m.moe.enabled()) {
    const int f_mats = m.ffn_type == FfnType::kSwiGlu ? 3 : 2;
    expert_total = static_cast<double>(m.MoeLayerCount()) * m.moe.routed_experts * f_mats * h *
                   m.moe.expert_ffn_hidden_size;
  }
  const double input_emb = c.embedding - (m.tied_embeddings ? 0.0 : m.vocab_size * h);
  const double output_head = m.tied_embeddings ? 0.0 : m.vocab_size * h;
  const double layer_dense = c.total - c.embedding - expert_total;
  LocalParameters out;
  // First stage: its layers + input embedding (+ output head when it is also the last stage,
  // or tied weights that Megatron keeps a copy of on the last stage).
  double stage_emb = input_emb;
  if (p.pp == 1) stage_emb += output_head;
  // The most loaded stage holds ceil(layers / (pp*vpp)) layers per chunk.
  const double chunks = static_cast<double>(p.pp) * p.vpp;
  const double stage_frac = std::ceil(m.layers / chunks) * p.vpp / m.layers;
  out.dense = (layer_dense * stage_frac + stage_emb) / p.tp;
  out.expert = expert_total * stage_frac / (p.ep * p.tp);
  return out;
}

MemoryEstimate EstimateMemory(const Job& job) {
  const ModelShape m = job.model.Resolved();
  const TrainingConfig& t = job.training;
  const Parallelism& p = job.parallelism;
  const Precision& pr = t.precision;
  MemoryEstimate out;

  const LocalParameters local = LocalParameterCount(job);
  const double shard = static_cast<double>(p.dp) * p.cp;
  // Expert parameters are replicated over dp*cp/ep ranks (expert data-parallel group).
  const double expert_shard = shard / p.ep;
  auto sharded = [&](bool on) {
    return on ? local.dense / shard + local.expert / expert_shard : local.total();
  };

  const bool z1 = t.sharding != Sharding::kNone;
  const bool z2 = t.sharding == Sharding::kZero2 || t.sharding == Sharding::kZero3;
  const bool z3 = t.sharding == Sharding::kZero3;
  out.weights_bytes = sharded(z3) * BytesPerElement(pr.params);
  out.gradients_bytes = sharded(z2) * BytesPerElement(pr.grads);
  double per_param_opt = 0;
  const double master = pr.master_weights == pr.params ? 0.0 : BytesPerElement(pr.master_weights);
  switch (t.optimizer) {
    case Optimizer::kAdam:
    case Optimizer::kAdamW: per_param_opt = master + 2 * BytesPerElement(pr.optimizer_states); break;
    case Optimizer::kAdamW8bit: per_param_opt = master + 2 * 1.0 + 2 * 4.0 / 2048; break;
    case Optimizer::kSgd: per_param_opt = master + BytesPerElement(pr.optimizer_states); break;
  }
  out.optimizer_states_bytes = sharded(z1) * per_param_opt;

  // Activations.
  const double e = BytesPerElement(pr.params);
  LayerActivationInput li;
  li.seq_tokens = static_cast<double>(t.seq_length) / p.cp;
  li.kv_tokens = static_cast<double>(t.seq_length);
  li.micro_batch = t.micro_batch_size;
  li.tp = p.tp;
  li.sequence_parallel = p.sequence_parallel && p.tp > 1;
  li.flash_attention = t.flash_attention;
  li.dropout = t.dropout;
  li.recompute = t.recompute;
  li.bytes_per_activation = e;
  const int64_t layers_per_stage =
      (m.layers + p.pp * p.vpp - 1) / (p.pp * p.vpp) * p.vpp;  // slowest/most loaded stage
  // Fraction of the stage's layers that are MoE (spread evenly).
  const double moe_frac = static_cast<double>(m.MoeLayerCount()) / m.layers;
  LayerActivationInput lm = li;
  lm.moe_layer = true;
  const double per_layer = (1 - moe_frac) * LayerActivationBytes(m, li) +
                           moe_frac * LayerActivationBytes(m, lm);
  const double micro_batches = static_cast<double>(job.MicroBatchesPerStep());
  double in_flight = p.pp;  // first stage of 1F1B holds pp micro-batches
  if (p.vpp > 1) in_flight *= 1.0 + (p.pp - 1.0) / (p.pp * p.vpp);
  in_flight *= std::min(1.0, micro_batches / p.pp);
  in_flight = std::max(in_flight, 1.0);
  double act = per_layer * layers_per_stage * in_flight;
  const double sbh = li.seq_tokens * li.micro_batch * m.hidden_size;
  // Embedding output (+ dropout mask), per in-flight micro-batch (Korthikanti Sec. 4.3).
  act += (e + (t.dropout ? 1.0 : 0.0)) * sbh / (li.sequence_parallel ? p.tp : 1) * in_flight;
  if (p.pp == 1) {
    // fp32 logits for the vocab-parallel cross entropy of the one in-flight micro-batch.
    act += 4.0 * li.seq_tokens * li.micro_batch * m.vocab_size / p.tp;
  }
  if (t.recompute == Recompute::kFull) {
    LayerActivationInput full = li;
    full.recompute = Recompute::kNone;
    act += LayerActivationBytes(m, full);  // working set while recomputing one layer
  }
  out.activations_bytes = act;

  // Communication buffers and fixed overheads.
  const double nccl_per_comm = 64.0 * (1 << 20);
  int comms = 0;
  for (int64_t d : {p.tp, p.cp, p.ep, p.dp, p.pp}) comms += d > 1 ? 1 : 0;
  double buckets = 0;
  if (p.dp * p.cp > 1) buckets = 2 * 40e6 * BytesPerElement(pr.grads);
  out.communication_buffers_bytes = buckets + comms * nccl_per_comm;
  out.cuda_context_bytes = 0.5 * (1ull << 30);
  out.workspace_bytes = 2 * 32.0 * (1 << 20);
  if (z3) {
    // Two layers' unsharded weights gathered at once (prefetch of the next layer).
    const double layer_params = (local.total() - 0) / std::max<int64_t>(layers_per_stage, 1);
    out.workspace_bytes += 2 * layer_params * BytesPerElement(pr.params);
  }

  out.total_bytes = out.weights_bytes + out.gradients_bytes + out.optimizer_states_bytes +
                    out.activations_bytes + out.communication_buffers_bytes +
                    out.cuda_context_bytes + out.workspace_bytes;
  out.capacity_bytes = job.hardware.hbm_capacity_bytes;
  out.headroom_bytes = out.capacity_bytes - out.total_bytes;
  out.fits = out.headroom_bytes >= 0;
  out.items = {{"weights", out.weights_bytes},
               {"gradients", out.gradients_bytes},
               {"optimizer_states", out.optimizer_states_bytes},
               {"activations", out.activations_bytes},
               {"communication_buffers", out.communication_buffers_bytes},
               {"cuda_context", out.cuda_context_bytes},
               {"workspaces", out.workspace_bytes}};
  return out;
}

}  // namespace stepcast
