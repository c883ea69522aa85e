#include "core/ml_par_sim.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include <cstdint>
#include <string>

namespace stepcast::seed002 {

Chip A100_40GB() { return {624e12, 1555e9, 600e9}; }
Chip H100() { return {1979e12, 3.35e12, 900e9}; }

absl::StatusOr<SimpleResult> SimpleTransformer(const SimpleConfig& c) {
  const double L = c.n_layers, d = c.d_model, e = c.n_experts, k = c.n_routed_experts;
  const double b = c.batch_size, m = c.microbatch_size, l = c.seq_len;
  const double prec = c.precision_bits;
  const int64_t d_int = c.d_internal_ratio * c.d_model;
  const int64_t ep = c.n_experts;
  auto fail = [](const char* what) { return absl::InvalidArgumentError(what); };
  if (c.n_experts % c.n_routed_experts) return fail("n_experts must be a multiple of n_routed_experts");
  if (c.batch_size % c.microbatch_size) return fail("batch_size must be a multiple of microbatch_size");
  if ((c.microbatch_size * c.seq_len * c.n_routed_experts) % (c.dp * c.n_experts)) {
    return fail("microbatch_size*seq_len*n_routed_experts must be a multiple of dp*n_experts");
  }
  if (c.n_layers % (c.pp * c.pipeline_interleaving)) return fail("n_layers must be a multiple of pp*interleaving");
  if (c.pp == 1 && c.pipeline_interleaving != 1) return fail("interleaving needs pp > 1");
  if ((c.microbatch_size * c.seq_len) % c.dp) return fail("microbatch_size*seq_len must be a multiple of dp");
  if (d_int % c.tp) return fail("d_internal must be a multiple of tp");
  if (c.d_model % c.tp2) return fail("d_model must be a multiple of tp2");

  const Chip& chip = c.chip;
  auto matmul = [&](double a, double bb, double cc) {
    const double flop = 2 * a * bb * cc, io = a * bb + bb * cc + a * cc;
    return std::max(flop / chip.flop8_per_s * (prec / 8), io / chip.io_bytes_per_s);
  };
  auto tx_rx = [&](double size, double scatter) { return 2 * (size / scatter * prec / 8) / chip.net_bytes_per_s; };
  auto allreduce = [&](double size, double scatter, double deg) { return deg == 1 ? 0.0 : tx_rx(size, scatter); };

  SimpleResult r;
  const double p = static_cast<double>(c.pp * c.dp * c.tp * c.tp2 * ep);
  const double params_per_expert = L * 2 * d * d_int;
  r.params_active = k * params_per_expert;
  r.params_total = e * params_per_expert;
  r.dataset_tokens = c.dataset_tokens > 0 ? c.dataset_tokens : 20 * r.params_total;
  r.chips = static_cast<int64_t>(p);
  const double n_batches = std::floor(r.dataset_tokens / (b * l));
  const double cluster_flop = p * chip.flop8_per_s * (8 / prec);
  const int64_t steps = c.pp * c.pipeline_interleaving;
  r.boundary_interval = c.n_layers / steps;
  r.bubble_layers = (c.pp - 1) * r.boundary_interval;
  r.flop_per_batch = 6 * r.params_active * b * l;
  const double tokens_per_matmul = std::floor((m * l * k) / (c.dp * e));
  const double matmuls_per_chip = 2 * e / ep;
  r.matmul_time_s = matmul(static_cast<double>(d_int) / c.tp, d / c.tp2, tokens_per_matmul);

  for (int64_t i = 0; i < r.bubble_layers; ++i) {
    r.bubble_s += 2 * 3 * (e / ep) * r.matmul_time_s;
    r.bubble_s += 2 * allreduce(m * l * d_int * k, c.dp * c.tp * ep, c.tp2);
    r.bubble_s += 2 * allreduce(m * l * d, c.dp * c.tp2 * ep / k, k * c.tp);
    if ((i + 1) % r.boundary_interval == 0) {
      r.bubble_s += 2 * tx_rx(m * l * d, c.dp * c.tp * c.tp2 * ep);
    } else if (k * c.tp == 1 && ep > 1) {
      r.bubble_s += 2 * ((ep - 1.0) / ep) * tx_rx(m * l * d, c.dp * c.tp * c.tp2 * ep);
    }
  }
  r.full_s = 3 * static_cast<double>(c.n_layers / c.pp) * matmuls_per_chip * r.matmul_time_s *
             std::floor(b / m);
  r.grad_s = c.dp == 1 ? 0.0 : allreduce(r.params_total, std::floor(p / c.dp), c.dp);
  r.batch_s = r.bubble_s + r.full_s + r.grad_s;
  r.utilization = r.flop_per_batch / (cluster_flop * r.batch_s);
  r.days = r.batch_s * n_batches / 86400;
  return r;
}

EfficiencyResult CheckEfficiency(const EfficiencyConfig& c) {
  EfficiencyResult r;
  const double d = c.d_model, dh = c.d_head, heads = c.d_model / c.d_head;
  const double kv = c.multi_query ? 2 * d * dh : 2 * d * heads * dh;
  double per_layer = 2 * d * heads * dh + kv + 2 * d * c.d_ffn + (c.use_glu ? d * c.d_ffn : 0);
  r.params = c.num_layers * c.num_experts * per_layer;
  r.params_effective = r.params / c.num_experts;
  const double expert_l = static_cast<double>(c.seq_len) / c.num_experts;
  r.gradient_noise_ok = c.batch_size * expert_l <= 4096.0 * 2048.0;
  r.pipeline_ok = static_cast<double>(c.batch_size) / c.p_data >= 4.0 * c.p_pipe;
  r.tensor_ok = c.p_tensor_int <= c.d_ffn / 1024 && c.p_tensor_int <= heads * dh / 1024 &&
                c.p_tensor_ext <= c.d_model / 1024;
  const int64_t max_mb = c.batch_size / (4 * c.p_pipe);
  const int64_t min_mb = static_cast<int64_t>(
      std::ceil((1024.0 / (expert_l / (c.p_data * c.p_seq))) / c.p_data) * c.p_data);
  for (int64_t mb = min_mb; mb <= max_mb; mb += c.p_data) {
    if (mb > 0 && c.batch_size % mb == 0) r.allowed_micro_batches.push_back(mb);
  }
  return r;
}

}  // namespace stepcast::seed002

