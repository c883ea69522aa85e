#include "proto/interval_table.h"

#include <cctype>
#include <cmath>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/catalog.h"
#include "proto/codec.h"

namespace stepcast {
namespace {

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// A YAML double-quoted scalar.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string ShortEnum(const google::protobuf::EnumDescriptor* e, int value) {
  const google::protobuf::EnumValueDescriptor* v = e->FindValueByNumber(value);
  std::string name = v != nullptr ? v->name() : "";
  // The enum's prefix: its zero value's name without UNSPECIFIED (FRAMEWORK_FAMILY_).
  std::string prefix = e->value(0)->name();
  if (prefix.size() > 11) prefix.resize(prefix.size() - 11);
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

std::string G8(double x) { return absl::StrFormat("%.8g", x); }

}  // namespace

v1::RegimeSpec RegimeToProto(const Regime& r) {
  v1::RegimeSpec out;
  out.set_family(static_cast<v1::FrameworkFamily>(static_cast<int>(r.family)));
  out.set_era(r.era == FrameworkEra::kBefore2024 ? v1::FRAMEWORK_ERA_BEFORE_2024 : v1::FRAMEWORK_ERA_FROM_2024);
  out.set_moe(r.moe);
  out.set_sharded_weights(r.sharded_weights);
  out.set_pipeline(r.pipeline);
  out.set_scale(static_cast<v1::ScaleBand>(static_cast<int>(r.scale) + 1));
  out.set_precision(r.precision == PrecisionClass::k16Bit ? v1::PRECISION_CLASS_BF16_FP16
                    : r.precision == PrecisionClass::kFp8 ? v1::PRECISION_CLASS_FP8
                                                          : v1::PRECISION_CLASS_OTHER);
  out.set_gpu(static_cast<v1::GpuGeneration>(static_cast<int>(r.gpu)));
  return out;
}

absl::StatusOr<Regime> RegimeFromProto(const v1::RegimeSpec& s, const std::string& path) {
  Regime r;
  if (s.family() < 0 || s.family() > v1::FRAMEWORK_FAMILY_JAX) return Bad(path + ".family", "unknown value");
  r.family = static_cast<FrameworkFamily>(s.family());
  switch (s.era()) {
    case v1::FRAMEWORK_ERA_BEFORE_2024: r.era = FrameworkEra::kBefore2024; break;
    case v1::FRAMEWORK_ERA_FROM_2024: r.era = FrameworkEra::kFrom2024; break;
    default: return Bad(path + ".era", "required: before_2024 or from_2024");
  }
  r.moe = s.moe();
  r.sharded_weights = s.sharded_weights();
  r.pipeline = s.pipeline();
  if (s.scale() < v1::SCALE_BAND_UP_TO_8 || s.scale() > v1::SCALE_BAND_ABOVE_512) {
    return Bad(path + ".scale", "required: up_to_8, up_to_64, up_to_512 or above_512");
  }
  r.scale = static_cast<ScaleBand>(s.scale() - 1);
  switch (s.precision()) {
    case v1::PRECISION_CLASS_BF16_FP16: r.precision = PrecisionClass::k16Bit; break;
    case v1::PRECISION_CLASS_FP8: r.precision = PrecisionClass::kFp8; break;
    case v1::PRECISION_CLASS_OTHER: r.precision = PrecisionClass::kOther; break;
    default: return Bad(path + ".precision", "required: bf16_fp16, fp8 or other");
  }
  if (s.gpu() < 0 || s.gpu() > v1::GPU_GENERATION_BLACKWELL) return Bad(path + ".gpu", "unknown value");
  r.gpu = static_cast<GpuGeneration>(s.gpu());
  return r;
}

absl::StatusOr<IntervalTable> IntervalTableFromSpec(const v1::IntervalTableSpec& spec) {
  const double c = spec.coverage() == 0 ? kIntervalCoverage : spec.coverage();
  if (!(c > 0 && c < 1)) return Bad("coverage", absl::StrCat(spec.coverage(), " must be in (0, 1)"));
  auto positive = [](double x) { return std::isfinite(x) && x > 0; };
  std::vector<ResidualRun> step;
  for (int i = 0; i < spec.step_time_size(); ++i) {
    const v1::StepTimeResidual& s = spec.step_time(i);
    const std::string path = absl::StrCat("step_time[", i, "]");
    if (s.id().empty()) return Bad(path + ".id", "required");
    if (s.experiment().empty()) return Bad(path + ".experiment", "required");
    if (!positive(s.predicted_s())) return Bad(path + ".predicted_s", "must be > 0");
    if (!positive(s.measured_s())) return Bad(path + ".measured_s", "must be > 0");
    absl::StatusOr<Regime> r = RegimeFromProto(s.regime(), path + ".regime");
    if (!r.ok()) return r.status();
    step.push_back({s.id(), s.source(), s.experiment(), *r, s.predicted_s(), s.measured_s()});
  }
  std::vector<MemoryResidualRun> memory;
  const double gib = 1024.0 * 1024 * 1024;
  for (int i = 0; i < spec.memory_size(); ++i) {
    const v1::MemoryResidual& m = spec.memory(i);
    const std::string path = absl::StrCat("memory[", i, "]");
    if (m.id().empty()) return Bad(path + ".id", "required");
    if (m.experiment().empty()) return Bad(path + ".experiment", "required");
    if (!positive(m.predicted_gib())) return Bad(path + ".predicted_gib", "must be > 0");
    if (!positive(m.measured_gib())) return Bad(path + ".measured_gib", "must be > 0");
    if (m.family() < 0 || m.family() > v1::FRAMEWORK_FAMILY_JAX) return Bad(path + ".family", "unknown value");
    memory.push_back({m.id(), m.source(), m.experiment(), static_cast<FrameworkFamily>(m.family()),
                      m.predicted_gib() * gib, m.measured_gib() * gib});
  }
  return IntervalTable::Build(std::move(step), std::move(memory), c);
}

absl::StatusOr<IntervalTable> ParseIntervalTable(const std::string& text, const std::string& origin) {
  v1::IntervalTableSpec spec;
  if (absl::Status s = ParseMessage(text, SpecFormat::kYaml, origin, &spec); !s.ok()) return s;
  absl::StatusOr<IntervalTable> t = IntervalTableFromSpec(spec);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", t.status().message()));
  return t;
}

v1::IntervalTableSpec IntervalTableToSpec(const IntervalTable& table, const std::string& generated_by) {
  v1::IntervalTableSpec out;
  out.set_generated_by(generated_by);
  out.set_coverage(table.coverage());
  for (const ResidualRun& r : table.step_runs()) {
    v1::StepTimeResidual* s = out.add_step_time();
    s->set_id(r.id);
    s->set_source(r.source);
    s->set_experiment(r.experiment);
    *s->mutable_regime() = RegimeToProto(r.regime);
    s->set_predicted_s(r.predicted_s);
    s->set_measured_s(r.measured_s);
  }
  const double gib = 1024.0 * 1024 * 1024;
  for (const MemoryResidualRun& m : table.memory_runs()) {
    v1::MemoryResidual* x = out.add_memory();
    x->set_id(m.id);
    x->set_source(m.source);
    x->set_experiment(m.experiment);
    x->set_family(static_cast<v1::FrameworkFamily>(static_cast<int>(m.family)));
    x->set_predicted_gib(m.predicted_bytes / gib);
    x->set_measured_gib(m.measured_bytes / gib);
  }
  return out;
}

std::string IntervalTableYaml(const v1::IntervalTableSpec& spec) {
  std::string o =
      "# The residuals behind stepcast's prediction intervals (core/interval.h; docs/VALIDATION.md\n"
      "# \"Intervals\"). Written by the command in generated_by from the validation set; do not edit:\n"
      "# re-run it after changing the model (tests/interval_test.cc fails while this file is stale).\n"
      "#\n"
      "# step_time: each published run's leave-one-source-out prediction (its source's informed\n"
      "#   choices switched off) and its measured iteration time; the residual is ln(measured /\n"
      "#   predicted); regime: the job's features; experiment: a weak-scaling series, weighing 1.\n"
      "# memory: each measured peak-memory run (tests/data/validation/memory_runs.yaml, each with its\n"
      "#   source) against the memory model's per-GPU total, in GiB.\n";
  absl::StrAppend(&o, "generated_by: ", Quote(spec.generated_by()), "\n");
  absl::StrAppend(&o, "coverage: ", G8(spec.coverage()), "\n");
  o += "step_time:\n";
  const auto* fam = v1::FrameworkFamily_descriptor();
  for (const v1::StepTimeResidual& s : spec.step_time()) {
    const v1::RegimeSpec& r = s.regime();
    std::string regime;
    if (r.family() != 0) absl::StrAppend(&regime, "family: ", ShortEnum(fam, r.family()), ", ");
    absl::StrAppend(&regime, "era: ", ShortEnum(v1::FrameworkEra_descriptor(), r.era()),
                    ", moe: ", r.moe() ? "true" : "false", ", sharded_weights: ", r.sharded_weights() ? "true" : "false",
                    ", pipeline: ", r.pipeline() ? "true" : "false",
                    ", scale: ", ShortEnum(v1::ScaleBand_descriptor(), r.scale()),
                    ", precision: ", ShortEnum(v1::PrecisionClass_descriptor(), r.precision()));
    if (r.gpu() != 0) absl::StrAppend(&regime, ", gpu: ", ShortEnum(v1::GpuGeneration_descriptor(), r.gpu()));
    absl::StrAppend(&o, "  - {id: ", Quote(s.id()), ", source: ", Quote(s.source()), ", predicted_s: ", G8(s.predicted_s()),
                    ", measured_s: ", G8(s.measured_s()), ",\n     regime: {", regime, "},\n     experiment: ",
                    Quote(s.experiment()), "}\n");
  }
  o += spec.memory_size() > 0 ? "memory:\n" : "memory: []\n";
  for (const v1::MemoryResidual& m : spec.memory()) {
    std::string family;
    if (m.family() != 0) family = absl::StrCat(", family: ", ShortEnum(fam, m.family()));
    absl::StrAppend(&o, "  - {id: ", Quote(m.id()), ", source: ", Quote(m.source()), family,
                    ", predicted_gib: ", G8(m.predicted_gib()), ", measured_gib: ", G8(m.measured_gib()),
                    ",\n     experiment: ", Quote(m.experiment()), "}\n");
  }
  return o;
}

absl::StatusOr<std::shared_ptr<const IntervalTable>> LoadBuiltinIntervalTable() {
  for (const EmbeddedPreset& p : EmbeddedPresets()) {
    if (std::string(p.path) != kIntervalTablePreset) continue;
    absl::StatusOr<IntervalTable> t = ParseIntervalTable(p.text, std::string("presets/") + kIntervalTablePreset);
    if (!t.ok()) return t.status();
    return std::make_shared<const IntervalTable>(*std::move(t));
  }
  return std::shared_ptr<const IntervalTable>();
}

std::shared_ptr<const IntervalTable> BuiltinIntervalTable() {
  static std::once_flag once;
  static std::shared_ptr<const IntervalTable>* table = nullptr;
  std::call_once(once, [] {
    absl::StatusOr<std::shared_ptr<const IntervalTable>> t = LoadBuiltinIntervalTable();
    table = new std::shared_ptr<const IntervalTable>(t.ok() ? *t : nullptr);
  });
  return *table;
}

v1::MemoryVerdict MemoryVerdictToProto(MemoryVerdict v) {
  switch (v) {
    case MemoryVerdict::kFits: return v1::MEMORY_VERDICT_FITS;
    case MemoryVerdict::kTight: return v1::MEMORY_VERDICT_TIGHT;
    case MemoryVerdict::kDoesNotFit: return v1::MEMORY_VERDICT_DOES_NOT_FIT;
  }
  return v1::MEMORY_VERDICT_UNSPECIFIED;
}

v1::StepTimeInterval StepTimeIntervalToProto(const StepTimeInterval& i) {
  v1::StepTimeInterval out;
  StepTimeIntervalToProto(i, &out);
  return out;
}

void StepTimeIntervalToProto(const StepTimeInterval& i, v1::StepTimeInterval* out_ptr) {
  v1::StepTimeInterval& out = *out_ptr;
  out.set_low_s(i.low_s);
  out.set_high_s(i.high_s);
  out.set_coverage(i.coverage);
  out.set_regime(RegimeText(i.regime, 0));
  out.set_derived_from(i.validated && i.level >= 0 ? RegimeText(i.regime, i.level)
                       : i.from_outside_runs     ? "the runs outside the validated region"
                                                 : "the widest interval");
  out.set_validated_runs(i.experiments);
  out.set_validated_rows(i.rows);
  out.set_sources(i.sources);
  out.set_region_runs(i.region_experiments);
  out.set_minimum_runs(i.minimum_experiments);
  out.set_validated(i.validated);
  out.set_below_minimum(i.below_minimum);
  for (uint32_t bit = 1; bit <= kMechEpAllToAll; bit <<= 1) {
    if (i.low_confidence & bit) out.add_low_confidence(MechanismNames(bit));
  }
  for (std::string& n : IntervalNotes(i)) out.add_notes(std::move(n));
  out.set_summary(IntervalSummary(i));
  if (i.gpu_generation_rows > 0) {
    out.set_gpu_generation_rows(i.gpu_generation_rows);
    out.set_gpu_generation_median_ratio(i.gpu_generation_median_ratio);
  }
  if (i.ssd_slow_step_ratio > 1) out.set_ssd_slow_step_ratio(i.ssd_slow_step_ratio);
  if (i.compute_rate_low_fraction > 0) {
    out.set_compute_rate_low_fraction(i.compute_rate_low_fraction);
    out.set_compute_rate_low_source(i.compute_rate_low_source);
    out.set_compute_rate_low_step_ratio(i.compute_rate_low_step_ratio);
  }
}

v1::MemoryInterval MemoryIntervalToProto(const MemoryInterval& m, double capacity_bytes) {
  v1::MemoryInterval out;
  MemoryIntervalToProto(m, capacity_bytes, &out);
  return out;
}

void MemoryIntervalToProto(const MemoryInterval& m, double capacity_bytes, v1::MemoryInterval* out_ptr) {
  v1::MemoryInterval& out = *out_ptr;
  out.set_low_bytes(m.low_bytes);
  out.set_high_bytes(m.high_bytes);
  out.set_coverage(m.coverage);
  out.set_validated_runs(m.experiments);
  out.set_validated_rows(m.rows);
  out.set_verdict(MemoryVerdictToProto(m.verdict));
  out.set_available(m.available);
  out.set_summary(MemoryIntervalSummary(m, capacity_bytes));
}

absl::StatusOr<v1::MeasuredMemoryRuns> LoadMeasuredMemoryRuns(const std::string& path) {
  v1::MeasuredMemoryRuns runs;
  if (absl::Status s = ParseMessageFile(path, &runs); !s.ok()) return s;
  for (int i = 0; i < runs.runs_size(); ++i) {
    const v1::MeasuredMemoryRun& r = runs.runs(i);
    const std::string at = absl::StrCat(path, ": runs[", i, "]");
    if (r.id().empty()) return Bad(at + ".id", "required");
    if (r.source().empty()) return Bad(at + ".source", "required: where the figure comes from");
    if (!(std::isfinite(r.measured_peak_gib()) && r.measured_peak_gib() > 0)) {
      return Bad(at + ".measured_peak_gib", "must be > 0");
    }
  }
  return runs;
}

}  // namespace stepcast
