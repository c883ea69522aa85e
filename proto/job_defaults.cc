#include "proto/job_defaults.h"

#include <algorithm>
#include <atomic>
#include <cctype>

#include "absl/container/inlined_vector.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "proto/catalog.h"
#include "proto/codec.h"
#include "proto/published_runs.h"

namespace stepcast {

namespace pb = google::protobuf;

v1::FrameworkSpec OverlayFramework(const v1::FrameworkSpec& base, const v1::FrameworkSpec& child) {
  v1::FrameworkSpec out = base;
  const pb::Reflection* r = child.GetReflection();
  const pb::Descriptor* d = child.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (r->HasField(child, f)) out.GetReflection()->MutableMessage(&out, f)->CopyFrom(r->GetMessage(child, f));
    } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) {
      if (!r->GetString(child, f).empty()) out.GetReflection()->SetString(&out, f, r->GetString(child, f));
    } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT32) {
      if (r->GetInt32(child, f) != 0) out.GetReflection()->SetInt32(&out, f, r->GetInt32(child, f));
    } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT64) {
      if (r->GetInt64(child, f) != 0) out.GetReflection()->SetInt64(&out, f, r->GetInt64(child, f));
    } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_BOOL) {
      if (r->GetBool(child, f)) out.GetReflection()->SetBool(&out, f, true);
    }
  }
  for (const v1::NamedSetting& ns : child.settings()) *out.add_settings() = ns;
  // The child's recipes first: they are more specific than the base framework's.
  {
    google::protobuf::RepeatedPtrField<v1::Recipe> recipes = child.recipes();
    for (const v1::Recipe& r : out.recipes()) *recipes.Add() = r;
    *out.mutable_recipes() = std::move(recipes);
  }
  for (const v1::AttentionKernel& k : child.alternative_attention()) *out.add_alternative_attention() = k;
  for (const v1::FrameworkDefault& dflt : child.defaults()) {
    bool replaced = false;
    for (v1::FrameworkDefault& o : *out.mutable_defaults()) {
      if (o.field() == dflt.field() && std::equal(o.when().begin(), o.when().end(), dflt.when().begin(), dflt.when().end())) {
        o = dflt;
        replaced = true;
      }
    }
    if (!replaced) *out.add_defaults() = dflt;
  }
  for (const std::string& s : child.sources()) out.add_sources(s);
  *out.mutable_aliases() = child.aliases();
  *out.mutable_assumptions() = child.assumptions();  // like aliases: the preset's own
  *out.mutable_attention_limits() = child.attention_limits();  // the preset's own (its releases' libraries)
  out.set_base("");
  return out;
}

namespace {

// The descriptor chain of `path` in JobSpec, or an error naming the first unknown part.
absl::StatusOr<std::vector<const pb::FieldDescriptor*>> FieldChain(const std::string& path) {
  std::vector<const pb::FieldDescriptor*> chain;
  const pb::Descriptor* d = v1::JobSpec::descriptor();
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (d == nullptr) return absl::InvalidArgumentError(absl::StrCat(path, ": '", part, "' is inside a non-message field"));
    const pb::FieldDescriptor* f = d->FindFieldByName(std::string(part));
    if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat(path, ": no job field '", part, "'"));
    chain.push_back(f);
    d = f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE ? f->message_type() : nullptr;
  }
  if (chain.empty()) return absl::InvalidArgumentError("empty field path");
  return chain;
}

