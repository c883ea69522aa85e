#include "proto/job_defaults.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "proto/catalog.h"
#include "proto/codec.h"

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
  out.set_base("");
  return out;
}

namespace {
// The preset's own assumptions (FrameworkSpec.assumptions: the generic preset's model-level
// choices), listed in every prediction that uses it.
absl::StatusOr<v1::FrameworkSpec> WithAssumptions(absl::StatusOr<v1::FrameworkSpec> f, std::vector<AssumedInput>* assumed) {
  if (f.ok() && assumed != nullptr) {
    for (const v1::FrameworkDefault& a : f->assumptions()) {
      assumed->push_back({a.field(), a.value(), absl::StrCat("framework ", f->name(), " assumption: ", a.source())});
    }
  }
  return f;
}
}  // namespace

absl::StatusOr<v1::FrameworkSpec> ResolveJobFramework(const v1::JobSpec& spec, const Catalog& catalog,
                                                      std::vector<AssumedInput>* assumed) {
  switch (spec.framework().source_case()) {
    case v1::FrameworkRef::kPreset: {
      const std::string& text = spec.framework().preset();
      absl::StatusOr<v1::FrameworkSpec> f = catalog.FindFramework(text);
      if (absl::IsNotFound(f.status())) {
        // Not a preset name: the preset the text names (an alias), else the generic preset.
        absl::StatusOr<Catalog::FrameworkMatch> m = catalog.FrameworkForTextOrGeneric(text);
        if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat("framework.preset: ", m.status().message()));
        if (m->fallback && assumed != nullptr) assumed->push_back(Catalog::GenericFrameworkAssumed(text));
        f = catalog.FindFramework(m->name);
      }
      if (!f.ok()) return absl::InvalidArgumentError(absl::StrCat("framework.preset: ", f.status().message()));
      return WithAssumptions(std::move(f), assumed);
    }
    case v1::FrameworkRef::kSpec: {
      const v1::FrameworkSpec& inline_spec = spec.framework().spec();
      v1::FrameworkSpec out = inline_spec;
      if (!inline_spec.base().empty()) {
        absl::StatusOr<v1::FrameworkSpec> base = catalog.FindFramework(inline_spec.base());
        if (!base.ok()) return absl::InvalidArgumentError(absl::StrCat("framework.spec.base: ", base.status().message()));
        out = OverlayFramework(*base, inline_spec);
      }
      if (out.name().empty()) out.set_name("inline");
      absl::StatusOr<Framework> check = FrameworkFromProto(out, "framework.spec");
      if (!check.ok()) return check.status();
      return WithAssumptions(out, assumed);
    }
    case v1::FrameworkRef::SOURCE_NOT_SET: break;
  }
  absl::StatusOr<v1::FrameworkSpec> f = catalog.FindFramework("megatron-core");
  if (!f.ok()) return absl::InternalError(absl::StrCat("built-in framework preset missing: ", f.status().message()));
  if (assumed != nullptr) {
    assumed->push_back({"framework", "megatron-core",
                        "stepcast default: a job that names no framework runs under Megatron-Core (DESIGN.md)"});
  }
  return f;
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

}  // namespace