namespace stepcast::seed002 {
namespace {

enum Metric { kFlop = 0, kTx = 1, kRx = 2 };
enum Dir { kFwd = 0, kBwd = 1 };

// lib.py's algebra with dimensions and axes as bit sets (at most 32 dimensions, 8 axes).
class Algebra {
 public:
  struct Data {
    uint32_t dims = 0;     // data dimensions
    uint32_t scatter = 0;  // axes the data is scattered over
    uint32_t bcast = 0;    // axes the data is replicated over
  };

  int AddAxis(int64_t deg, bool rotational) {
    axes_.push_back({static_cast<double>(deg), rotational});
    all_axes_ |= 1u << (axes_.size() - 1);
    return static_cast<int>(axes_.size()) - 1;
  }
  int AddDim(double size, int pax, double virtual_size, bool autoreduce) {
    dims_.push_back({size, pax, virtual_size, autoreduce});
    return static_cast<int>(dims_.size()) - 1;
  }
  static uint32_t Bit(int i) { return 1u << i; }

  Data Make(uint32_t dims, uint32_t scatter = 0) const {
    Data d{dims, scatter, 0};
    d.bcast = all_axes_ & ~(Paxes(dims) | scatter);
    return d;
  }

  // Meters: nested scopes whose counts are multiplied into the parent on exit.
  void Enter(double multiplier) { stack_.push_back({{}, multiplier}); }
  void Exit() {
    Scope child = stack_.back();
    stack_.pop_back();
    for (int m = 0; m < 3; ++m)
      for (int d = 0; d < 2; ++d) stack_.back().counts[m][d] += child.multiplier * child.counts[m][d];
  }
  double Count(Metric m, Dir d) const { return stack_.front().counts[m][d]; }

  Data Mul(const Data& a, const Data& b) {
    const uint32_t dims = a.dims | b.dims;
    const uint32_t bcast = all_axes_ & ~Paxes(dims);
    const double size = Size(dims) * Degree(bcast);
    Add(kFlop, kFwd, size);
    Add(kFlop, kBwd, 4 * size);  // both input gradients, each with its reduction
    return Make(dims);
  }

