#include "core/interval.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/job.h"
#include "core/step_time.h"

namespace stepcast {

const std::vector<FrameworkRegime>& FrameworkRegimes() {
  // Family: the kernel and runtime stack; era: 2024+ when the preset's release range starts in
  // 2024 or later (its `version` line, presets/frameworks/*.yaml).
  static const std::vector<FrameworkRegime> kRegimes = {
      {"megatron-lm-2021", FrameworkFamily::kMegatron, FrameworkEra::kBefore2024,
       "Megatron-LM v2.x as run in Narayanan et al. 2021 (from_year 2019, to_year 2021)"},
      {"megatron-lm-2022", FrameworkFamily::kMegatron, FrameworkEra::kBefore2024,
       "Megatron-LM v3.0 (2022), Korthikanti et al. 2022 (from_year 2022, to_year 2023)"},
      {"megatron-core", FrameworkFamily::kMegatron, FrameworkEra::kFrom2024,
       "Megatron-Core core_r0.8.0 .. core_r0.14.0 (2024-2025; from_year 2024)"},
      {"megatron-bridge", FrameworkFamily::kMegatron, FrameworkEra::kFrom2024,
       "Megatron-Bridge 0.1-0.2 in NeMo containers 25.09-25.11"},
      {"nemo", FrameworkFamily::kMegatron, FrameworkEra::kFrom2024,
       "NeMo Framework 24.x and NeMo 2.0 (24.09-25.04), Megatron-Core inside"},
      {"deepspeed", FrameworkFamily::kDeepSpeed, FrameworkEra::kBefore2024,
       "DeepSpeed 0.9-0.16 ZeRO with Megatron-DeepSpeed (Megatron-LM 2021 kernels)"},
      {"llm-foundry", FrameworkFamily::kPytorch, FrameworkEra::kBefore2024,
       "llm-foundry 0.x with Composer 0.2x, PyTorch FSDP1 (the MPT benchmarks: 2023)"},
      {"torchtitan", FrameworkFamily::kPytorch, FrameworkEra::kFrom2024,
       "torchtitan 2024-2025 on PyTorch 2.4-2.8 (FSDP2)"},
      {"torchtitan-compile", FrameworkFamily::kPytorch, FrameworkEra::kFrom2024,
       "torchtitan with torch.compile (2024-2025)"},
      {"pytorch-fsdp1", FrameworkFamily::kPytorch, FrameworkEra::kBefore2024,
       "PyTorch 2.0-2.3 FullyShardedDataParallel (from_year 2023)"},
      {"pytorch-fsdp2", FrameworkFamily::kPytorch, FrameworkEra::kFrom2024, "PyTorch 2.4+ fully_shard (2024-)"},
      {"nemo-automodel", FrameworkFamily::kPytorch, FrameworkEra::kFrom2024,
       "NeMo AutoModel 2025-2026, FSDP2 on PyTorch 2.6+"},
      // Colossal-AI's Gemini: PyTorch eager kernels under its own chunk manager; the PyTorch family
      // (the kernel stack) is the nearest, its sharding feature keeps it apart from FSDP's rows.
      {"colossalai-gemini", FrameworkFamily::kPytorch, FrameworkEra::kBefore2024,
       "Colossal-AI 0.3-0.4 GeminiPlugin (2023-2024)"},
      {"maxtext", FrameworkFamily::kJax, FrameworkEra::kFrom2024, "MaxText 2024-2025 on JAX 0.4.3x-0.6 / XLA GPU"},
      {"paxml", FrameworkFamily::kJax, FrameworkEra::kBefore2024,
       "Paxml/Praxis 1.x (2023-2024) in NVIDIA JAX-Toolbox containers"},
  };
  return kRegimes;
}

namespace {

// Bit widths of the features, in kRegimeFeatureOrder: family, MoE, sharding, pipeline, scale,
// era, precision, GPU.
constexpr std::array<int, kRegimeFeatures> kWidth = {3, 1, 1, 1, 2, 1, 2, 2};
constexpr int kKeyBits = 13;

constexpr int Shift(int feature) {
  int used = 0;
  for (int i = 0; i <= feature; ++i) used += kWidth[i];
  return kKeyBits - used;
}

const char* FamilyText(FrameworkFamily f) {
  switch (f) {
    case FrameworkFamily::kMegatron: return "Megatron-family";
    case FrameworkFamily::kDeepSpeed: return "DeepSpeed";
    case FrameworkFamily::kPytorch: return "PyTorch-FSDP-family";
    case FrameworkFamily::kJax: return "JAX/XLA";
    case FrameworkFamily::kOther: break;
  }
  return "unlisted-framework";
}
const char* ScaleText(ScaleBand s) {
  switch (s) {
    case ScaleBand::k1To8: return "1-8 GPUs";
    case ScaleBand::k9To64: return "9-64 GPUs";
    case ScaleBand::k65To512: return "65-512 GPUs";
    case ScaleBand::kAbove512: return "more than 512 GPUs";
  }
  return "?";
}
const char* PrecisionText(PrecisionClass p) {
  switch (p) {
    case PrecisionClass::k16Bit: return "bf16/fp16";
    case PrecisionClass::kFp8: return "fp8";
    case PrecisionClass::kOther: break;
  }
  return "other-precision";
}
const char* GpuText(GpuGeneration g) {
  switch (g) {
    case GpuGeneration::kAmpere: return "Ampere";
    case GpuGeneration::kHopper: return "Hopper";
    case GpuGeneration::kBlackwell: return "Blackwell";
    case GpuGeneration::kOther: break;
  }
  return "other-GPU";
}

// The text of feature i of the order.
std::string FeatureText(const Regime& r, int i, bool phrase) {
  switch (i) {
    case 0: return FamilyText(r.family);
    case 1: return r.moe ? "MoE" : "dense";
    case 2: return r.sharded_weights ? "ZeRO-3/FSDP" : (phrase ? "replicated-weight (ZeRO 0-2)" : "replicated weights");
    case 3: return r.pipeline ? (phrase ? "with PP" : "PP") : (phrase ? "without PP" : "no PP");
    case 4: return phrase ? absl::StrCat("on ", ScaleText(r.scale)) : ScaleText(r.scale);
    case 5: return r.era == FrameworkEra::kFrom2024 ? "2024+ releases" : "pre-2024 releases";
    case 6: return phrase ? absl::StrCat("in ", PrecisionText(r.precision)) : PrecisionText(r.precision);
    case 7: return phrase ? absl::StrCat("on ", GpuText(r.gpu)) : GpuText(r.gpu);
  }
  return "";
}

double Ln(double x) { return std::log(x); }

}  // namespace

const char* FrameworkFamilyName(FrameworkFamily f) { return FamilyText(f); }

uint32_t Regime::Key() const {
  const uint32_t f[kRegimeFeatures] = {
      static_cast<uint32_t>(family), moe ? 1u : 0u, sharded_weights ? 1u : 0u, pipeline ? 1u : 0u,
      static_cast<uint32_t>(scale), static_cast<uint32_t>(era), static_cast<uint32_t>(precision),
      static_cast<uint32_t>(gpu)};
  uint32_t k = 0;
  for (int i = 0; i < kRegimeFeatures; ++i) k |= (f[i] & ((1u << kWidth[i]) - 1)) << Shift(i);
  return k;
}

Regime Regime::FromKey(uint32_t key) {
  auto get = [key](int i) { return (key >> Shift(i)) & ((1u << kWidth[i]) - 1); };
  Regime r;
  r.family = static_cast<FrameworkFamily>(get(0));
  r.moe = get(1) != 0;
  r.sharded_weights = get(2) != 0;
  r.pipeline = get(3) != 0;
  r.scale = static_cast<ScaleBand>(get(4));
  r.era = static_cast<FrameworkEra>(get(5));
  r.precision = static_cast<PrecisionClass>(get(6));
  r.gpu = static_cast<GpuGeneration>(get(7));
  return r;
}

uint32_t RegimeLevelMask(int level) {
  uint32_t m = 0;
  for (int i = 0; i < kRegimeFeatures - level; ++i) m |= ((1u << kWidth[i]) - 1) << Shift(i);
  return m;
}

FrameworkRegime FrameworkRegimeOf(const std::string& name) {
  // Once per prediction: lengths first, then the bytes (no strlen per entry).
  static const std::vector<std::string_view> kNames = [] {
    std::vector<std::string_view> v;
    for (const FrameworkRegime& f : FrameworkRegimes()) v.emplace_back(f.name);
    return v;
  }();
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i].size() == name.size() && std::memcmp(kNames[i].data(), name.data(), name.size()) == 0) {
      return FrameworkRegimes()[i];
    }
  }
  return {"", FrameworkFamily::kOther, FrameworkEra::kFrom2024, ""};
}

