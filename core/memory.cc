#include "core/memory.h"

#include <algorithm>
#include <cmath>

namespace stepcast {

double LayerActivationBytes(const ModelShape& in, const LayerActivationInput& x) {
  ModelShape storage;
  const ModelShape& m = Resolve(in, storage);
  const double s = x.seq_tokens, b = x.micro_batch, t = x.tp, e = x.bytes_per_activation;
  const double eg = x.bytes_per_gemm_input > 0 ? x.bytes_per_gemm_input : e;
  const double en = x.bytes_per_norm_input > 0 ? x.bytes_per_norm_input : e;
  const double h = m.hidden_size, a = m.attention_heads, kv = m.kv_heads;
  const double dqk = m.QkHeadDim(), dv = m.VHeadDim();
  const double sb = s * b;
  const double sp = x.sequence_parallel ? 1.0 / t : 1.0;
  const double mask = x.dropout ? 1.0 : 0.0;  // 1-byte dropout masks

  if (x.recompute == Recompute::kFull) return e * sb * h * sp;  // checkpointed layer input

  uint32_t mods = x.recompute_modules;
  if (x.recompute == Recompute::kSelective && mods == 0) mods = kRecomputeCoreAttn;
  if (x.recompute == Recompute::kNone) mods = 0;
  auto dropped = [&](uint32_t bit) { return (mods & bit) != 0; };
  const bool op_sac = dropped(kRecomputeActivationFunctions);
  // torchtitan's op SAC (torchtitan/distributed/activation_checkpoint.py @ b5bcd76): saves the
  // outputs of the ops in its save list (PyTorch's compute-intensive ops: mm, SDPA, ...; topk;
  // all_to_all_single and the DeepEP dispatch/combine) except every second mm of a block, and
  // recomputes everything else. The mm calls of a block alternate saved / recomputed in call
  // order (its policy counts aten.mm/linear), so of two consecutive up projections exactly one
  // output is saved; grouped GEMMs (aten._grouped_mm) are not in the list
  // (torch/_functorch/partitioners.py get_default_op_list compute_intensive_ops): routed
  // experts' outputs are recomputed and only the dispatched tokens (the all-to-all's output)
  // are kept.
  const bool tt_sac = dropped(kRecomputeEverySecondMm);

  // The sub-layers: a transformer layer's attention + MLP (or MoE), or a hybrid's one.
  const char kind = x.hybrid_kind;
  const bool has_attention = kind == 0 || kind == '*', has_mamba = kind == 'M';
  const bool has_moe = kind == 0 ? x.moe_layer : kind == 'E', has_mlp = kind == 0 ? !x.moe_layer : kind == '-';
  const double sublayers = kind == 0 ? 2.0 : 1.0;
  // Replicated across TP ranks unless sequence parallel (Korthikanti's "10"): the two norm
  // inputs, the norm outputs (QKV and MLP GEMM inputs), two dropout masks.
  // A hybrid's M / * / - layers fuse their norm into the first linear (hybrid_layer_specs.py): the
  // "layernorm" recompute module has nothing to drop there.
  const bool fused_norm = kind == 'M' || kind == '*' || kind == '-';
  const bool norm_out_dropped = (dropped(kRecomputeLayernorm) && !fused_norm) || op_sac;
  double replicated = sublayers * (en * sb * h + mask * sb * h);
  if (!norm_out_dropped) replicated += sublayers * eg * sb * h;
  // Split by TP (Korthikanti's "24/t" for GPT): Q, K, V (attention in the activation dtype),
  // the projection input, MLP internals.
  double split = 0;
  if (!has_attention) {
    // No attention in this layer.
  } else if (m.mla.enabled()) {
    // Latents (kept) and the heads the up projections make.
    split += e * sb * (m.mla.q_lora_rank + m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * t;  // replicated: x t / t
    // torchtitan's DeepSeek-V3 Attention calls wq_a, wq_b, wkv_a, wkv_b, wo in that order: its
    // op SAC recomputes the two up projections (the 2nd and 4th mm), as mla_up_proj does.
    if (!dropped(kRecomputeMlaUpProj) && !tt_sac) split += e * sb * a * (dqk + dqk + dv);
  } else {
    // Q, K, V; torchtitan's op SAC recomputes wk (its block's 2nd mm) instead of saving K.
    const double k_saved = dropped(kRecomputeEverySecondMm) && !m.mla.enabled() ? 0.0 : kv * dqk;
    split += e * sb * (a * dqk + k_saved + kv * dv);
  }
  if (has_attention) split += eg * sb * a * dv;  // projection input
  if (has_mamba) {
    const MambaShape& mb = m.mamba;
    split += e * sb * (mb.InProjOutputs() + 2.0 * mb.InnerSize()) + eg * sb * mb.InnerSize();
  }
  // One MLP of width f over `tokens` tokens: fc1 outputs (gated: gate and up), activation output.
  auto mlp_internal = [&](double f, double tokens, bool drop_all, bool drop_act) {
    if (drop_all) return 0.0;
    // Gated: gate and up outputs; torchtitan's op SAC saves one of the two consecutive up
    // projections (w1, w3) and recomputes the other (Llama: w3, the block's 6th mm; DeepSeek-V3's
    // dense and shared-expert FFNs: one of its 6th-9th). Ungated, its recomputed mm is w2 (the
    // MLP output). Routed experts: handled by the caller (grouped GEMMs, not counted).
    const double up_outputs = GatedFfn(m.ffn_type) && !tt_sac ? 2 : 1;
    const double up = up_outputs * e * tokens * f;
    const double act = (drop_act || op_sac) ? 0.0 : eg * tokens * f;
    return up + act;
  };
  double per_rank = 0;  // bytes on this rank already (not split by TP below)
  if (has_moe) {
    if (!dropped(kRecomputeMoe)) {
      // An EP rank processes the tokens it holds (its sequence-parallel share sb/t, gathered
      // over the expert-TP group: sb * etp / t), each routed to top_k experts, with a 1/etp
      // slice of every expert's FFN: internals sb*k*f/t either way; the dispatched copies
      // (expert input and combine input, h wide) scale with etp/t (Megatron-Core MoE with
      // sequence parallelism).
      const double etp = x.expert_tp > 0 ? x.expert_tp : t;
      const double rank_tokens = sb * etp / t * x.moe_tokens_factor;
      // The dispatched rows' width (latent MoE: moe_latent_size).
      const double w = static_cast<double>(m.moe.ExpertWidth(m.hidden_size));
      if (tt_sac) {
        // torchtitan op SAC: the experts' grouped-GEMM outputs, their activations and the combine
        // input are recomputed; the dispatched tokens (all-to-all / DeepEP dispatch output, in the
        // save list) are kept.
        per_rank += e * rank_tokens * m.moe.top_k * w;
      } else {
        // Fine-grained activation offloading (Megatron-Core offload_modules): "moe_act" keeps the
        // activation's input, the fc1 output, in host memory; "expert_fc1" the experts' input rows.
        const double rows = rank_tokens * m.moe.top_k, fe = m.moe.expert_ffn_hidden_size;
        per_rank += mlp_internal(fe, rows, false, dropped(kRecomputeMoeAct)) / etp;
        if (x.offload_moe_act_input) per_rank -= (GatedFfn(m.ffn_type) ? 2 : 1) * e * rows * fe / etp;
        per_rank += (x.offload_expert_fc1_input ? 1 : 2) * e * rows * w;
      }
      // Latent MoE: fc1_latent_proj's input is the norm output (counted above); its output is
      // the expert input (w wide, counted); fc2_latent_proj keeps its input, the combined rows
      // (sequence-parallel share, w wide, duplicated on every TP rank).
      if (m.moe.latent_size > 0) per_rank += e * sb / t * w;
      if (!dropped(kRecomputeSharedExperts)) {
        split += m.moe.shared_experts * mlp_internal(m.moe.shared_expert_ffn_hidden_size, sb, false, false);
      }
    }
  } else if (has_mlp) {
    split += mlp_internal(m.ffn_hidden_size, sb, dropped(kRecomputeMlp) || dropped(kRecomputeMlpUp), false);
  }
  double core = 0;
  if (!has_attention) {
    // No attention core.
  } else if (!x.flash_attention && !dropped(kRecomputeCoreAttn)) {
    const double scores = a * b * s * x.kv_tokens;
    core = e * scores + (x.dropout ? (mask + e) * scores : 0.0);
  }
  if (has_attention && x.flash_attention && !dropped(kRecomputeCoreAttn)) split += 4.0 * a * sb;  // fp32 log-sum-exp per head and token
  return replicated * sp + split / t + per_rank + core / t;
}

StageLayers LayersOfStage(const Job& job, bool last_stage) {
  // Reads layers and the MoE layout only; the one default Resolved() fills there (layer_freq 0 -> 1)
  // is the freq guard below.
  const ModelShape& m = job.model;
  const Parallelism& p = job.parallelism;
  const int64_t chunks = p.pp * p.vpp;
  const int64_t per_chunk = (m.layers + chunks - 1) / chunks;
  const int64_t rank = last_stage ? p.pp - 1 : 0;
  const int64_t freq = m.moe.layer_freq > 0 ? m.moe.layer_freq : 1;
  // An uneven pipeline (ParallelismSpec first/last_stage_layers, no virtual stages): the first
  // stage holds layers [0, f), the last [layers - l, layers).
  const bool uneven = p.pp > 1 && p.vpp == 1 && (p.first_stage_layers > 0 || p.last_stage_layers > 0);
  StageLayers out;
  for (int64_t k = 0; k < p.vpp; ++k) {
    const int64_t c = rank + k * p.pp;
    int64_t begin = std::min(m.layers, c * per_chunk), end = std::min(m.layers, (c + 1) * per_chunk);
    if (uneven) {
      const int64_t given_f = p.first_stage_layers, given_l = p.last_stage_layers;
      const int64_t middle = p.pp - (given_f > 0 ? 1 : 0) - (given_l > 0 ? 1 : 0);
      const int64_t mid = middle > 0 ? (m.layers - given_f - given_l) / middle : 0;
      const int64_t f = given_f > 0 ? given_f : mid, l = given_l > 0 ? given_l : mid;
      begin = last_stage ? m.layers - l : 0;
      end = last_stage ? m.layers : f;
    }
    // MoE layers in [begin, end): first_dense_layers, then every freq-th layer; a hybrid's 'E'
    // layers there.
    int64_t moe = 0;
    if (m.Hybrid()) {
      for (int64_t i = begin; i < end; ++i) moe += m.IsMoeLayer(i) ? 1 : 0;
    } else if (m.moe.enabled() && end > begin) {
      const int64_t fd = m.moe.first_dense_layers;
      const int64_t lo = std::max(begin, fd);
      if (freq == 1) {
        moe = std::max<int64_t>(0, end - lo);
      } else {
        const int64_t first = fd + (lo - fd + freq - 1) / freq * freq;
        if (first < end) moe = (end - 1 - first) / freq + 1;
      }
    }
    out.moe += moe;
    out.dense += std::max<int64_t>(0, end - begin) - moe;
  }
  return out;
}

namespace {

// LocalParameterCount of a resolved shape from its counts and the stage's layers (each computed
// once per prediction by the callers that need them more than once).
LocalParameters LocalParametersOf(const Job& job, const ModelShape& m, const ParameterCounts& c, const StageLayers& sl,
                                  bool last_stage) {
  const Parallelism& p = job.parallelism;
  const double h = m.hidden_size;
  // Expert weights (routed experts only) of the whole model.
  const int64_t moe_layer_count = m.MoeLayerCount();
  double expert_total = 0;
  if (m.moe.enabled()) {
    const int f_mats = GatedFfn(m.ffn_type) ? 3 : 2;
    expert_total = static_cast<double>(moe_layer_count) * m.moe.routed_experts * f_mats *
                   static_cast<double>(m.moe.ExpertWidth(m.hidden_size)) * m.moe.expert_ffn_hidden_size;
  }
  const double input_emb = c.embedding - (m.tied_embeddings ? 0.0 : m.vocab_size * h);
  const double output_head = m.tied_embeddings ? 0.0 : m.vocab_size * h;
  const double layer_dense = c.total - c.embedding - expert_total;
  LocalParameters out;
  // First stage: its layers + the input embedding; last stage: its layers + the output head
  // (with tied weights Megatron keeps a copy of the embedding there); one stage holds both.
  double stage_emb = 0;
  if (!last_stage || p.pp == 1) stage_emb += input_emb;
  if (last_stage || p.pp == 1) stage_emb += m.tied_embeddings && p.pp > 1 ? input_emb : output_head;
  // MTP on a later stage than the embedding: the last stage builds its own copy of the word
  // embedding for the MTP modules' inputs, kept in sync with the first stage's (Megatron-Core
  // hybrid_model.py / gpt_model.py: `if self.pre_process or self.mtp_process: self.embedding`;
  // language_module.py); a tied model's copy already is there.
  const int64_t depths = job.MtpDepths();
  if (last_stage && p.pp > 1 && depths > 0 && !m.tied_embeddings) stage_emb += input_emb;
  // The stage's own layers (ceil(layers / (pp*vpp)) per chunk, in order): its share of the dense
  // layer weights, and of the expert weights by its MoE layers (DeepSeek-V3's first dense
  // layers sit on the first stage).
  const double stage_frac = static_cast<double>(sl.total()) / m.layers;
  const double moe_layers = static_cast<double>(moe_layer_count);
  const double expert_frac = moe_layers > 0 ? sl.moe / moe_layers : 0.0;
  // What every TP rank holds whole (norms, MLA's down projections, the router, latent MoE's
  // projections: ParameterCounts::tp_duplicated_*), by the stage's own MoE and other layers; the
  // rest of the dense weights split by TP.
  const double dup_moe = c.tp_duplicated_moe_layer, dup_other = c.tp_duplicated_other_layer;
  const double dup_total = dup_moe * moe_layers + dup_other * (static_cast<double>(m.layers) - moe_layers);
  out.dense = ((layer_dense - dup_total) * stage_frac + stage_emb) / p.tp + dup_moe * sl.moe +
              dup_other * (static_cast<double>(sl.total()) - sl.moe);
  out.expert = expert_total * expert_frac / (p.ep * p.Etp());
  // The MTP modules with weights, on the last stage (Megatron-Core multi_token_prediction.py:
  // the MTP block follows the decoder on the last pipeline stage): their routed experts sharded
  // as the model's, the rest by TP.
  if ((last_stage || p.pp == 1) && depths > 0) {
    const double modules = static_cast<double>(m.MtpModulesWithWeights(depths));
    const double moe_blocks = m.Hybrid() ? static_cast<double>(m.HybridMtpCounts().moe)
                                         : (m.IsMoeLayer(m.layers - 1) ? 1.0 : 0.0);
    const double module_experts = moe_layer_count > 0 ? moe_blocks * expert_total / moe_layers : 0.0;
    out.dense += modules * ((c.mtp_module - module_experts - c.tp_duplicated_mtp_module) / p.tp +
                            c.tp_duplicated_mtp_module);
    out.expert += modules * module_experts / (p.ep * p.Etp());
  }
  return out;
}

}  // namespace

LocalParameters LocalParameterCount(const Job& job, bool last_stage) {
  ModelShape storage;
  const ModelShape& m = Resolve(job.model, storage);
  return LocalParametersOf(job, m, CountParameters(m), LayersOfStage(job, last_stage), last_stage);
}

LocalParameters LocalParameterCount(const Job& job, bool last_stage, const ParameterCounts& counts) {
  ModelShape storage;
  const ModelShape& m = Resolve(job.model, storage);
  return LocalParametersOf(job, m, counts, LayersOfStage(job, last_stage), last_stage);
}

LocalParameters LocalParameterCount(const Job& job) { return LocalParameterCount(job, false); }

namespace {

// Micro-batches (in units of the stage's full set of layers) whose activations a pipeline stage
// holds at its peak, for the first stage (rank 0) or the last (rank pp-1). Megatron-Core's
// schedules (megatron/core/pipeline_parallel/schedules.py): 1F1B warms up pp - r - 1
// micro-batches and holds one more; interleaved 1F1B warms up (pp - r - 1) * 2 + (v - 1) * pp
// model chunks and holds one more, each chunk 1/v of the stage (rank 0: pp*v + pp - 1 chunks =
// pp * (1 + (pp-1)/(pp*v)) stages, Megatron-LM theoretical_memory_usage.py); GPipe holds every
// micro-batch of the step; zero-bubble ZB-H1 keeps 1F1B's peak (Qi et al. 2023); DualPipe
// pp + 1 on every rank (DeepSeek-V3 report Table 2). Capped by the step's micro-batches.
double InFlightMicroBatches(const Parallelism& p, double micro_batches, bool last_stage) {
  if (p.pp == 1) return 1.0;
  const double pp = static_cast<double>(p.pp), v = static_cast<double>(p.vpp);
  const double r = last_stage ? pp - 1 : 0;
  double in_flight = 1;
  switch (p.Schedule()) {
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kZeroBubble: in_flight = std::min(pp - r - 1, micro_batches - 1) + 1; break;
    case PipelineSchedule::kInterleaved1F1B:
      in_flight = (std::min((pp - r - 1) * 2 + (v - 1) * pp, micro_batches * v - 1) + 1) / v;
      break;
    case PipelineSchedule::kGPipe: in_flight = micro_batches; break;
    case PipelineSchedule::kDualPipe: in_flight = std::min(pp + 1.0, micro_batches); break;
  }
  return std::max(in_flight, 1.0 / v);
}

// The dense-layer activation input of a job's stages (LayerActivationBytes' parameters).
LayerActivationInput StageLayerInput(const Job& job) {
  const TrainingConfig& t = job.training;
  const Parallelism& p = job.parallelism;
  const Precision& pr = t.precision;
  // Under autocast the activations GEMMs and attention make are in the GEMM dtype; the residual
  // stream (the norms' inputs) stays fp32.
  const double e = pr.Autocast() ? BytesPerElement(pr.gemm) : BytesPerElement(pr.params);
  LayerActivationInput li;
  li.seq_tokens = static_cast<double>(t.seq_length) / p.cp;
  li.kv_tokens = static_cast<double>(t.seq_length);
  li.micro_batch = t.micro_batch_size;
  li.tp = p.tp;
  li.sequence_parallel = p.SequenceParallelOn();
  li.flash_attention = t.flash_attention;
  li.dropout = t.dropout;
  li.recompute = t.recompute;
  li.recompute_modules = RecomputeModuleMask(t.recompute_modules);
  li.bytes_per_activation = e;
  li.bytes_per_gemm_input = pr.gemm == DType::kFP8 ? 1.0 : e;
  if (pr.Autocast()) li.bytes_per_norm_input = BytesPerElement(pr.params);
  li.expert_tp = static_cast<double>(p.Etp());
  // Experts' inputs padded to capacity (token_dispatcher.py drop_and_pad): their rows and what
  // the grouped GEMMs keep of them grow by the capacity factor.
  li.moe_tokens_factor = t.MoePaddedRowsFactor();
  li.offload_moe_act_input = t.offload_moe_act_input;
  li.offload_expert_fc1_input = t.offload_expert_fc1_input;
  return li;
}

MemoryEstimate StageMemory(const Job& job, bool last_stage, const LayerActivationTerms& terms,
                           const ParameterCounts& counts);

}  // namespace

LayerActivationTerms ComputeLayerActivationTerms(const Job& job) {
  ModelShape storage;
  const ModelShape& m = Resolve(job.model, storage);
  const TrainingConfig& t = job.training;
  const LayerActivationInput li = StageLayerInput(job);
  LayerActivationInput lm = li;
  lm.moe_layer = true;
  const bool moe = m.moe.enabled();
  if (m.Hybrid()) lm.hybrid_kind = 'E';
  // A dense layer's bytes (mean) and, for a working set, the largest single layer's; a hybrid's
  // "dense" layer is the mean of its Mamba, attention and MLP layers by their counts (the stage
  // sums take layers in these shares, as the step model does), its largest the largest kind's.
  const HybridLayerCounts hc = m.HybridCounts();
  struct KindBytes {
    double mean = 0, largest = 0;
  };
  auto non_moe_layers = [&](LayerActivationInput in) {
    KindBytes k;
    if (!m.Hybrid()) {
      k.mean = k.largest = LayerActivationBytes(m, in);
      return k;
    }
    for (auto [kind, count] : {std::pair<char, int64_t>{'M', hc.mamba}, {'*', hc.attention}, {'-', hc.mlp}}) {
      if (count == 0) continue;
      in.hybrid_kind = kind;
      const double bytes = LayerActivationBytes(m, in);
      k.mean += static_cast<double>(count) * bytes;
      k.largest = std::max(k.largest, bytes);
    }
    if (hc.NonMoe() > 0) k.mean /= static_cast<double>(hc.NonMoe());
    return k;
  };
  LayerActivationTerms out;
  out.dense_layer_bytes = non_moe_layers(li).mean;
  out.moe_layer_bytes = moe ? LayerActivationBytes(m, lm) : out.dense_layer_bytes;
  if (job.MtpDepths() > 0) {
    if (!m.Hybrid()) {
      out.mtp_block_bytes = m.IsMoeLayer(m.layers - 1) ? out.moe_layer_bytes : out.dense_layer_bytes;
    } else {
      LayerActivationInput in = li;
      for (char kind : m.hybrid_mtp_pattern) {
        in.hybrid_kind = kind;
        in.moe_layer = kind == 'E';
        out.mtp_block_bytes += LayerActivationBytes(m, in);
      }
    }
  }
  if (t.recompute == Recompute::kFull && t.recompute_num_layers > 0) {
    LayerActivationInput none = li, none_m = lm;
    none.recompute = none_m.recompute = Recompute::kNone;
    out.kept_dense_layer_bytes = non_moe_layers(none).mean;
    out.kept_moe_layer_bytes = moe ? LayerActivationBytes(m, none_m) : out.kept_dense_layer_bytes;
  }
  if (t.recompute == Recompute::kFull) {
    LayerActivationInput full = li;
    full.recompute = Recompute::kNone;
    out.recompute_working_set_bytes = non_moe_layers(full).largest;
    if (m.Hybrid() && moe) {
      LayerActivationInput full_m = lm;
      full_m.recompute = Recompute::kNone;
      out.recompute_working_set_bytes = std::max(out.recompute_working_set_bytes, LayerActivationBytes(m, full_m));
    }
  } else if (t.recompute == Recompute::kSelective) {
    // Selective: while one layer's backward runs, the tensors its recompute rebuilt are alive
    // beside every stored activation: the layer's activations without recomputation less those
    // it stores (the larger of a dense and an MoE layer).
    LayerActivationInput none = li, none_m = lm;
    none.recompute = none_m.recompute = Recompute::kNone;
    double ws = non_moe_layers(none).mean - out.dense_layer_bytes;
    if (moe) ws = std::max(ws, LayerActivationBytes(m, none_m) - out.moe_layer_bytes);
    out.recompute_working_set_bytes = std::max(0.0, ws);
  }
  return out;
}

MemoryEstimate EstimateMemory(const Job& job) { return EstimateMemory(job, ComputeLayerActivationTerms(job)); }

MemoryEstimate EstimateMemory(const Job& job, const LayerActivationTerms& terms) {
  ModelShape storage;
  const ParameterCounts counts = CountParameters(Resolve(job.model, storage));
  MemoryEstimate first = StageMemory(job, false, terms, counts);
  if (job.parallelism.pp == 1) return first;
  MemoryEstimate last = StageMemory(job, true, terms, counts);
  return last.total_bytes > first.total_bytes ? last : first;
}

MemoryEstimate EstimateStageMemory(const Job& job, bool last_stage) {
  return EstimateStageMemory(job, last_stage, ComputeLayerActivationTerms(job));
}

MemoryEstimate EstimateStageMemory(const Job& job, bool last_stage, const LayerActivationTerms& terms) {
  ModelShape storage;
  return StageMemory(job, last_stage, terms, CountParameters(Resolve(job.model, storage)));
}

namespace {

// ZeRO-3 / FSDP memory beyond the sharded states (framework.proto ShardingModel 30-36): the gathered
// parameters alive at once (`z3`), and with the FSDP gradient path (`fsdp_grads`: ZeRO-3, or the
// framework's ZeRO-2 as SHARD_GRAD_OP) the per-unit gradient buffers and the unsharded gradients
// held across micro-batches when they are reduced once per step. `local_params`: the stage's
// local parameters (elements); adds to `out`'s workspace, communication buffers and gradients.
void AddFsdpMemory(const Job& job, double local_params, int64_t layers_per_stage, double micro_batches, bool z3,
                   bool fsdp_grads, MemoryEstimate& out) {
  const TrainingConfig& t = job.training;
  const Parallelism& p = job.parallelism;
  const Precision& pr = t.precision;
  const ShardingModel& sh = job.framework.sharding;
  const double layer_params = local_params / std::max<int64_t>(layers_per_stage, 1);
  const bool once_pp = p.pp > 1 && sh.gather_once_per_step_with_pp;
  if (z3) {
    const double gather_bytes = t.fp8_param_gather && pr.gemm == DType::kFP8 ? 1.0 : BytesPerElement(pr.params);
    if (once_pp) {
      // Parameters stay unsharded across the step's micro-batches (no reshard after forward).
      out.workspace_bytes += local_params * gather_bytes;
    } else {
      // Unsharded parameters alive at once: the unit computing plus the prefetched ones
      // (gathered_units, default 2: FSDP's current and next unit), or a prefetch window in
      // parameters (Megatron-FSDP, DeepSpeed), capped by the framework's live-parameter limit.
      const double units = sh.gathered_units > 0 ? sh.gathered_units : 2.0;
      double held = layer_params + std::max((units - 1) * layer_params, sh.gather_prefetch_params);
      if (sh.max_live_params > 0) held = std::min(held, sh.max_live_params);
      out.workspace_bytes += std::min(held, local_params) * gather_bytes;
    }
  }
  if (fsdp_grads) {
    if (sh.gathered_units > 0 || sh.reduce_scatter_units > 0) {
      // The backward's per-unit gradients: the unit whose gradients autograd is producing (params
      // dtype, at least 2 bytes) and the reduce-scatter inputs in flight (grad-reduce dtype).
      const double e_unsharded = std::max(2.0, BytesPerElement(pr.params));
      out.communication_buffers_bytes +=
          layer_params * (e_unsharded + sh.reduce_scatter_units * BytesPerElement(pr.grad_reduce));
    }
    out.communication_buffers_bytes += sh.grad_bucket_params * BytesPerElement(pr.grad_reduce);
    // Gradients reduced once per step: every unsharded gradient of the stage is held across the
    // micro-batches (FSDP1 no_sync, FSDP2 set_requires_gradient_sync(False), torchtitan's
    // pipelining over FSDP2), in the accumulation dtype. The sharded gradients are made by the
    // reduce-scatters after the last micro-batch, unit by unit as the unsharded ones are freed,
    // so the peak holds the larger of the two, not both.
    if (once_pp || (sh.reduce_once_per_step_with_accumulation && micro_batches > 1)) {
      const double e_acc =
          sh.accumulated_grad_dtype_set ? BytesPerElement(sh.accumulated_grad_dtype) : BytesPerElement(pr.grad_reduce);
      out.gradients_bytes = std::max(out.gradients_bytes, local_params * e_acc);
    }
  }
}

MemoryEstimate StageMemory(const Job& job, bool last_stage, const LayerActivationTerms& terms,
                           const ParameterCounts& counts) {
  ModelShape storage;
  const ModelShape& m = Resolve(job.model, storage);
  const TrainingConfig& t = job.training;
  const Parallelism& p = job.parallelism;
  const Precision& pr = t.precision;
  MemoryEstimate out;
  out.stage = p.pp == 1 ? "only" : (last_stage ? "last" : "first");

  // The stage's layers: dense and MoE by position (ceil(layers / (pp*vpp)) per chunk).
  const StageLayers sl = LayersOfStage(job, last_stage);
  const LocalParameters local = LocalParametersOf(job, m, counts, sl, last_stage);
  // ZeRO/FSDP shard over dp*cp ranks (HSDP: within a replica); expert parameters over the
  // expert data-parallel group (Megatron-Core: tp*cp*dp / (etp*ep)).
  const double replicas = std::max<int64_t>(1, p.dp_replicate);
  const double shard = static_cast<double>(p.ShardGroup());
  const double expert_shard = std::max(1.0, p.Edp() / replicas);
  auto sharded = [&](bool on) {
    return on ? local.dense / shard + local.expert / expert_shard : local.total();
  };

  const bool z1 = t.sharding != Sharding::kNone;
  const bool z2 = t.sharding == Sharding::kZero2 || t.sharding == Sharding::kZero3;
  const bool z3 = t.sharding == Sharding::kZero3;
  // fp8 parameters (Megatron --fp8-param-gather): the model's weights are stored in fp8.
  const double weight_bytes = t.fp8_param_gather && pr.gemm == DType::kFP8 ? 1.0 : BytesPerElement(pr.params);
  out.weights_bytes = sharded(z3) * weight_bytes;
  // FSDP-style: the shard is the fp32 master itself (no low-precision copy, no second master).
  const bool master_shards = z3 && job.framework.sharding.sharded_params_are_master;
  if (master_shards) out.weights_bytes = sharded(true) * BytesPerElement(pr.master_weights);
  out.gradients_bytes = sharded(z2) * BytesPerElement(pr.grads);
  double per_param_opt = 0;
  const double master = MasterWeightBytes(pr);
  switch (t.optimizer) {
    case Optimizer::kAdam:
    case Optimizer::kAdamW: per_param_opt = master + 2 * BytesPerElement(pr.optimizer_states); break;
    case Optimizer::kAdamW8bit: per_param_opt = master + 2 * 1.0 + 2 * 4.0 / 2048; break;
    case Optimizer::kSgd: per_param_opt = master + BytesPerElement(pr.optimizer_states); break;
    // Muon: one momentum buffer (Moonlight, arXiv:2502.16982, Algorithm 1; Megatron-Core's Muon
    // keeps only momentum_buffer). Its embeddings and output layer run AdamW (two moments): under
    // 0.3% of a large model's parameters, not counted.
    case Optimizer::kMuon: per_param_opt = master + BytesPerElement(pr.optimizer_states); break;
  }
  if (master_shards) per_param_opt -= master;
  out.optimizer_states_bytes = sharded(z1) * per_param_opt;

  // Activations (the embedding output is the residual stream: fp32 under autocast).
  const double e = BytesPerElement(pr.params);
  const double seq_tokens = static_cast<double>(t.seq_length) / p.cp;
  const double micro_batch = static_cast<double>(t.micro_batch_size);
  const bool sequence_parallel = p.SequenceParallelOn();
  const int64_t layers_per_stage = std::max<int64_t>(sl.total(), 1);
  const double moe_frac = static_cast<double>(sl.moe) / layers_per_stage;
  const double per_layer = (1 - moe_frac) * terms.dense_layer_bytes + moe_frac * terms.moe_layer_bytes;
  // Full recompute of only recompute_num_layers layers per chunk (block method): the others
  // keep their activations.
  double stored_per_layer_sum = per_layer * layers_per_stage;
  if (t.recompute == Recompute::kFull && t.recompute_num_layers > 0) {
    const double kept = (1 - moe_frac) * terms.kept_dense_layer_bytes + moe_frac * terms.kept_moe_layer_bytes;
    const double recomputed = std::min<double>(layers_per_stage, t.recompute_num_layers * p.vpp);
    stored_per_layer_sum = per_layer * recomputed + kept * (layers_per_stage - recomputed);
  }
  const double micro_batches = static_cast<double>(job.MicroBatchesPerStep());
  // The first stage holds the most micro-batches; the last (1F1B) one, but also the loss.
  const double in_flight = InFlightMicroBatches(p, micro_batches, last_stage);
  double act = stored_per_layer_sum * in_flight;
  const double sbh = seq_tokens * micro_batch * m.hidden_size;
  if (!last_stage || p.pp == 1) {
    // Embedding output (+ dropout mask), per in-flight micro-batch (Korthikanti Sec. 4.3).
    act += (e + (t.dropout ? 1.0 : 0.0)) * sbh / (sequence_parallel ? p.tp : 1) * in_flight;
  }
  if (last_stage || p.pp == 1) {
    // The loss of the micro-batch at its peak (the start of the backward): the fp32 softmax of
    // the vocab-parallel cross entropy (4 bytes per logit), or what the framework's loss holds
    // then (framework.proto ElementwiseModel.loss_peak_bytes_per_logit).
    const double loss_bytes = job.framework.loss_peak_bytes_per_logit > 0 ? job.framework.loss_peak_bytes_per_logit : 4.0;
    // MTP depths (on this stage): each one more block's activations per in-flight micro-batch,
    // and one more loss over the vocabulary (Megatron-Core multi_token_prediction.py: each
    // depth's logits and cross entropy, all in the graph when the backward starts).
    const int64_t depths = job.MtpDepths();
    act += static_cast<double>(depths) * terms.mtp_block_bytes * in_flight;
    act += (1.0 + static_cast<double>(std::max<int64_t>(0, depths))) * loss_bytes * seq_tokens * micro_batch *
           m.vocab_size / p.tp;
  }
  // Working set while recomputing one layer (full or selective recomputation).
  act += terms.recompute_working_set_bytes;
  act *= 1.0 - std::clamp(t.activation_offload_fraction, 0.0, 1.0);
  out.activations_bytes = act;

  // Communication buffers and fixed overheads.
  const double nccl_per_comm = 64.0 * (1 << 20);
  int comms = 0;
  for (int64_t d : {p.tp, p.cp, p.ep, p.dp, p.pp}) comms += d > 1 ? 1 : 0;
  const ShardingModel& sh = job.framework.sharding;
  // FSDP frameworks that give their unit structure (framework.proto ShardingModel 30-36) have no
  // DDP buckets: their per-unit gradient buffers below replace them.
  // The framework's ZeRO-2 as FSDP SHARD_GRAD_OP (framework.proto zero2_is_shard_grad_op): the
  // parameters stay unsharded (weights above), and the gradients go the FSDP way (AddFsdpMemory).
  const bool fsdp_grads = z3 || (t.sharding == Sharding::kZero2 && sh.zero2_is_shard_grad_op);
  const bool fsdp_units =
      fsdp_grads && (sh.gathered_units > 0 || sh.reduce_scatter_units > 0 || sh.grad_bucket_params > 0);
  double buckets = 0;
  if (p.dp * p.cp > 1 && !fsdp_units) buckets = 2 * 40e6 * BytesPerElement(pr.grad_reduce);
  out.communication_buffers_bytes = buckets + comms * nccl_per_comm;
  out.cuda_context_bytes = 0.5 * (1ull << 30);
  out.workspace_bytes = 2 * 32.0 * (1 << 20);
  // Autocast's weight cache: the bf16/fp16 copy of every local weight, made in the forward and
  // kept by autograd until the backward has used it (Precision::Autocast).
  if (pr.Autocast()) out.workspace_bytes += local.total() * BytesPerElement(pr.gemm);
  AddFsdpMemory(job, local.total(), layers_per_stage, micro_batches, z3, fsdp_grads, out);

  out.total_bytes = out.weights_bytes + out.gradients_bytes + out.optimizer_states_bytes +
                    out.activations_bytes + out.communication_buffers_bytes +
                    out.cuda_context_bytes + out.workspace_bytes;
  out.capacity_bytes = job.hardware.hbm_capacity_bytes;
  out.headroom_bytes = out.capacity_bytes - out.total_bytes;
  out.fits = out.headroom_bytes >= 0;
  out.tight = !out.fits && out.total_bytes <= out.capacity_bytes * (1 + kMemoryUncertainty);
  out.items = {{{"weights", out.weights_bytes},
               {"gradients", out.gradients_bytes},
               {"optimizer_states", out.optimizer_states_bytes},
               {"activations", out.activations_bytes},
               {"communication_buffers", out.communication_buffers_bytes},
               {"cuda_context", out.cuda_context_bytes},
               {"workspaces", out.workspace_bytes}}};
  return out;
}

}  // namespace

}  // namespace stepcast