absl::StatusOr<bool> JobFieldIsSet(const v1::JobSpec& spec, const std::string& path) {
  absl::StatusOr<std::vector<const pb::FieldDescriptor*>> chain = FieldChain(path);
  if (!chain.ok()) return chain.status();
  const pb::Message* msg = &spec;
  for (size_t i = 0; i < chain->size(); ++i) {
    const pb::FieldDescriptor* f = (*chain)[i];
    const pb::Reflection* r = msg->GetReflection();
    if (f->is_repeated()) return r->FieldSize(*msg, f) > 0;
    if (i + 1 < chain->size()) {
      if (!r->HasField(*msg, f)) return false;
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

absl::Status ApplyDefault(v1::JobSpec& spec, const std::string& path, const std::string& value,
                          const std::string& source, std::vector<AssumedInput>* assumed) {
  absl::StatusOr<bool> set = JobFieldIsSet(spec, path);
  if (!set.ok()) return set.status();
  if (*set) return absl::OkStatus();
  absl::StatusOr<std::vector<const pb::FieldDescriptor*>> chain = FieldChain(path);
  if (!chain.ok()) return chain.status();
  // The value as a one-field YAML job, read by the job file reader (same names and checks).
  std::string yaml;
  std::string indent;
  for (size_t i = 0; i + 1 < chain->size(); ++i) {
    absl::StrAppend(&yaml, indent, (*chain)[i]->name(), ":\n");
    indent += "  ";
  }
  const pb::FieldDescriptor* leaf = chain->back();
  if (leaf->is_repeated()) {
    std::vector<std::string> items;
    for (absl::string_view p : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
      items.push_back(std::string(absl::StripAsciiWhitespace(p)));
    }
    absl::StrAppend(&yaml, indent, leaf->name(), ": [", absl::StrJoin(items, ", "), "]\n");
  } else {
    absl::StrAppend(&yaml, indent, leaf->name(), ": ", value, "\n");
  }
  v1::JobSpec patch;
  if (absl::Status s = ParseMessage(yaml, SpecFormat::kYaml, absl::StrCat("default of ", path), &patch); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": default '", value, "' (", source, "): ", s.message()));
  }
  spec.MergeFrom(patch);
  if (assumed != nullptr) assumed->push_back({path, value, source});
  return absl::OkStatus();
}

namespace {
std::string Squash(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}
}  // namespace

namespace {
// Whether the job, as the defaults so far left it, meets one FrameworkDefault.when condition
// "<path>=<v1>|<v2>...": an enum matches by its value name's last part (SHARDING_ZERO3 -> zero3),
// a bool by true/false, a string or number by its text. An unset field matches only the value
// "unset" ("parallelism.vpp=unset|1": no virtual pipeline).
absl::StatusOr<bool> WhenHolds(const v1::JobSpec& spec, const std::string& condition) {
  const size_t eq = condition.find('=');
  if (eq == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("when '", condition, "': expected <field path>=<value>[|<value>]"));
  }
  const std::string path(absl::StripAsciiWhitespace(condition.substr(0, eq)));
  absl::StatusOr<bool> set = JobFieldIsSet(spec, path);
  if (!set.ok()) return set.status();
  if (!*set) {
    for (absl::string_view v : absl::StrSplit(condition.substr(eq + 1), '|')) {
      if (absl::AsciiStrToLower(absl::StripAsciiWhitespace(v)) == "unset") return true;
    }
    return false;
  }
  absl::StatusOr<std::vector<const pb::FieldDescriptor*>> chain = FieldChain(path);
  if (!chain.ok()) return chain.status();
  const pb::Message* msg = &spec;
  for (size_t i = 0; i + 1 < chain->size(); ++i) msg = &msg->GetReflection()->GetMessage(*msg, (*chain)[i]);
  const pb::FieldDescriptor* f = chain->back();
  const pb::Reflection* r = msg->GetReflection();
  if (f->is_repeated()) return absl::InvalidArgumentError(absl::StrCat("when '", condition, "': a repeated field"));
  std::string text;
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      text = absl::AsciiStrToLower(r->GetEnum(*msg, f)->name());
      const size_t us = text.rfind('_');
      if (us != std::string::npos) text = text.substr(us + 1);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL: text = r->GetBool(*msg, f) ? "true" : "false"; break;
    case pb::FieldDescriptor::CPPTYPE_STRING: text = r->GetString(*msg, f); break;
    case pb::FieldDescriptor::CPPTYPE_INT32: text = absl::StrCat(r->GetInt32(*msg, f)); break;
    case pb::FieldDescriptor::CPPTYPE_INT64: text = absl::StrCat(r->GetInt64(*msg, f)); break;
    default: return absl::InvalidArgumentError(absl::StrCat("when '", condition, "': unsupported field type"));
  }
  for (absl::string_view v : absl::StrSplit(condition.substr(eq + 1), '|')) {
    if (absl::AsciiStrToLower(absl::StripAsciiWhitespace(v)) == absl::AsciiStrToLower(text)) return true;
  }
  return false;
}
}  // namespace