// JobFieldIsSet over a descriptor chain from FieldChain. `reflections` (when not null) holds the
// Reflection of each level's message type, so that no message is asked for its own (a virtual
// call and a descriptor-table check each time). An unset sub-message reads as its default
// instance, in which nothing is set (JobSpec is proto3: no field has a non-zero default), so the
// sub-message's own presence need not be checked first.
bool FieldIsSet(const pb::Message& root, const std::vector<const pb::FieldDescriptor*>& chain,
                const std::vector<const pb::Reflection*>* reflections) {
  const pb::Message* msg = &root;
  for (size_t i = 0; i < chain.size(); ++i) {
    const pb::FieldDescriptor* f = chain[i];
    const pb::Reflection* r = reflections != nullptr ? (*reflections)[i] : msg->GetReflection();
    if (f->is_repeated()) return r->FieldSize(*msg, f) > 0;
    if (i + 1 < chain.size()) {
      msg = &r->GetMessage(*msg, f);
      continue;
    }
    if (f->has_presence()) return r->HasField(*msg, f);
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: return r->GetInt32(*msg, f) != 0;
      case pb::FieldDescriptor::CPPTYPE_INT64: return r->GetInt64(*msg, f) != 0;
      case pb::FieldDescriptor::CPPTYPE_UINT32: return r->GetUInt32(*msg, f) != 0;
      case pb::FieldDescriptor::CPPTYPE_UINT64: return r->GetUInt64(*msg, f) != 0;
      case pb::FieldDescriptor::CPPTYPE_DOUBLE: return r->GetDouble(*msg, f) != 0;
      case pb::FieldDescriptor::CPPTYPE_FLOAT: return r->GetFloat(*msg, f) != 0;
      case pb::FieldDescriptor::CPPTYPE_BOOL: return r->GetBool(*msg, f);
      case pb::FieldDescriptor::CPPTYPE_ENUM: return r->GetEnumValue(*msg, f) != 0;
      case pb::FieldDescriptor::CPPTYPE_STRING: return !r->GetString(*msg, f).empty();
      case pb::FieldDescriptor::CPPTYPE_MESSAGE: return r->HasField(*msg, f);
    }
  }
  return false;
}

std::string Squash(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

absl::StatusOr<bool> JobFieldIsSet(const v1::JobSpec& spec, const std::string& path) {
  absl::StatusOr<std::vector<const pb::FieldDescriptor*>> chain = FieldChain(path);
  if (!chain.ok()) return chain.status();
  return FieldIsSet(spec, *chain, nullptr);
}

CompiledDefault::CompiledDefault(std::string path, std::string value) : path_(std::move(path)), value_(std::move(value)) {
  absl::StatusOr<std::vector<const pb::FieldDescriptor*>> chain = FieldChain(path_);
  if (!chain.ok()) {
    path_error_ = chain.status();
    return;
  }
  chain_ = *std::move(chain);
  for (const pb::FieldDescriptor* f : chain_) {
    reflections_.push_back(pb::MessageFactory::generated_factory()->GetPrototype(f->containing_type())->GetReflection());
  }
  // The value as a one-field YAML job, read by the job file reader (same names and checks).
  std::string yaml;
  std::string indent;
  for (size_t i = 0; i + 1 < chain_.size(); ++i) {
    absl::StrAppend(&yaml, indent, chain_[i]->name(), ":\n");
    indent += "  ";
  }
  const pb::FieldDescriptor* leaf = chain_.back();
  if (leaf->is_repeated()) {
    std::vector<std::string> items;
    for (absl::string_view p : absl::StrSplit(value_, ',', absl::SkipWhitespace())) {
      items.push_back(std::string(absl::StripAsciiWhitespace(p)));
    }
    absl::StrAppend(&yaml, indent, leaf->name(), ": [", absl::StrJoin(items, ", "), "]\n");
  } else {
    absl::StrAppend(&yaml, indent, leaf->name(), ": ", value_, "\n");
  }
  value_error_ = ParseMessage(yaml, SpecFormat::kYaml, absl::StrCat("default of ", path_), &patch_);
}

absl::StatusOr<bool> CompiledDefault::IsSet(const v1::JobSpec& spec) const {
  if (!path_error_.ok()) return path_error_;
  return FieldIsSet(spec, chain_, &reflections_);
}

absl::Status CompiledDefault::Merge(v1::JobSpec& spec, const std::string& source,
                                    std::vector<AssumedInput>* assumed) const {
  if (!value_error_.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": default '", value_, "' (", source, "): ", value_error_.message()));
  }
  spec.MergeFrom(patch_);
  if (assumed != nullptr) assumed->push_back({path_, value_, source});
  return absl::OkStatus();
}

absl::Status CompiledDefault::Apply(v1::JobSpec& spec, const std::string& source,
                                    std::vector<AssumedInput>* assumed) const {
  absl::StatusOr<bool> set = IsSet(spec);
  if (!set.ok()) return set.status();
  if (*set) return absl::OkStatus();
  return Merge(spec, source, assumed);
}

absl::Status ApplyDefault(v1::JobSpec& spec, const std::string& path, const std::string& value,
                          const std::string& source, std::vector<AssumedInput>* assumed) {
  return CompiledDefault(path, value).Apply(spec, source, assumed);
}