ScaleBand ScaleBandOf(int64_t gpus) {
  if (gpus <= 8) return ScaleBand::k1To8;
  if (gpus <= 64) return ScaleBand::k9To64;
  if (gpus <= 512) return ScaleBand::k65To512;
  return ScaleBand::kAbove512;
}

GpuGeneration GpuGenerationOf(const std::string& a) {
  if (a == "hopper") return GpuGeneration::kHopper;
  if (a == "ampere") return GpuGeneration::kAmpere;
  if (a == "blackwell") return GpuGeneration::kBlackwell;
  return GpuGeneration::kOther;
}

Regime RegimeOf(const Job& job) {
  Regime r;
  const FrameworkRegime f = FrameworkRegimeOf(job.framework.name);
  r.family = f.family;
  r.era = f.era;
  r.moe = job.model.moe.enabled();
  r.sharded_weights = job.training.sharding == Sharding::kZero3;
  r.pipeline = job.parallelism.pp > 1;
  r.scale = ScaleBandOf(job.parallelism.gpu_count());
  const DType g = job.training.precision.gemm;
  r.precision = g == DType::kFP8 ? PrecisionClass::kFp8
                : (g == DType::kBF16 || g == DType::kFP16) ? PrecisionClass::k16Bit
                                                           : PrecisionClass::kOther;
  r.gpu = GpuGenerationOf(job.hardware.architecture);
  return r;
}