  Data Bcast(const Data& a, uint32_t rotate = 0) {
    double stay = 1.0;
    for (int i = 0; i < static_cast<int>(dims_.size()); ++i) {
      if (!(rotate & Bit(i)) || dims_[i].pax < 0) continue;
      const Axis& ax = axes_[dims_[i].pax];
      stay *= ax.rotational ? 1 - (ax.deg - 1) / dims_[i].virtual_size : 1 / ax.deg;
    }
    const double boundary = 1 - stay;
    const double I = Size(a.dims), J = Degree(a.bcast), K = Degree(a.scatter);
    Add(kTx, kFwd, I * std::max(K > 1 ? 1.0 : 0.0, boundary));
    Add(kRx, kFwd, I * J * (K + boundary - 1));
    Add(kFlop, kBwd, I * J * (K + boundary - 1));
    Add(kTx, kBwd, I * J * (K + boundary - 1));
    Add(kRx, kBwd, I * J * (K + boundary - 1));
    return Make(a.dims);
  }

  // Reduce over `dim`; with a transpose, `from` takes over the reduced dimension's axis as `to`.
  Data Reduce(const Data& a, int dim, int from = -1, int to = -1) {
    uint32_t dims = a.dims & ~Bit(dim);
    const double I = Size(dims) * Degree(a.bcast);
    const double J = dims_[dim].size;
    const double K = dims_[dim].pax >= 0 ? axes_[dims_[dim].pax].deg : 1;
    Add(kFlop, kFwd, I * (J - 1));
    Add(kTx, kFwd, I * (K - 1));
    Add(kRx, kFwd, I * (K - 1));
    Add(kTx, kBwd, I * (K > 1 ? 1.0 : 0.0));
    Add(kRx, kBwd, I * (K - 1));
    if (from >= 0) dims = (dims & ~Bit(from)) | Bit(to);
    const uint32_t scatter = all_axes_ & ~(Paxes(dims) | a.bcast);
    return Make(dims, scatter);
  }
  Data Allreduce(const Data& a, int dim, uint32_t rotate = 0) { return Bcast(Reduce(a, dim), rotate); }

  // Pointwise product, then all-reduce the shared auto-reduced dimensions, local ones first.
  Data Dot(const Data& a, const Data& b) {
    Data r = Mul(a, b);
    const uint32_t shared = a.dims & b.dims;
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < static_cast<int>(dims_.size()); ++i) {
        if (!(shared & Bit(i)) || !dims_[i].autoreduce) continue;
        if ((dims_[i].pax >= 0) != (pass == 1)) continue;
        r = Allreduce(r, i);
      }
    }
    return r;
  }

  // Rename a parallel dimension to an unparallelised one and leave it scattered.
  Data ScatterTranspose(const Data& a, int from, int to) {
    uint32_t scatter = a.scatter;
    if (dims_[from].pax >= 0) scatter |= Bit(dims_[from].pax);
    return Make((a.dims & ~Bit(from)) | Bit(to), scatter);
  }

  // Concatenate a's `mine` with b's `theirs` (same axis) and reduce over the joined dimension.
  Data ReduceWith(const Data& a, const Data& b, int mine, int theirs) {
    const int cat = AddDim(dims_[mine].size + dims_[theirs].size, dims_[mine].pax, 0, false);
    (void)b;
    return Reduce(Make((a.dims & ~Bit(mine)) | Bit(cat)), cat);
  }

  double Size(uint32_t dims) const {
    double s = 1;
    for (int i = 0; i < static_cast<int>(dims_.size()); ++i)
      if (dims & Bit(i)) s *= dims_[i].size;
    return s;
  }

 private:
  struct Axis { double deg; bool rotational; };
  struct DimInfo { double size; int pax; double virtual_size; bool autoreduce; };
  struct Scope { double counts[3][2] = {}; double multiplier = 1; };

  uint32_t Paxes(uint32_t dims) const {
    uint32_t p = 0;
    for (int i = 0; i < static_cast<int>(dims_.size()); ++i)
      if ((dims & Bit(i)) && dims_[i].pax >= 0) p |= Bit(dims_[i].pax);
    return p;
  }
  double Degree(uint32_t axes) const {
    double d = 1;
    for (int i = 0; i < static_cast<int>(axes_.size()); ++i)
      if (axes & Bit(i)) d *= axes_[i].deg;
    return d;
  }
  void Add(Metric m, Dir d, double v) { stack_.back().counts[m][d] += v; }

