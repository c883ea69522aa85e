// File: core/interval.h
//
// How far a prediction has been off: the 80% interval of a step-time prediction and of the
// per-GPU memory, from the residuals of validated runs (docs/VALIDATION.md "Intervals").
//
// Step time. A residual is r = ln(measured / predicted) of one published run, predicted
// leave-one-source-out (the model choices its own source informed switched off). Residuals are
// grouped by the regime of the run's job, read from the job itself (Regime below: framework
// family and era, dense/MoE, sharded weights or not, pipeline or not, scale band, precision, GPU
// generation). The interval of a job is [p e^lo, p e^hi] for its point estimate p, with lo and
// hi the weighted split-conformal bounds (ConformalInterval) of the residuals of its regime, or,
// when its regime has too little weight for finite bounds, of the nearest broader regime in the
// fixed hierarchy kRegimeFeatureOrder (the features that change only measured rates are dropped
// first). The point estimate is never moved: the interval says how far the model has been off,
// not what to add. A job outside the validated region (no validated run shares its framework
// family, dense/MoE, sharding, pipeline and scale band) gets the interval of the table's own
// out-of-region runs, and says so: the runs whose region no other source has a run of, i.e. the
// runs that were outside the validated region when their source was left out. Their residuals
// are how far the model has been off on a regime it had never been validated in, the population
// such a job belongs to; the same weighted split-conformal bounds apply. With fewer than the
// minimum of such runs it is the widest interval the table holds, the range of all residuals. Where the job rests on an overlap value its
// framework preset flags low_confidence (core/framework.h), the interval is widened to the step
// times with that mechanism hiding nothing and everything it can.
//
// Memory. The same method on r = ln(measured peak / predicted total) of measured runs (published
// peak-memory figures and our own measurements), by framework family (the stack decides what is
// kept and how the allocator caches): the fit verdict is FITS when the upper end is within the
// capacity, DOES_NOT_FIT when the lower end is above it, TIGHT between. A family with fewer
// measured runs than the minimum has no memory interval: its verdict is the point estimate's with
// the memory model's documented uncertainty (core/memory.h kMemoryUncertainty), and says so.
//
// Pure functions and value types; the table is built from residuals (IntervalTable::Build),
// which `stepcast validate --write-intervals` writes to presets/intervals.yaml and the codec
// reads back (proto/interval_table.h).
#ifndef STEPCAST_CORE_INTERVAL_H_
#define STEPCAST_CORE_INTERVAL_H_

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace stepcast {

struct Job;

// ---- regime features ----

// The kernel and runtime stack a framework preset belongs to.
enum class FrameworkFamily : uint8_t {
  kOther = 0,     // a framework not listed in FrameworkRegimes()
  kMegatron = 1,  // Megatron-LM, Megatron-Core, NeMo, Megatron-Bridge
  kDeepSpeed = 2, // DeepSpeed ZeRO (Megatron-DeepSpeed)
  kPytorch = 3,   // PyTorch-native FSDP stacks: llm-foundry/Composer, torchtitan
  kJax = 4,       // JAX/XLA: MaxText, Paxml
};
// The framework's release era: its kernels (attention, fused ops, fp8 recipes) changed in 2024.
enum class FrameworkEra : uint8_t { kBefore2024 = 0, kFrom2024 = 1 };
enum class PrecisionClass : uint8_t { kOther = 0, k16Bit = 1, kFp8 = 2 };  // of the GEMMs
enum class GpuGeneration : uint8_t { kOther = 0, kAmpere = 1, kHopper = 2, kBlackwell = 3 };
inline constexpr int kGpuGenerations = 4;
// GPU count: one 8-GPU node, up to 8 nodes, up to 64 nodes, more (steps of 8x).
enum class ScaleBand : uint8_t { k1To8 = 0, k9To64 = 1, k65To512 = 2, kAbove512 = 3 };

// A preset name and the family and era it belongs to, with the preset's own version text as
// the source.
struct FrameworkRegime {
  const char* name;
  FrameworkFamily family;
  FrameworkEra era;
  const char* source;
};
// "Megatron-family", "PyTorch-FSDP-family", "JAX/XLA", "DeepSpeed", "unlisted-framework".
const char* FrameworkFamilyName(FrameworkFamily f);
// Every framework preset of presets/frameworks (tests/interval_test.cc checks that the catalog
// has no preset missing here).
const std::vector<FrameworkRegime>& FrameworkRegimes();

// The regime of a job, read from the job alone.
struct Regime {
  FrameworkFamily family = FrameworkFamily::kOther;
  FrameworkEra era = FrameworkEra::kFrom2024;
  bool moe = false;
  bool sharded_weights = false;  // ZeRO-3 / FSDP (weights sharded over data parallelism)
  bool pipeline = false;         // PP > 1
  ScaleBand scale = ScaleBand::k1To8;
  PrecisionClass precision = PrecisionClass::k16Bit;
  GpuGeneration gpu = GpuGeneration::kOther;

  // 13 bits, the features in kRegimeFeatureOrder from the high bits down, so that a level's
  // regime is a mask of the key.
  uint32_t Key() const;
  static Regime FromKey(uint32_t key);
  bool operator==(const Regime& o) const { return Key() == o.Key(); }
};
inline constexpr uint32_t kRegimeKeyCount = 1u << 13;

// The regime of a job: family and era from its framework's name (FrameworkRegimes; any other
// name: kOther), MoE from the model, sharded weights for ZeRO-3, pipeline for PP > 1, the scale
// band of its GPU count, the precision of its GEMMs, the GPU generation from the hardware's
// architecture ("ampere", "hopper", "blackwell"; anything else: kOther).
Regime RegimeOf(const Job& job);
// Feature values from the job's parts (RegimeOf uses these).
FrameworkRegime FrameworkRegimeOf(const std::string& framework_name);
ScaleBand ScaleBandOf(int64_t gpu_count);
GpuGeneration GpuGenerationOf(const std::string& architecture);

// The hierarchy: level 0 keeps all eight features; level L drops the last L of this order; level
// 8 is every run. Dropped first: the GPU generation and the precision (the rate profile measures
// both: GEMM, HBM and collective rates per GPU and dtype), then the framework's era (its kernels:
// rates again); kept longer: the scale band, pipeline, sharding, dense/MoE and the framework
// family (the mechanisms the model takes from the framework's source: overlap, FSDP gathers,
// pipeline bubble, MoE dispatch, the network at scale).
inline constexpr int kRegimeFeatures = 8;
inline constexpr int kRegimeLevels = kRegimeFeatures + 1;
// Level of the validated region: a job is inside it when some validated run shares its family,
// dense/MoE, sharding, pipeline and scale band (the mechanism features).
inline constexpr int kValidatedRegionLevel = 3;
uint32_t RegimeLevelMask(int level);
// "Megatron-family 2024+ / dense / replicated weights / PP / 65-512 GPUs / bf16-fp16 / Hopper" for
// the features kept at `level` ("every validated run" at level 8).
std::string RegimeText(const Regime& r, int level);
// The same as a phrase after "no published run of " ("Megatron-family dense ZeRO-3/FSDP
// without PP on more than 512 GPUs") for the first `features` features of the order.
std::string RegimePhrase(const Regime& r, int features);

// ---- the method ----

inline constexpr double kIntervalCoverage = 0.8;

struct WeightedValue {
  double value = 0;
  double weight = 1;
};
struct ConformalBounds {
  bool finite = false;  // false: too little weight (below MinimumWeight)
  double lo = 0, hi = 0;
  double weight = 0;    // total weight of the values
};
// The weighted split-conformal interval of coverage c for a new value exchangeable with the given
// ones (Vovk et al. 2005; Lei et al. 2018 "Distribution-free predictive inference", JASA, Sec.
// 2.2; weighted as in Tibshirani et al. 2019, NeurIPS, Sec. 2): with total weight W, the test
// point counts as one more unit at +infinity (upper end) or -infinity (lower end), so
//   hi = the smallest value v with (weight of values <= v) >= (1+c)/2 (W + 1),
//   lo = the largest value v with (weight of values >= v) >= (1+c)/2 (W + 1);
// finite only when W >= MinimumWeight(c). With unit weights this is the
// ceil((1+c)/2 (n+1))-th smallest value and its mirror (n = 19, c = 0.8: the 18th and the 2nd).
// Weights must be > 0; values finite.
ConformalBounds ConformalInterval(std::vector<WeightedValue> values, double coverage = kIntervalCoverage);
// The smallest total weight with finite bounds: (1+c)/2 (W+1) <= W, i.e. W >= (1+c)/(1-c); 9 for
// c = 0.8. This is the documented minimum count of a regime (a weak-scaling series weighs 1).
double MinimumWeight(double coverage = kIntervalCoverage);

// ---- the table ----

// One validated run's step-time residual.
struct ResidualRun {
  std::string id;          // "row 112"
  std::string source;      // the run's source id: only counted (distinct sources per regime)
  std::string experiment;  // weak-scaling series id: the rows sharing it weigh 1 together
  Regime regime;
  double predicted_s = 0, measured_s = 0;  // > 0
};
// One measured run's memory residual.
struct MemoryResidualRun {
  std::string id, source, experiment;
  FrameworkFamily family = FrameworkFamily::kOther;  // of the run's job: memory regimes are families
  double predicted_bytes = 0, measured_bytes = 0;    // > 0
};

enum class MemoryVerdict : uint8_t { kFits = 0, kTight = 1, kDoesNotFit = 2 };
const char* MemoryVerdictName(MemoryVerdict v);  // "fits", "TIGHT", "does not fit"

class IntervalTable {
 public:
  // One regime at one level with at least one run.
  struct Node {
    int level = 0;
    uint32_t key = 0;      // masked with RegimeLevelMask(level)
    ConformalBounds bounds;  // of ln(measured / predicted); finite iff experiments >= MinimumWeight
    double experiments = 0;  // total weight
    int rows = 0, sources = 0;
  };
  // How a regime resolves (precomputed for every key).
  struct Resolution {
    int16_t node = -1;         // the node whose bounds give the interval; -1: outside_bounds or the widest
    int8_t level = -1;         // its level; -1: outside_bounds or the widest
    bool validated = false;    // inside the validated region
    int8_t unvalidated_prefix = 0;  // features of the shortest order prefix with no run (0 when validated)
    float region_experiments = 0;   // weight of its validated-region regime (level kValidatedRegionLevel)
    double low_ratio = 1, high_ratio = 1;  // e^lo, e^hi
  };

  // Builds the table: every run weighs 1 / (runs of its experiment); nodes at every level;
  // the resolution of every key. Runs with non-positive or non-finite times are ignored.
  static IntervalTable Build(std::vector<ResidualRun> step, std::vector<MemoryResidualRun> memory,
                             double coverage = kIntervalCoverage);

  double coverage() const { return coverage_; }
  const std::vector<ResidualRun>& step_runs() const { return step_; }
  const std::vector<MemoryResidualRun>& memory_runs() const { return memory_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Node* FindNode(int level, const Regime& r) const;
  const Resolution& Resolve(const Regime& r) const { return resolution_[r.Key()]; }
  // The resolution of a job outside the validated region whatever its regime (a hybrid Mamba-2
  // model: no published hybrid run is in the table): the out-of-region runs' bounds, else the
  // widest.
  const Resolution& OutsideRegion() const { return outside_resolution_; }
  // The range of every residual: the widest interval (ln ratios); both 0 without runs.
  double widest_lo() const { return widest_lo_; }
  double widest_hi() const { return widest_hi_; }
  // The bounds (ln ratios) of the out-of-region runs (the runs no other source shares the
  // validated-region regime of), their rows and sources; finite iff their weight reaches the
  // minimum. The interval of every job outside the validated region when finite.
  const ConformalBounds& outside_bounds() const { return outside_bounds_; }
  int outside_rows() const { return outside_rows_; }
  int outside_sources() const { return outside_sources_; }
  // The memory bounds (ln ratios) of a framework family's measured runs, their weight, and rows.
  const ConformalBounds& memory_bounds(FrameworkFamily f) const { return memory_bounds_[static_cast<int>(f)]; }
  int memory_rows(FrameworkFamily f) const { return memory_rows_[static_cast<int>(f)]; }
  // The validated runs of one GPU generation, whatever their other features: how many (rows) and
  // the median of measured / predicted over them (> 1: the model predicted them too fast; the
  // predictions are the residuals', i.e. leave-one-source-out in the shipped table). The
  // interval notes print it where the interval does not condition on the GPU (its level dropped
  // the feature), so a job on a generation the model leans on says so.
  struct GenerationLean {
    int rows = 0;
    double median_ratio = 1;
  };
  const GenerationLean& generation_lean(GpuGeneration g) const { return generation_lean_[static_cast<int>(g)]; }

 private:
  // outside_bounds_ and its counts from step_: the runs whose validated-region key has one source
  // in `region_sources`, weighted 1 / (runs of their experiment).
  void BuildOutsideBounds(const std::map<uint32_t, std::set<std::string>>& region_sources,
                          const std::map<std::string, int>& per_experiment);

  double coverage_ = kIntervalCoverage;
  std::vector<ResidualRun> step_;
  std::vector<MemoryResidualRun> memory_;
  std::vector<Node> nodes_;  // sorted by (level, key)
  std::vector<Resolution> resolution_;
  Resolution outside_resolution_;
  double widest_lo_ = 0, widest_hi_ = 0;
  ConformalBounds outside_bounds_;
  int outside_rows_ = 0, outside_sources_ = 0;
  std::array<ConformalBounds, 5> memory_bounds_{};  // by FrameworkFamily
  std::array<int, 5> memory_rows_{};
  std::array<GenerationLean, kGpuGenerations> generation_lean_{};  // by GpuGeneration
};

// Overlap mechanisms (core/framework.h OverlapModel) as bits, for the low-confidence note.
enum OverlapMechanismBit : uint32_t {
  kMechTpComm = 1u << 0,
  kMechTpCommBackward = 1u << 1,
  kMechDpGradReduce = 1u << 2,
  kMechDpParamGather = 1u << 3,
  kMechFsdpParamGather = 1u << 4,
  kMechPpP2p = 1u << 5,
  kMechCpRing = 1u << 6,
  kMechEpAllToAll = 1u << 7,
};
// "tp_comm, pp_p2p" for the bits set.
std::string MechanismNames(uint32_t bits);

// The step-time interval of one prediction.
struct StepTimeInterval {
  bool available = false;  // false: no interval table (or an assumed-MFU estimate)
  double low_s = 0, high_s = 0;
  double coverage = 0;
  Regime regime;            // the job's
  int level = -1;           // hierarchy level of the residuals used; -1: outside the region
  bool from_outside_runs = false;  // level -1: the out-of-region runs' bounds (else the widest)
  double experiments = 0;   // validated runs (experiments) behind the interval
  int rows = 0, sources = 0;
  // Validated runs sharing the job's framework family, dense/MoE, sharding, pipeline and scale
  // band (its regime at kValidatedRegionLevel: the mechanisms; the finer features refine it).
  double region_experiments = 0;
  bool validated = false;         // region_experiments > 0: inside the validated region
  bool hybrid = false;            // a hybrid Mamba-2 model: outside the validated region whatever its regime
  bool below_minimum = false;     // 0 < region_experiments < the minimum: a broader regime's residuals
  int unvalidated_prefix = 0;     // RegimePhrase(regime, unvalidated_prefix) has no validated run
  uint32_t low_confidence = 0;    // OverlapMechanismBit of the low-confidence values it rests on
  double minimum_experiments = 0; // MinimumWeight(coverage)
  // Where the interval does not condition on the GPU (level >= 1, or from outside the region) and
  // the table holds at least kGenerationLeanMinimumRows runs of the job's GPU generation: their
  // count and median measured / predicted (IntervalTable::generation_lean); 0 rows otherwise.
  int gpu_generation_rows = 0;
  double gpu_generation_median_ratio = 1;
  // The job's rate profile gives an upper bound of its part's compute rates
  // (RateProfile::compute_rate_low_fraction > 0, e.g. a power-limited variant given the full-power
  // part's rates): that fraction, its source, and the step's ratio at those lowest rates
  // (EstimateStepTime(ComputeRatesScaled(job, fraction)): the rates not measured on the part
  // scaled) to the point estimate, by which high_s was widened. 0 / 1: no bound, or every rate
  // measured (the step does not move).
  double compute_rate_low_fraction = 0;
  std::string compute_rate_low_source;
  double compute_rate_low_step_ratio = 1;
  // A hybrid Mamba-2 model: the step with its SSD scan at kSsdTritonShare of the point rate
  // (core/step_time.h: the whole Triton scan's measured rate over its chunk-scan kernel's) over the point
  // estimate, by which high_s was widened; 1: no Mamba layer, or the profile gives the scan's rate.
  double ssd_slow_step_ratio = 1;
};
// Fewest runs of a GPU generation whose median the notes report (a median of one or two runs says
// little).
inline constexpr int kGenerationLeanMinimumRows = 3;
// The interval of a step time `step_time_s` predicted for `job`: the resolution of RegimeOf(job)
// applied to the point estimate, widened for the low-confidence overlap values the job uses
// (EstimateStepTime with each such mechanism hiding nothing, and hiding all it can; mechanisms
// the profile measured are not low-confidence), and, where the profile's compute rates are only
// an upper bound for the part (RateProfile::compute_rate_low_fraction), its upper end by the
// step at the lowest rates (ComputeRatesScaled).
StepTimeInterval EstimateStepTimeInterval(const Job& job, double step_time_s, const IntervalTable& table);
// The same with the job's regime already read (RegimeOf(job)).
StepTimeInterval EstimateStepTimeInterval(const Job& job, double step_time_s, const IntervalTable& table,
                                          const Regime& regime);
// `job` with every GEMM and attention rate its profile and framework give that was not measured on
// the part (profile GEMM points and attention rate whose origin is not kMeasured / kImported, and
// the framework's attention-kernel table) multiplied by `scale` in (0, 1]: the same part at a lower
// sustained clock. Peaks, HBM and links unchanged.
Job ComputeRatesScaled(const Job& job, double scale);
// "80% interval 13.1-15.2 s" and where it comes from, in one sentence.
std::string IntervalSummary(const StepTimeInterval& i);
// The notes that go with it (outside the validated region, below the minimum, low-confidence
// values); empty when none.
std::vector<std::string> IntervalNotes(const StepTimeInterval& i);

// The memory interval of one prediction and the fit verdict.
struct MemoryInterval {
  // false: no table, or fewer measured runs of the job's framework family than the minimum; the
  // verdict then uses the point estimate and its documented uncertainty.
  bool available = false;
  double low_bytes = 0, high_bytes = 0;
  double coverage = 0;
  double experiments = 0;  // measured runs (experiments) of the family behind it
  int rows = 0;
  FrameworkFamily family = FrameworkFamily::kOther;
  MemoryVerdict verdict = MemoryVerdict::kFits;
};
// From the predicted total, the capacity and the job's framework family. Without an interval the
// verdict is the point estimate's: fits when total <= capacity, TIGHT when over by no more than
// `fallback_uncertainty` (kMemoryUncertainty), else does not fit.
MemoryInterval EstimateMemoryInterval(double total_bytes, double capacity_bytes, FrameworkFamily family,
                                      const IntervalTable* table, double fallback_uncertainty);
// "80% interval 52.1-79.3 GiB from 14 measured PyTorch-FSDP-family runs: TIGHT", or the fallback's
// sentence.
std::string MemoryIntervalSummary(const MemoryInterval& m, double capacity_bytes);

}  // namespace stepcast

#endif  // STEPCAST_CORE_INTERVAL_H_