std::string RegimeText(const Regime& r, int level) {
  if (level >= kRegimeFeatures) return "every validated run";
  // Memoized per thread by (key, level): every prediction's interval formats its regime three or
  // four times (the proto's regime and derived_from, the summary, a note), ~5% of the request
  // path (docs/PERFORMANCE.md, issue 30). At most kRegimeKeyCount x kRegimeFeatures entries.
  thread_local std::unordered_map<uint32_t, std::string> memo;
  const uint32_t k = r.Key() * static_cast<uint32_t>(kRegimeFeatures) + static_cast<uint32_t>(std::max(0, level));
  auto [it, inserted] = memo.try_emplace(k);
  if (inserted) {
    std::vector<std::string> parts;
    for (int i = 0; i < kRegimeFeatures - std::max(0, level); ++i) parts.push_back(FeatureText(r, i, false));
    it->second = absl::StrJoin(parts, " / ");
  }
  return it->second;
}

std::string RegimePhrase(const Regime& r, int features) {
  std::vector<std::string> parts;
  for (int i = 0; i < std::min(features, kRegimeFeatures); ++i) parts.push_back(FeatureText(r, i, true));
  return absl::StrJoin(parts, " ");
}

double MinimumWeight(double coverage) {
  const double w = (1 + coverage) / (1 - coverage);
  return std::fabs(w - std::round(w)) < 1e-9 ? std::round(w) : w;  // 1.8 / 0.2 is 9 + 2e-15 in doubles
}

ConformalBounds ConformalInterval(std::vector<WeightedValue> v, double coverage) {
  ConformalBounds b;
  for (const WeightedValue& x : v) b.weight += x.weight;
  if (v.empty()) return b;
  std::sort(v.begin(), v.end(), [](const WeightedValue& a, const WeightedValue& c) { return a.value < c.value; });
  // 1e-9: a tie with the threshold is a hit (0.9 x 10 is 9 in exact arithmetic).
  const double need = (1 + coverage) / 2 * (b.weight + 1) - 1e-9;
  if (need > b.weight) return b;  // infinite ends
  double below = 0;
  for (const WeightedValue& x : v) {
    below += x.weight;
    if (below >= need) {
      b.hi = x.value;
      break;
    }
  }
  double above = 0;
  for (auto it = v.rbegin(); it != v.rend(); ++it) {
    above += it->weight;
    if (above >= need) {
      b.lo = it->value;
      break;
    }
  }
  b.finite = true;
  return b;
}

const char* MemoryVerdictName(MemoryVerdict v) {
  switch (v) {
    case MemoryVerdict::kFits: return "fits";
    case MemoryVerdict::kTight: return "TIGHT";
    case MemoryVerdict::kDoesNotFit: return "does not fit";
  }
  return "?";
}