  std::vector<Axis> axes_;
  std::vector<DimInfo> dims_;
  uint32_t all_axes_ = 0;
  std::vector<Scope> stack_ = {Scope{}};
};

}  // namespace

absl::StatusOr<AccountingResult> TransformerAccounting(const AccountingConfig& c) {
  auto fail = [](const std::string& why) { return absl::InvalidArgumentError(why); };
  if (c.num_layers <= 0 || c.d_model <= 0 || c.batch_size <= 0 || c.seq_len <= 0 || c.num_experts <= 0) {
    return fail("num_layers, d_model, batch_size, seq_len and num_experts must be > 0");
  }
  if (c.seq_len % c.num_experts) return fail("seq_len must be a multiple of num_experts");
  if (c.d_model % c.d_head) return fail("d_model must be a multiple of d_head");
  const int64_t expert_l = c.seq_len / c.num_experts;
  const int64_t d_ffn = c.d_ffn > 0 ? c.d_ffn : 4 * c.d_model;
  const int64_t heads = c.d_model / c.d_head;
  const struct { int64_t size, deg; const char* what; } splits[] = {
      {c.batch_size, c.p_data, "batch_size % p_data"}, {c.num_layers, c.p_pipe, "num_layers % p_pipe"},
      {c.num_experts, c.p_exp, "num_experts % p_exp"}, {expert_l, c.p_seq, "seq_len/num_experts % p_seq"},
      {c.d_model, c.p_tensor_ext, "d_model % p_tensor_ext"}, {d_ffn, c.p_tensor_int, "d_ffn % p_tensor_int"},
      {heads, c.p_tensor_int, "heads % p_tensor_int"}, {expert_l, c.p_tensor_ext, "seq_len/num_experts % p_tensor_ext"}};
  for (const auto& s : splits) {
    if (s.deg <= 0 || s.size % s.deg != 0) return fail(absl::StrCat(s.what, " must be 0"));
  }

  Algebra g;
  using D = Algebra::Data;
  const int DATA = g.AddAxis(c.p_data, false), PIPE = g.AddAxis(c.p_pipe, true);
  const int EXP = g.AddAxis(c.p_exp, false), SEQ = g.AddAxis(c.p_seq, false);
  const int TEXT = g.AddAxis(c.p_tensor_ext, false), TINT = g.AddAxis(c.p_tensor_int, false);
  const int SAMPLE = g.AddDim(c.p_data, DATA, 0, false);
  const int LAYER = g.AddDim(c.p_pipe, PIPE, c.num_layers, false);
  const int EXPERT = g.AddDim(c.num_experts, EXP, 0, false);
  const int TOKEN = g.AddDim(expert_l, SEQ, 0, false);
  const int WRITE_EXPERT = g.AddDim(c.num_experts, -1, 0, true);
  const int WRITE_TOKEN = g.AddDim(expert_l, TEXT, 0, true);
  const int D_MODEL = g.AddDim(c.d_model, TEXT, 0, true);
  const int D_FFN = g.AddDim(d_ffn, TINT, 0, true);
  const int ATTN_HEAD = g.AddDim(heads, TINT, 0, false);
  const int D_HEAD = g.AddDim(c.d_head, -1, 0, true);
  auto B = Algebra::Bit;

  AccountingResult r;
  const double n_batches = std::round(c.dataset_tokens / (static_cast<double>(c.batch_size) * c.seq_len));
  r.dataset_tokens = n_batches * c.batch_size * c.seq_len;
  r.chips = c.p_pipe * c.p_data * c.p_exp * c.p_seq * c.p_tensor_int * c.p_tensor_ext;
  const double layer_meter = static_cast<double>(c.num_layers) / c.p_pipe;

  g.Enter(n_batches);
  // Weights: broadcast over the data/sequence ranks, gradients reduced back.
  g.Enter(layer_meter);
  const uint32_t w_attn = B(LAYER) | B(EXPERT) | B(D_MODEL) | B(ATTN_HEAD) | B(D_HEAD);
  const uint32_t w_kv = c.multi_query ? B(LAYER) | B(EXPERT) | B(D_MODEL) | B(D_HEAD) : w_attn;
  const uint32_t kv_scatter = c.multi_query ? B(DATA) | B(SEQ) | B(TINT) : B(DATA) | B(SEQ);
  const uint32_t w_ffn = B(LAYER) | B(EXPERT) | B(D_MODEL) | B(D_FFN);
  const D Wq_s = g.Make(w_attn, B(DATA) | B(SEQ)), Wo_s = Wq_s;
  const D Wk_s = g.Make(w_kv, kv_scatter), Wv_s = Wk_s;
  const D Wff_s = g.Make(w_ffn, B(DATA) | B(SEQ));
  r.params = layer_meter * (2 * g.Size(w_attn) + 2 * g.Size(w_kv) + (c.use_glu ? 3 : 2) * g.Size(w_ffn));
  const D Wq = g.Bcast(Wq_s), Wo = g.Bcast(Wo_s), Wk = g.Bcast(Wk_s), Wv = g.Bcast(Wv_s);
  const D Wff1 = g.Bcast(Wff_s), Wff2 = g.Bcast(Wff_s);
  D Wff1b;
  if (c.use_glu) Wff1b = g.Bcast(Wff_s);
  g.Exit();

  // Forward and backward of every token.
  g.Enter(static_cast<double>(c.batch_size) * c.seq_len);
  g.Enter(layer_meter / (static_cast<double>(c.p_data) * c.seq_len));
  D x = g.Make(B(SAMPLE) | B(LAYER) | B(EXPERT) | B(TOKEN) | B(D_MODEL));
  const D q = g.Dot(Wq, x);
  auto key_or_value = [&](const D& W) {
    D t = g.Reduce(g.Mul(W, x), D_MODEL, TOKEN, WRITE_TOKEN);
    return g.Bcast(g.ScatterTranspose(t, EXPERT, WRITE_EXPERT));
  };
  const D k = key_or_value(Wk), v = key_or_value(Wv);
  const D qk = g.Dot(q, k);
  const D normalizer = g.Allreduce(g.Reduce(qk, WRITE_EXPERT), WRITE_TOKEN);
  const D a = g.Dot(g.Mul(qk, normalizer), v);
  const D attn_out = g.Dot(Wo, a);
  if (c.consecutive_attn_and_ffn) x = g.Allreduce(attn_out, ATTN_HEAD);
  D h = g.Dot(Wff1, x);
  if (c.use_glu) h = g.Mul(h, g.Dot(Wff1b, x));
  const D ffn_out = g.Mul(Wff2, h);
  if (c.consecutive_attn_and_ffn) {
    x = g.Allreduce(ffn_out, D_FFN, B(LAYER) | B(EXPERT));
  } else {
    x = g.Bcast(g.ReduceWith(attn_out, ffn_out, ATTN_HEAD, D_FFN), B(LAYER) | B(EXPERT));
  }
  g.Exit();
  g.Exit();
  g.Exit();

  r.flop_fwd = g.Count(kFlop, kFwd);
  r.flop_bwd = g.Count(kFlop, kBwd);
  r.tx_fwd = g.Count(kTx, kFwd);
  r.tx_bwd = g.Count(kTx, kBwd);
  r.rx_fwd = g.Count(kRx, kFwd);
  r.rx_bwd = g.Count(kRx, kBwd);
  if (c.activation_checkpointing) {  // the forward runs again in the backward
    r.flop_bwd += r.flop_fwd;
    r.tx_bwd += r.tx_fwd;
    r.rx_bwd += r.rx_fwd;
  }
  const double tx_per_flop = c.net_precision_bytes * r.tx_total() / r.flop_total();
  const double rx_per_flop = c.net_precision_bytes * r.rx_total() / r.flop_total();
  r.cluster_tx_bytes_per_s = tx_per_flop * c.cluster_flop_rate;
  r.cluster_rx_bytes_per_s = rx_per_flop * c.cluster_flop_rate;
  r.cluster_bytes_per_s = r.cluster_tx_bytes_per_s + r.cluster_rx_bytes_per_s;
  r.total_flop_per_s = r.chips * c.cluster_flop_rate;
  r.total_bytes_per_s = r.cluster_bytes_per_s * r.chips;
  r.runtime_s = r.total_flop_per_s > 0 ? r.flop_total() / r.total_flop_per_s : 0;
  return r;
}

}  // namespace stepcast::seed002