CompiledCondition::CompiledCondition(std::string condition) : condition_(std::move(condition)) {
  const size_t eq = condition_.find('=');
  if (eq == std::string::npos) {
    error_ = absl::InvalidArgumentError(absl::StrCat("when '", condition_, "': expected <field path>=<value>[|<value>]"));
    return;
  }
  const std::string path(absl::StripAsciiWhitespace(absl::string_view(condition_).substr(0, eq)));
  absl::StatusOr<std::vector<const pb::FieldDescriptor*>> chain = FieldChain(path);
  if (!chain.ok()) {
    error_ = chain.status();
    return;
  }
  chain_ = *std::move(chain);
  for (const pb::FieldDescriptor* f : chain_) {
    reflections_.push_back(pb::MessageFactory::generated_factory()->GetPrototype(f->containing_type())->GetReflection());
  }
  for (absl::string_view v : absl::StrSplit(absl::string_view(condition_).substr(eq + 1), '|')) {
    values_.push_back(absl::AsciiStrToLower(absl::StripAsciiWhitespace(v)));
    matches_unset_ |= values_.back() == "unset";
  }
  const auto accepted = [&](const std::string& text) {
    return std::find(values_.begin(), values_.end(), text) != values_.end();
  };
  const pb::FieldDescriptor* f = chain_.back();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      // A number's name is its first value's (as Reflection::GetEnum gives it, aliases too).
      for (int i = 0; i < f->enum_type()->value_count(); ++i) {
        const int number = f->enum_type()->value(i)->number();
        if (std::find(enum_numbers_.begin(), enum_numbers_.end(), number) != enum_numbers_.end()) continue;
        std::string text = absl::AsciiStrToLower(f->enum_type()->FindValueByNumber(number)->name());
        if (const size_t us = text.rfind('_'); us != std::string::npos) text = text.substr(us + 1);
        if (accepted(text)) enum_numbers_.push_back(number);
      }
      break;
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      matches_true_ = accepted("true");
      matches_false_ = accepted("false");
      break;
    case pb::FieldDescriptor::CPPTYPE_INT32:
    case pb::FieldDescriptor::CPPTYPE_INT64:
      for (const std::string& v : values_) {
        int64_t n = 0;
        if (absl::SimpleAtoi(v, &n) && absl::StrCat(n) == v) integers_.push_back(n);  // the text an integer prints as
      }
      break;
    default: break;
  }
}

absl::StatusOr<bool> CompiledCondition::Holds(const v1::JobSpec& spec) const {
  if (!error_.ok()) return error_;
  if (!FieldIsSet(spec, chain_, &reflections_)) return matches_unset_;
  for (const pb::FieldDescriptor* c : chain_) {
    if (c->is_repeated()) return absl::InvalidArgumentError(absl::StrCat("when '", condition_, "': a repeated field"));
  }
  const pb::Message* msg = &spec;
  for (size_t i = 0; i + 1 < chain_.size(); ++i) msg = &reflections_[i]->GetMessage(*msg, chain_[i]);
  const pb::FieldDescriptor* f = chain_.back();
  const pb::Reflection* r = reflections_.back();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      const int number = r->GetEnumValue(*msg, f);
      if (std::find(enum_numbers_.begin(), enum_numbers_.end(), number) != enum_numbers_.end()) return true;
      if (f->enum_type()->FindValueByNumber(number) != nullptr) return false;
      // A number the enum does not define: its name as Reflection gives it.
      std::string text = absl::AsciiStrToLower(r->GetEnum(*msg, f)->name());
      if (const size_t us = text.rfind('_'); us != std::string::npos) text = text.substr(us + 1);
      return std::find(values_.begin(), values_.end(), text) != values_.end();
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL: return r->GetBool(*msg, f) ? matches_true_ : matches_false_;
    case pb::FieldDescriptor::CPPTYPE_STRING: {
      std::string scratch;
      const std::string& text = r->GetStringReference(*msg, f, &scratch);
      for (const std::string& v : values_) {
        if (absl::EqualsIgnoreCase(v, text)) return true;
      }
      return false;
    }
    case pb::FieldDescriptor::CPPTYPE_INT32:
    case pb::FieldDescriptor::CPPTYPE_INT64: {
      const int64_t n = f->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT32 ? r->GetInt32(*msg, f) : r->GetInt64(*msg, f);
      return std::find(integers_.begin(), integers_.end(), n) != integers_.end();
    }
    default: return absl::InvalidArgumentError(absl::StrCat("when '", condition_, "': unsupported field type"));
  }
}