void IntervalTable::BuildOutsideBounds(const std::map<uint32_t, std::set<std::string>>& region_sources,
                                       const std::map<std::string, int>& per_experiment) {
  std::vector<WeightedValue> outside;
  std::set<std::string> sources;
  for (const ResidualRun& r : step_) {
    const auto it = region_sources.find(r.regime.Key() & RegimeLevelMask(kValidatedRegionLevel));
    if (it == region_sources.end() || it->second.size() != 1) continue;
    outside.push_back({Ln(r.measured_s / r.predicted_s), 1.0 / per_experiment.at(r.experiment)});
    sources.insert(r.source);
  }
  outside_rows_ = static_cast<int>(outside.size());
  outside_sources_ = static_cast<int>(sources.size());
  outside_bounds_ = ConformalInterval(std::move(outside), coverage_);
}

IntervalTable IntervalTable::Build(std::vector<ResidualRun> step, std::vector<MemoryResidualRun> memory,
                                   double coverage) {
  IntervalTable t;
  t.coverage_ = coverage;
  auto usable = [](double p, double m) { return std::isfinite(p) && std::isfinite(m) && p > 0 && m > 0; };
  std::erase_if(step, [&](const ResidualRun& r) { return !usable(r.predicted_s, r.measured_s); });
  std::erase_if(memory, [&](const MemoryResidualRun& r) { return !usable(r.predicted_bytes, r.measured_bytes); });
  t.step_ = std::move(step);
  t.memory_ = std::move(memory);

  // Each GPU generation's rows and median measured / predicted (unweighted: a lean over rows).
  {
    std::array<std::vector<double>, kGpuGenerations> ratios;
    for (const ResidualRun& r : t.step_) ratios[static_cast<int>(r.regime.gpu)].push_back(r.measured_s / r.predicted_s);
    for (size_t g = 0; g < ratios.size(); ++g) {
      std::vector<double>& v = ratios[g];
      if (v.empty()) continue;
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      t.generation_lean_[g] = {static_cast<int>(n), n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])};
    }
  }
  // Weights: a weak-scaling series (experiment) weighs 1.
  std::map<std::string, int> per_experiment;
  for (const ResidualRun& r : t.step_) ++per_experiment[r.experiment];
  struct Acc {
    std::vector<WeightedValue> values;
    std::set<std::string> sources;
  };
  std::map<std::pair<int, uint32_t>, Acc> acc;
  bool any = false;
  for (const ResidualRun& r : t.step_) {
    const double res = Ln(r.measured_s / r.predicted_s);
    const double w = 1.0 / per_experiment[r.experiment];
    if (!any) t.widest_lo_ = t.widest_hi_ = res;
    any = true;
    t.widest_lo_ = std::min(t.widest_lo_, res);
    t.widest_hi_ = std::max(t.widest_hi_, res);
    const uint32_t key = r.regime.Key();
    for (int level = 0; level < kRegimeLevels; ++level) {
      Acc& a = acc[{level, key & RegimeLevelMask(level)}];
      a.values.push_back({res, w});
      a.sources.insert(r.source);
    }
  }
  for (auto& [id, a] : acc) {
    Node n;
    n.level = id.first;
    n.key = id.second;
    n.rows = static_cast<int>(a.values.size());
    n.sources = static_cast<int>(a.sources.size());
    n.bounds = ConformalInterval(std::move(a.values), coverage);
    n.experiments = n.bounds.weight;
    t.nodes_.push_back(n);
  }  // std::map order: (level, key)

  // The out-of-region runs: no other source has a run in their validated-region regime.
  std::map<uint32_t, std::set<std::string>> region_sources;
  for (const auto& [id, a] : acc) {
    if (id.first == kValidatedRegionLevel) region_sources[id.second] = a.sources;
  }
  t.BuildOutsideBounds(region_sources, per_experiment);

  // Every key's resolution, and that of a job outside the region whatever its key.
  {
    const bool outside = t.outside_bounds_.finite;
    t.outside_resolution_.low_ratio = std::exp(outside ? t.outside_bounds_.lo : t.widest_lo_);
    t.outside_resolution_.high_ratio = std::exp(outside ? t.outside_bounds_.hi : t.widest_hi_);
  }
  t.resolution_.assign(kRegimeKeyCount, Resolution{});
  for (uint32_t key = 0; key < kRegimeKeyCount; ++key) {
    const Regime r = Regime::FromKey(key);
    Resolution& res = t.resolution_[key];
    const Node* region = t.FindNode(kValidatedRegionLevel, r);
    res.region_experiments = region != nullptr ? static_cast<float>(region->experiments) : 0.0f;
    res.validated = region != nullptr;
    if (!res.validated) {
      // The shortest prefix of the order with no run.
      for (int features = 1; features <= kRegimeFeatures - kValidatedRegionLevel; ++features) {
        if (t.FindNode(kRegimeFeatures - features, r) == nullptr) {
          res.unvalidated_prefix = static_cast<int8_t>(features);
          break;
        }
      }
      res.low_ratio = t.outside_resolution_.low_ratio;
      res.high_ratio = t.outside_resolution_.high_ratio;
      continue;
    }
    for (int level = 0; level < kRegimeLevels; ++level) {
      const Node* n = t.FindNode(level, r);
      if (n != nullptr && n->bounds.finite) {
        res.node = static_cast<int16_t>(n - t.nodes_.data());
        res.level = static_cast<int8_t>(level);
        res.low_ratio = std::exp(n->bounds.lo);
        res.high_ratio = std::exp(n->bounds.hi);
        break;
      }
    }
    if (res.node < 0) {  // too few runs even in all: the widest
      res.low_ratio = std::exp(t.widest_lo_);
      res.high_ratio = std::exp(t.widest_hi_);
    }
  }

  // Memory, by framework family.
  std::map<std::string, int> mem_per_experiment;
  for (const MemoryResidualRun& r : t.memory_) ++mem_per_experiment[r.experiment];
  std::array<std::vector<WeightedValue>, 5> mv;
  for (const MemoryResidualRun& r : t.memory_) {
    const int f = static_cast<int>(r.family);
    mv[f].push_back({Ln(r.measured_bytes / r.predicted_bytes), 1.0 / mem_per_experiment[r.experiment]});
    ++t.memory_rows_[f];
  }
  for (int f = 0; f < 5; ++f) t.memory_bounds_[f] = ConformalInterval(std::move(mv[f]), coverage);
  return t;
}

