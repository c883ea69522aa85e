#include "core/flops.h"

namespace stepcast {

double ForwardGemmFlopsPerToken(const ModelShape& in) {
  ModelShape storage;
  const ModelShape& s = Resolve(in, storage);
  const ParameterCounts c = CountParameters(s);
  const double layers = s.DenseLayerCount() * c.dense_layer_gemm +
                        s.MoeLayerCount() * c.moe_layer_gemm_active;
  const double logits = static_cast<double>(s.vocab_size) * s.hidden_size;
  return 2.0 * (layers + logits);
}

double ForwardAttentionFlopsPerToken(const ModelShape& in, int64_t seq_length) {
  ModelShape storage;
  const ModelShape& s = Resolve(in, storage);
  return 2.0 * seq_length * s.attention_heads * (s.QkHeadDim() + s.VHeadDim()) * s.AttentionLayerCount();
}

double ForwardSsdFlopsPerToken(const ModelShape& in) {
  if (!in.Hybrid()) return 0;
  ModelShape storage;
  const ModelShape& s = Resolve(in, storage);
  return 7.0 * s.mamba.InnerSize() * s.mamba.state_dim * s.HybridCounts().mamba;
}

double ModelFlopsPerStep(const ModelShape& shape, int64_t seq_length, double sequences) {
  const double tokens = sequences * seq_length;
  return 3.0 * tokens *
         (ForwardGemmFlopsPerToken(shape) + ForwardAttentionFlopsPerToken(shape, seq_length) +
          ForwardSsdFlopsPerToken(shape));
}

double HardwareFlopsPerStep(const ModelShape& in, int64_t seq_length, double sequences,
                            Recompute recompute, bool flash_attention) {
  return HardwareFlopsPerStep(in, seq_length, sequences, recompute, flash_attention,
                              ModelFlopsPerStep(in, seq_length, sequences));
}

double HardwareFlopsPerStep(const ModelShape& in, int64_t seq_length, double sequences,
                            Recompute recompute, bool flash_attention, double model) {
  ModelShape storage;
  const ModelShape& s = Resolve(in, storage);
  const double tokens = sequences * seq_length;
  const double attn_fwd = ForwardAttentionFlopsPerToken(s, seq_length);
  switch (recompute) {
    case Recompute::kNone: return model;
    case Recompute::kSelective: return flash_attention ? model : model + 3.0 * tokens * attn_fwd;
    case Recompute::kFull: {
      const double logits_fwd = 2.0 * static_cast<double>(s.vocab_size) * s.hidden_size;
      return model + tokens * (ForwardGemmFlopsPerToken(s) - logits_fwd + attn_fwd + ForwardSsdFlopsPerToken(s));
    }
  }
  return model;
}

double NarayananEq3Flops(double B, double s, double l, double h, double V) {
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double KorthikantiModelFlops(double B, double s, double l, double h, double V) {
  return 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}

}  // namespace stepcast