namespace {
// Whether every condition holds; each evaluated (the first error returned), as a default's list is.
absl::StatusOr<bool> AllHold(const std::vector<CompiledCondition>& when, const v1::JobSpec& spec) {
  bool all = true;
  for (const CompiledCondition& c : when) {
    absl::StatusOr<bool> holds = c.Holds(spec);
    if (!holds.ok()) return holds.status();
    all = all && *holds;
  }
  return all;
}

std::vector<CompiledCondition> CompileWhen(const v1::FrameworkDefault& d) {
  std::vector<CompiledCondition> when;
  when.reserve(d.when_size());
  for (const std::string& w : d.when()) when.emplace_back(w);
  return when;
}
}  // namespace

FrameworkDefaults::FrameworkDefaults(const v1::FrameworkSpec& framework) : name_(framework.name()) {
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id.fetch_add(1, std::memory_order_relaxed);
  defaults_.reserve(framework.defaults_size());
  for (const v1::FrameworkDefault& d : framework.defaults()) {
    defaults_.push_back({CompiledDefault(d.field(), d.value()), CompileWhen(d),
                         absl::StrCat("framework ", name_, " default", d.source().empty() ? "" : ": ", d.source())});
  }
  recipes_.reserve(framework.recipes_size());
  for (const v1::Recipe& r : framework.recipes()) {
    Recipe c;
    for (const std::string& m : r.models()) {
      c.models.push_back(m);
      c.squashed_models.push_back(Squash(m));
    }
    c.architectures.assign(r.architectures().begin(), r.architectures().end());
    c.hardware.assign(r.hardware().begin(), r.hardware().end());
    c.precisions.assign(r.precisions().begin(), r.precisions().end());
    for (const v1::FrameworkDefault& d : r.values()) {
      c.sets_gemm |= d.field() == "training.precision.gemm";
      c.values.push_back({CompiledDefault(d.field(), d.value()), CompileWhen(d), d.source().empty() ? r.source() : d.source()});
    }
    if (r.has_sharding()) {
      // The recipe's sharding semantics replace the framework's: converted once with the rest of
      // the framework (its errors name "framework.recipes.sharding").
      c.has_sharding = true;
      c.sharding.spec = r.sharding();
      c.sharding.replaces = r.sharding().ByteSizeLong() > 0;
      if (c.sharding.replaces) {
        v1::FrameworkSpec with = framework;
        *with.mutable_sharding() = r.sharding();
        absl::StatusOr<Framework> fw = FrameworkFromProto(with, "framework.recipes.sharding");
        if (fw.ok()) {
          c.sharding.core = fw->sharding;
        } else {
          c.sharding.core = fw.status();
        }
      }
      c.sharding_source = r.sharding().source().empty() ? r.source() : r.sharding().source();
    }
    recipes_.push_back(std::move(c));
  }
}

const std::vector<FrameworkDefaults::Candidate>& FrameworkDefaults::Candidates(const std::string& model_name) const {
  thread_local struct {
    uint64_t id = 0;
    std::string model_name;
    std::vector<Candidate> candidates;
  } memo;
  if (memo.id == id_ && memo.model_name == model_name) return memo.candidates;
  memo.id = 0;
  memo.candidates.clear();
  const std::string model = Squash(model_name);
  for (uint32_t r = 0; r < recipes_.size() && !model.empty(); ++r) {
    size_t best = 0;
    uint32_t name = 0;
    for (uint32_t i = 0; i < recipes_[r].squashed_models.size(); ++i) {
      const std::string& sq = recipes_[r].squashed_models[i];
      if (!sq.empty() && sq.size() > best && absl::StrContains(model, sq)) {
        best = sq.size();
        name = i;
      }
    }
    if (best > 0) memo.candidates.push_back({r, name, best});
  }
  memo.model_name = model_name;
  memo.id = id_;
  return memo.candidates;
}