const IntervalTable::Node* IntervalTable::FindNode(int level, const Regime& r) const {
  const uint32_t key = r.Key() & RegimeLevelMask(level);
  auto it = std::lower_bound(nodes_.begin(), nodes_.end(), std::make_pair(level, key),
                             [](const Node& n, const std::pair<int, uint32_t>& k) {
                               return std::make_pair(n.level, n.key) < k;
                             });
  if (it == nodes_.end() || it->level != level || it->key != key) return nullptr;
  return &*it;
}

std::string MechanismNames(uint32_t bits) {
  static const std::pair<uint32_t, const char*> kNames[] = {
      {kMechTpComm, "tp_comm"},           {kMechTpCommBackward, "tp_comm_backward"},
      {kMechDpGradReduce, "dp_grad_reduce"}, {kMechDpParamGather, "dp_param_gather"},
      {kMechFsdpParamGather, "fsdp_param_gather"}, {kMechPpP2p, "pp_p2p"},
      {kMechCpRing, "cp_ring"},           {kMechEpAllToAll, "ep_all_to_all"},
  };
  std::vector<std::string> out;
  for (const auto& [b, n] : kNames) {
    if (bits & b) out.push_back(n);
  }
  return absl::StrJoin(out, ", ");
}

namespace {

// The low-confidence mechanisms `job` uses (supported, flagged, not measured by the profile,
// and exercised by its layout).
uint32_t LowConfidenceInUse(const Job& job) {
  const OverlapModel& o = job.framework.overlap;
  const Parallelism& p = job.parallelism;
  const TrainingConfig& t = job.training;
  auto measured = [&](const char* name) {
    for (const RateProfile::Overlap& m : job.profile.overlaps) {
      if (m.mechanism == name) return true;
    }
    return false;
  };
  auto flagged = [&](const OverlapMechanism& m, const char* name) {
    return m.supported && m.low_confidence && !measured(name);
  };
  const int64_t dp_ranks = p.dp * p.cp;
  uint32_t bits = 0;
  if (p.tp > 1 && t.overlap_tp_comm && flagged(o.tp_comm, "tp_comm")) bits |= kMechTpComm;
  if (p.tp > 1 && !t.overlap_tp_comm && flagged(o.tp_comm_backward, "tp_comm_backward")) bits |= kMechTpCommBackward;
  if (dp_ranks > 1 && t.overlap_dp_comm && flagged(o.dp_grad_reduce, "dp_grad_reduce")) bits |= kMechDpGradReduce;
  if (dp_ranks > 1 && t.sharding != Sharding::kNone && t.sharding != Sharding::kZero3 &&
      flagged(o.dp_param_gather, "dp_param_gather")) {
    bits |= kMechDpParamGather;
  }
  if (dp_ranks > 1 && t.sharding == Sharding::kZero3 && flagged(o.fsdp_param_gather, "fsdp_param_gather")) {
    bits |= kMechFsdpParamGather;
  }
  if (p.pp > 1 && flagged(o.pp_p2p, "pp_p2p")) bits |= kMechPpP2p;
  if (p.cp > 1 && flagged(o.cp_ring, "cp_ring")) bits |= kMechCpRing;
  if (p.ep > 1 && flagged(o.ep_all_to_all, "ep_all_to_all")) bits |= kMechEpAllToAll;
  return bits;
}

OverlapMechanism* Mechanism(OverlapModel& o, uint32_t bit) {
  switch (bit) {
    case kMechTpComm: return &o.tp_comm;
    case kMechTpCommBackward: return &o.tp_comm_backward;
    case kMechDpGradReduce: return &o.dp_grad_reduce;
    case kMechDpParamGather: return &o.dp_param_gather;
    case kMechFsdpParamGather: return &o.fsdp_param_gather;
    case kMechPpP2p: return &o.pp_p2p;
    case kMechCpRing: return &o.cp_ring;
    case kMechEpAllToAll: return &o.ep_all_to_all;
  }
  return nullptr;
}

}  // namespace