absl::Status ApplyRecipeDefaults(v1::JobSpec& spec, const v1::FrameworkSpec& framework, const std::string& model_name,
                                 const std::string& architecture, const std::string& gemm,
                                 std::vector<AssumedInput>* assumed, const std::string& hardware,
                                 v1::ShardingModel* sharding) {
  const std::string model = Squash(model_name);
  if (model.empty()) return absl::OkStatus();
  // Matching recipes, the most specific model name first ("gpt-oss 120b" before "gpt-oss 20b"
  // cannot both match; "deepseek-v3 16b" before "deepseek-v3"); ties keep file order (a child
  // framework's recipes come before its base's). Values only fill fields still unset.
  struct Match {
    const v1::Recipe* recipe;
    size_t length;
    std::string name;
  };
  std::vector<Match> matches;
  // A job that states no GEMM dtype runs bf16 (stepcast's fallback) unless a recipe sets the dtype
  // itself: a precision-restricted recipe then applies only when it does.
  for (const v1::Recipe& r : framework.recipes()) {
    size_t best = 0;
    std::string name;
    for (const std::string& m : r.models()) {
      const std::string sq = Squash(m);
      if (!sq.empty() && absl::StrContains(model, sq) && sq.size() > best) {
        best = sq.size();
        name = m;
      }
    }
    if (best == 0) continue;
    if (r.architectures_size() > 0 && std::find(r.architectures().begin(), r.architectures().end(), architecture) ==
                                          r.architectures().end()) {
      continue;
    }
    if (r.hardware_size() > 0 && std::find(r.hardware().begin(), r.hardware().end(), hardware) == r.hardware().end()) {
      continue;
    }
    if (r.precisions_size() > 0) {
      bool sets_gemm = false;
      for (const v1::FrameworkDefault& d : r.values()) sets_gemm |= d.field() == "training.precision.gemm";
      const std::string precision = gemm.empty() && !sets_gemm ? "bf16" : gemm;
      if (!precision.empty() &&
          std::find(r.precisions().begin(), r.precisions().end(), precision) == r.precisions().end()) {
        continue;
      }
    }
    matches.push_back({&r, best, name});
  }
  std::stable_sort(matches.begin(), matches.end(), [](const Match& a, const Match& b) { return a.length > b.length; });
  bool sharding_set = false;
  for (const Match& m : matches) {
    if (sharding != nullptr && !sharding_set && m.recipe->has_sharding()) {
      *sharding = m.recipe->sharding();
      sharding_set = true;
      if (assumed != nullptr) {
        assumed->push_back({"framework.sharding", "recipe",
                            absl::StrCat("framework ", framework.name(), " recipe for ", m.name, ": ",
                                         m.recipe->sharding().source().empty() ? m.recipe->source()
                                                                                : m.recipe->sharding().source())});
      }
    }
    for (const v1::FrameworkDefault& d : m.recipe->values()) {
      bool applies = true;
      for (const std::string& w : d.when()) {
        absl::StatusOr<bool> holds = WhenHolds(spec, w);
        if (!holds.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("framework ", framework.name(), " recipe ", m.name, ": ", holds.status().message()));
        }
        applies = applies && *holds;
      }
      if (!applies) continue;
      const std::string source = absl::StrCat("framework ", framework.name(), " recipe for ", m.name, ": ",
                                              d.source().empty() ? m.recipe->source() : d.source());
      if (absl::Status s = ApplyDefault(spec, d.field(), d.value(), source, assumed); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("framework ", framework.name(), " recipe ", m.name, ": ",
                                                       s.message()));
      }
    }
  }
  return absl::OkStatus();
}


absl::Status ApplyFrameworkDefaults(v1::JobSpec& spec, const v1::FrameworkSpec& framework,
                                    std::vector<AssumedInput>* assumed) {
  for (const v1::FrameworkDefault& d : framework.defaults()) {
    bool applies = true;
    for (const std::string& w : d.when()) {
      absl::StatusOr<bool> holds = WhenHolds(spec, w);
      if (!holds.ok()) return absl::InvalidArgumentError(absl::StrCat("framework ", framework.name(), ": ", holds.status().message()));
      applies = applies && *holds;
    }
    if (!applies) continue;
    const std::string source = absl::StrCat("framework ", framework.name(), " default",
                                            d.source().empty() ? "" : ": ", d.source());
    if (absl::Status s = ApplyDefault(spec, d.field(), d.value(), source, assumed); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("framework ", framework.name(), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace stepcast