absl::Status FrameworkDefaults::ApplyRecipes(v1::JobSpec& spec, const std::string& model_name,
                                             const std::string& architecture, const std::string& gemm,
                                             std::vector<AssumedInput>* assumed, const std::string& hardware,
                                             const RecipeSharding** sharding) const {
  if (recipes_.empty()) return absl::OkStatus();
  // Matching recipes, the most specific model name first ("gpt-oss 120b" before "gpt-oss 20b"
  // cannot both match; "deepseek-v3 16b" before "deepseek-v3"); ties keep file order (a child
  // framework's recipes come before its base's). Values only fill fields still unset.
  struct Match {
    const Recipe* recipe;
    size_t length;
    const std::string* name;
  };
  absl::InlinedVector<Match, 8> matches;
  // A job that states no GEMM dtype runs bf16 (stepcast's fallback) unless a recipe sets the dtype
  // itself: a precision-restricted recipe then applies only when it does.
  for (const Candidate& c : Candidates(model_name)) {
    const Recipe& r = recipes_[c.recipe];
    if (!r.architectures.empty() &&
        std::find(r.architectures.begin(), r.architectures.end(), architecture) == r.architectures.end()) {
      continue;
    }
    if (!r.hardware.empty() && std::find(r.hardware.begin(), r.hardware.end(), hardware) == r.hardware.end()) {
      continue;
    }
    if (!r.precisions.empty()) {
      const std::string& precision = gemm.empty() && !r.sets_gemm ? std::string("bf16") : gemm;
      if (!precision.empty() && std::find(r.precisions.begin(), r.precisions.end(), precision) == r.precisions.end()) {
        continue;
      }
    }
    matches.push_back({&r, c.length, &r.models[c.model]});
  }
  std::stable_sort(matches.begin(), matches.end(), [](const Match& a, const Match& b) { return a.length > b.length; });
  bool sharding_set = false;
  for (const Match& m : matches) {
    if (sharding != nullptr && !sharding_set && m.recipe->has_sharding) {
      *sharding = &m.recipe->sharding;
      sharding_set = true;
      if (assumed != nullptr) {
        assumed->push_back({"framework.sharding", "recipe",
                            absl::StrCat("framework ", name_, " recipe for ", *m.name, ": ", m.recipe->sharding_source)});
      }
    }
    for (const Value& v : m.recipe->values) {
      // `when` conditions read the job's own fields (as the values before this one left them).
      if (!v.when.empty()) {
        absl::StatusOr<bool> holds = AllHold(v.when, spec);
        if (!holds.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("framework ", name_, " recipe ", *m.name, ": ", holds.status().message()));
        }
        if (!*holds) continue;
      }
      const auto source = [&] { return absl::StrCat("framework ", name_, " recipe for ", *m.name, ": ", v.source); };
      if (absl::Status s = v.value.ApplyWith(spec, source, assumed); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("framework ", name_, " recipe ", *m.name, ": ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status FrameworkDefaults::ApplyDefaults(v1::JobSpec& spec, std::vector<AssumedInput>* assumed) const {
  for (const Default& d : defaults_) {
    if (!d.when.empty()) {
      absl::StatusOr<bool> holds = AllHold(d.when, spec);
      if (!holds.ok()) return absl::InvalidArgumentError(absl::StrCat("framework ", name_, ": ", holds.status().message()));
      if (!*holds) continue;
    }
    if (absl::Status s = d.value.Apply(spec, d.source, assumed); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("framework ", name_, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyRecipeDefaults(v1::JobSpec& spec, const v1::FrameworkSpec& framework, const std::string& model_name,
                                 const std::string& architecture, const std::string& gemm,
                                 std::vector<AssumedInput>* assumed, const std::string& hardware,
                                 v1::ShardingModel* sharding) {
  const RecipeSharding* recipe_sharding = nullptr;
  if (absl::Status s = FrameworkDefaults(framework).ApplyRecipes(spec, model_name, architecture, gemm, assumed, hardware,
                                                                 sharding != nullptr ? &recipe_sharding : nullptr);
      !s.ok()) {
    return s;
  }
  if (recipe_sharding != nullptr) *sharding = recipe_sharding->spec;
  return absl::OkStatus();
}

absl::Status ApplyFrameworkDefaults(v1::JobSpec& spec, const v1::FrameworkSpec& framework,
                                    std::vector<AssumedInput>* assumed) {
  return FrameworkDefaults(framework).ApplyDefaults(spec, assumed);
}

ResolvedFramework::ResolvedFramework(v1::FrameworkSpec resolved, const std::string& prefix)
    : spec(std::move(resolved)), defaults(spec) {
  absl::StatusOr<Framework> fw = FrameworkFromProto(spec, prefix);
  if (fw.ok()) {
    core = *std::move(fw);
  } else {
    status = fw.status();
  }
  assumptions.reserve(spec.assumptions_size());
  for (const v1::FrameworkDefault& a : spec.assumptions()) {
    assumptions.push_back({a.field(), a.value(), absl::StrCat("framework ", spec.name(), " assumption: ", a.source())});
  }
  last_release = ParseRelease(spec.last_release());
  folded_from_release = ParseRelease(spec.moe().folded_from_release());
  alternative_attention.reserve(spec.alternative_attention_size());
  for (const v1::AttentionKernel& k : spec.alternative_attention()) {
    alternative_attention.push_back(AttentionKernelFromProto(k, "framework.alternative_attention"));
  }
}

absl::StatusOr<JobFramework> LookupJobFramework(const v1::JobSpec& spec, const Catalog& catalog,
                                                std::vector<AssumedInput>* assumed) {
  switch (spec.framework().source_case()) {
    case v1::FrameworkRef::kPreset: {
      const std::string& text = spec.framework().preset();
      absl::StatusOr<const ResolvedFramework*> f = catalog.LookupFramework(text);
      if (absl::IsNotFound(f.status())) {
        // Not a preset name: the preset the text names (an alias), else the generic preset.
        absl::StatusOr<Catalog::FrameworkMatch> m = catalog.FrameworkForTextOrGeneric(text);
        if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat("framework.preset: ", m.status().message()));
        if (m->fallback && assumed != nullptr) assumed->push_back(Catalog::GenericFrameworkAssumed(text));
        f = catalog.LookupFramework(m->name);
      }
      if (!f.ok()) return absl::InvalidArgumentError(absl::StrCat("framework.preset: ", f.status().message()));
      if (!(*f)->status.ok()) return (*f)->status;
      if (assumed != nullptr) assumed->insert(assumed->end(), (*f)->assumptions.begin(), (*f)->assumptions.end());
      return JobFramework(*f);
    }
    case v1::FrameworkRef::kSpec: {
      const v1::FrameworkSpec& inline_spec = spec.framework().spec();
      v1::FrameworkSpec out;
      if (!inline_spec.base().empty()) {
        absl::StatusOr<const v1::FrameworkSpec*> base = catalog.FindFrameworkSpec(inline_spec.base());
        if (!base.ok()) return absl::InvalidArgumentError(absl::StrCat("framework.spec.base: ", base.status().message()));
        out = OverlayFramework(**base, inline_spec);
      } else {
        out = inline_spec;
      }
      if (out.name().empty()) out.set_name("inline");
      auto resolved = std::make_unique<const ResolvedFramework>(std::move(out), "framework.spec");
      if (!resolved->status.ok()) return resolved->status;
      if (assumed != nullptr) assumed->insert(assumed->end(), resolved->assumptions.begin(), resolved->assumptions.end());
      return JobFramework(std::move(resolved));
    }
    case v1::FrameworkRef::SOURCE_NOT_SET: break;
  }
  absl::StatusOr<const ResolvedFramework*> f = catalog.LookupFramework("megatron-core");
  if (!f.ok()) return absl::InternalError(absl::StrCat("built-in framework preset missing: ", f.status().message()));
  if (!(*f)->status.ok()) return (*f)->status;
  if (assumed != nullptr) {
    assumed->push_back({"framework", "megatron-core",
                        "stepcast default: a job that names no framework runs under Megatron-Core (DESIGN.md)"});
  }
  return JobFramework(*f);
}

absl::StatusOr<v1::FrameworkSpec> ResolveJobFramework(const v1::JobSpec& spec, const Catalog& catalog,
                                                      std::vector<AssumedInput>* assumed) {
  absl::StatusOr<JobFramework> f = LookupJobFramework(spec, catalog, assumed);
  if (!f.ok()) return f.status();
  return (*f)->spec;
}

}  // namespace stepcast