StepTimeInterval EstimateStepTimeInterval(const Job& job, double step_time_s, const IntervalTable& table) {
  return EstimateStepTimeInterval(job, step_time_s, table, RegimeOf(job));
}

StepTimeInterval EstimateStepTimeInterval(const Job& job, double step_time_s, const IntervalTable& table,
                                          const Regime& regime) {
  StepTimeInterval i;
  i.available = true;
  i.coverage = table.coverage();
  i.minimum_experiments = MinimumWeight(table.coverage());
  i.regime = regime;
  // A hybrid Mamba-2 model: no published hybrid run is in the table (its regimes are the
  // transformers'), so it is outside the validated region whatever its regime.
  i.hybrid = job.model.Hybrid();
  const IntervalTable::Resolution& res = i.hybrid ? table.OutsideRegion() : table.Resolve(i.regime);
  i.validated = res.validated;
  i.unvalidated_prefix = res.unvalidated_prefix;
  i.region_experiments = res.region_experiments;
  i.level = res.level;
  i.below_minimum = res.validated && res.region_experiments < i.minimum_experiments - 1e-9;
  if (res.node >= 0) {
    const IntervalTable::Node& n = table.nodes()[res.node];
    i.experiments = n.experiments;
    i.rows = n.rows;
    i.sources = n.sources;
  } else if (!res.validated && table.outside_bounds().finite) {
    i.from_outside_runs = true;  // the out-of-region runs' interval
    i.experiments = table.outside_bounds().weight;
    i.rows = table.outside_rows();
    i.sources = table.outside_sources();
  } else if (const IntervalTable::Node* all = table.FindNode(kRegimeFeatures, i.regime); all != nullptr) {
    i.experiments = all->experiments;  // the widest interval: the range of every run
    i.rows = all->rows;
    i.sources = all->sources;
  }
  i.low_s = step_time_s * res.low_ratio;
  i.high_s = step_time_s * res.high_ratio;
  // The GPU generation's own lean where the interval does not condition on it.
  if (i.level != 0 && i.regime.gpu != GpuGeneration::kOther) {
    const IntervalTable::GenerationLean& g = table.generation_lean(i.regime.gpu);
    if (g.rows >= kGenerationLeanMinimumRows) {
      i.gpu_generation_rows = g.rows;
      i.gpu_generation_median_ratio = g.median_ratio;
    }
  }

  // Low-confidence overlap values: the step with each such mechanism hiding nothing (upper) and
  // hiding all it can (lower), the rest as the preset has it.
  i.low_confidence = LowConfidenceInUse(job);
  if (i.low_confidence != 0 && step_time_s > 0) {
    Job exposed = job, hidden = job;
    for (uint32_t bit = 1; bit <= kMechEpAllToAll; bit <<= 1) {
      if (!(i.low_confidence & bit)) continue;
      Mechanism(exposed.framework.overlap, bit)->supported = false;
      OverlapMechanism* h = Mechanism(hidden.framework.overlap, bit);
      *h = OverlapMechanism{};
      h->supported = true;
      h->efficiency = 1;
    }
    const double up = EstimateStepTime(exposed).step_time_s / step_time_s;
    const double down = EstimateStepTime(hidden).step_time_s / step_time_s;
    if (std::isfinite(up) && up > 1) i.high_s *= up;
    if (std::isfinite(down) && down > 0 && down < 1) i.low_s *= down;
  }

  // Compute rates that are only an upper bound for the part: the upper end also holds the step at
  // the lowest rates the profile's source allows (the point estimate stays at the given rates).
  const double f = job.profile.compute_rate_low_fraction;
  if (f > 0 && f < 1 && step_time_s > 0) {
    const double up = EstimateStepTime(ComputeRatesScaled(job, f)).step_time_s / step_time_s;
    if (std::isfinite(up) && up > 1) {
      i.compute_rate_low_fraction = f;
      i.compute_rate_low_source = job.profile.compute_rate_low_source;
      i.compute_rate_low_step_ratio = up;
      i.high_s *= up;
    }
  }
  // A hybrid's SSD scan at the Triton kernels' measured share of the point rate (core/step_time.h):
  // the upper end.
  if (i.hybrid && job.profile.ssd_flops_per_s <= 0 && job.model.HybridCounts().mamba > 0 && step_time_s > 0) {
    Job slow = job;
    slow.profile.ssd_flops_per_s = kSsdTritonShare * kSsdPeakFraction * job.hardware.PeakFlops(DType::kBF16);
    const double up = EstimateStepTime(slow).step_time_s / step_time_s;
    if (std::isfinite(up) && up > 1) {
      i.ssd_slow_step_ratio = up;
      i.high_s *= up;
    }
  }
  return i;
}

Job ComputeRatesScaled(const Job& job, double scale) {
  Job out = job;
  auto on_the_part = [](RateOrigin o) { return o == RateOrigin::kMeasured || o == RateOrigin::kImported; };
  for (GemmRatePoint& g : out.profile.gemm) {
    if (!on_the_part(g.origin)) g.flops_per_s *= scale;
  }
  if (!on_the_part(out.profile.attention_origin)) out.profile.attention_flops_per_s *= scale;
  out.framework.attention.ScaleRates(scale);
  out.profile.compute_rate_low_fraction = 0;
  return out;
}

std::string IntervalSummary(const StepTimeInterval& i) {
  if (!i.available) return "";
  std::string from;
  if (i.from_outside_runs) {
    from = absl::StrFormat(
        "the runs outside the validated region (%.3g runs of %d source%s, each outside it when its source was left out)",
        i.experiments, i.sources, i.sources == 1 ? "" : "s");
  } else if (!i.validated || i.level < 0) {
    from = absl::StrFormat("the widest interval (the range of every validated run's error, %.0f runs)", i.experiments);
  } else {
    from = absl::StrFormat("%s%s (%.3g validated runs, %d source%s)", i.level == 0 ? "its regime " : "the broader regime ",
                           RegimeText(i.regime, i.level), i.experiments, i.sources, i.sources == 1 ? "" : "s");
  }
  return absl::StrFormat("%.0f%% interval %.4g-%.4g s, from %s", 100 * i.coverage, i.low_s, i.high_s, from);
}

std::vector<std::string> IntervalNotes(const StepTimeInterval& i) {
  std::vector<std::string> out;
  if (!i.available) return out;
  if (i.hybrid) {
    out.push_back(absl::StrCat(
        "no published run of a hybrid Mamba-2 model was validated: outside the validated region, the interval is ",
        i.from_outside_runs ? "how far the model has been off on regimes it had no validated run of"
                            : "the widest the table holds",
        "; its Mamba-2 scan is costed at the rate of mamba_ssm's Triton chunk-scan kernel, one of the five kernels "
        "of the scan Megatron-Core runs, which measured slower as a whole (the step leans fast)"));
    if (i.ssd_slow_step_ratio > 1) {
      out.push_back(absl::StrFormat(
          "the upper end holds the step with the Mamba-2 scan at %.2g of that rate (mamba_ssm's whole scan measured "
          "%.3g TFLOP/s against the chunk-scan kernel's %.3g), %.1f%% slower",
          kSsdTritonShare, kSsdTritonFlopsPerS / 1e12, kSsdTritonChunkScanFlopsPerS / 1e12,
          100 * (i.ssd_slow_step_ratio - 1)));
    }
  } else if (!i.validated) {
    out.push_back(absl::StrCat("no published run of ", RegimePhrase(i.regime, std::max(1, i.unvalidated_prefix)),
                               i.from_outside_runs
                                   ? " was validated: outside the validated region, the interval is how far the model "
                                     "has been off on regimes it had no validated run of"
                                   : " was validated: outside the validated region, the interval is the widest the "
                                     "table holds"));
  } else if (i.below_minimum) {
    out.push_back(absl::StrFormat(
        "its regime (%s) has %.3g validated runs, below the minimum of %.0f: the interval comes from %s",
        RegimeText(i.regime, kValidatedRegionLevel), i.region_experiments, i.minimum_experiments,
        i.level >= 0 ? RegimeText(i.regime, i.level) : std::string("the widest interval")));
  }
  if (i.gpu_generation_rows > 0) {
    const double pct = 100 * (i.gpu_generation_median_ratio - 1);
    out.push_back(absl::StrFormat(
        "the interval does not condition on the GPU: the %d validated runs on %s GPUs measured a median %.1f%% %s "
        "than their leave-one-source-out predictions",
        i.gpu_generation_rows, GpuText(i.regime.gpu), std::fabs(pct), pct >= 0 ? "slower" : "faster"));
  }
  if (i.compute_rate_low_fraction > 0) {
    out.push_back(absl::StrFormat(
        "the compute rates not measured on this part are an upper bound for it (it may sustain as little as %.3g "
        "of them: %s): the upper end holds the step at those rates, %.1f%% slower",
        i.compute_rate_low_fraction, i.compute_rate_low_source, 100 * (i.compute_rate_low_step_ratio - 1)));
  }
  if (i.low_confidence != 0) {
    out.push_back(absl::StrCat("rests on low-confidence overlap values of the framework preset (", MechanismNames(i.low_confidence),
                               "): widened to the step with each hiding nothing and everything it can"));
  }
  return out;
}

MemoryInterval EstimateMemoryInterval(double total_bytes, double capacity_bytes, FrameworkFamily family,
                                      const IntervalTable* table, double fallback_uncertainty) {
  MemoryInterval m;
  m.family = family;
  if (table != nullptr && table->memory_bounds(family).finite) {
    const ConformalBounds& b = table->memory_bounds(family);
    m.available = true;
    m.coverage = table->coverage();
    m.experiments = b.weight;
    m.rows = table->memory_rows(family);
    m.low_bytes = total_bytes * std::exp(b.lo);
    m.high_bytes = total_bytes * std::exp(b.hi);
    m.verdict = m.high_bytes <= capacity_bytes  ? MemoryVerdict::kFits
                : m.low_bytes > capacity_bytes ? MemoryVerdict::kDoesNotFit
                                               : MemoryVerdict::kTight;
    return m;
  }
  if (table != nullptr) {
    m.experiments = table->memory_bounds(family).weight;
    m.rows = table->memory_rows(family);
  }
  m.low_bytes = m.high_bytes = total_bytes;
  m.verdict = total_bytes <= capacity_bytes                                ? MemoryVerdict::kFits
              : total_bytes <= capacity_bytes * (1 + fallback_uncertainty) ? MemoryVerdict::kTight
                                                                           : MemoryVerdict::kDoesNotFit;
  return m;
}

std::string MemoryIntervalSummary(const MemoryInterval& m, double capacity_bytes) {
  const double gib = 1024.0 * 1024 * 1024;
  if (m.available) {
    return absl::StrFormat("%.0f%% interval %.1f-%.1f GiB per GPU from %.3g measured %s runs against %.1f GiB: %s",
                           100 * m.coverage, m.low_bytes / gib, m.high_bytes / gib, m.experiments, FamilyText(m.family),
                           capacity_bytes / gib, MemoryVerdictName(m.verdict));
  }
  return absl::StrFormat(
      "%.3g measured %s runs, below the minimum for an interval: %s from the point estimate and the memory "
      "model's documented uncertainty",
      m.experiments, FamilyText(m.family), MemoryVerdictName(m.verdict));
}

}  // namespace stepcast
