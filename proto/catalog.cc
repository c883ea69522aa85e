#include "proto/catalog.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "proto/codec.h"
#include "proto/job_defaults.h"
#include "proto/published_runs.h"
#include "stepcast/v1/hardware.pb.h"
#include "stepcast/v1/model.pb.h"

namespace stepcast {

namespace pb = google::protobuf;

struct Catalog::Preset {
  std::string kind;    // "hardware", "models" or "frameworks"
  std::string name;    // the file name without .yaml, lower case
  std::string origin;  // "presets/hardware/h100-sxm.yaml", prefixes errors
  absl::string_view text;
  std::shared_ptr<const std::string> owned;  // the text of a file read at run time
  std::once_flag once;
  // Parse()'s result: status, and the value of the preset's kind.
  absl::Status status;
  Hardware hardware;
  ModelShape model;
  v1::FrameworkSpec framework;  // as written (base unresolved)

  void Parse() {
    if (kind == "hardware") {
      v1::HardwareSpec spec;
      if (absl::Status s = ParseMessage(text, SpecFormat::kYaml, origin, &spec); !s.ok()) {
        status = s;
        return;
      }
      absl::StatusOr<Hardware> hw = HardwareFromProto(spec, "hardware");
      if (!hw.ok()) {
        status = absl::InvalidArgumentError(absl::StrCat(origin, ": ", hw.status().message()));
        return;
      }
      if (hw->name.empty()) hw->name = name;
      if (hw->reference_profile.name.empty()) hw->reference_profile.name = name + "-reference";
      hardware = *std::move(hw);
    } else if (kind == "models") {
      v1::ModelShape spec;
      if (absl::Status s = ParseMessage(text, SpecFormat::kYaml, origin, &spec); !s.ok()) {
        status = s;
        return;
      }
      absl::StatusOr<ModelShape> m = ModelShapeFromProto(spec, "model");
      if (!m.ok()) {
        status = absl::InvalidArgumentError(absl::StrCat(origin, ": ", m.status().message()));
        return;
      }
      if (m->name.empty()) m->name = name;
      model = *std::move(m);
    } else {
      status = ParseMessage(text, SpecFormat::kYaml, origin, &framework);
      if (status.ok() && framework.name().empty()) framework.set_name(name);
    }
  }
};

struct Catalog::Resolved {
  std::once_flag once;
  absl::Status chain_status;  // an unknown base, a preset of the chain that does not parse
  std::string cycle_at;       // the preset where the base chain loops (the error names the lookup's spelling)
  std::unique_ptr<const ResolvedFramework> framework;  // when both above are empty
};

struct Catalog::Listing {
  std::once_flag hardware_once, models_once;
  std::map<std::string, Hardware> hardware;
  std::map<std::string, ModelShape> models;
};

namespace {
template <typename Map>
std::string Names(const Map& m) {
  std::vector<std::string> v;
  for (const auto& kv : m) v.push_back(kv.first);
  return absl::StrJoin(v, ", ");
}
}  // namespace

absl::StatusOr<Catalog> Catalog::Builtin(CatalogLoad load) {
  Catalog c;
  for (const EmbeddedPreset& p : EmbeddedPresets()) {
    if (absl::Status s = c.Add(p.path, p.text, nullptr); !s.ok()) return s;
  }
  c.Invalidate();
  if (load == CatalogLoad::kAll) {
    if (absl::Status s = c.Check(nullptr, true); !s.ok()) return s;
  }
  return c;
}

absl::Status Catalog::Add(const std::string& rel_path, absl::string_view text, std::shared_ptr<const std::string> owned) {
  const std::filesystem::path path(rel_path);
  auto p = std::make_shared<Preset>();
  p->name = absl::AsciiStrToLower(path.stem().string());
  p->kind = path.parent_path().filename().string();
  p->origin = "presets/" + rel_path;
  p->text = text;
  p->owned = std::move(owned);
  // The architecture registry's files, read by proto/architectures.cc.
  if (p->kind == "architectures") return absl::OkStatus();
  // The interval table (proto/interval_table.h reads it), not a preset.
  if (rel_path == "intervals.yaml") return absl::OkStatus();
  Presets* presets = p->kind == "hardware" ? &hardware_
                     : p->kind == "models" ? &models_
                     : p->kind == "frameworks" ? &frameworks_
                                               : nullptr;
  if (presets == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(p->origin, ": presets live in hardware/, models/, frameworks/ or architectures/"));
  }
  (*presets)[p->name] = std::move(p);
  return absl::OkStatus();
}

void Catalog::Invalidate() {
  resolved_.clear();
  for (const auto& kv : frameworks_) resolved_[kv.first] = std::make_shared<Resolved>();
  listing_ = std::make_shared<Listing>();
}

const Catalog::Preset* Catalog::Parsed(const Presets& presets, const std::string& name) const {
  auto it = presets.find(name);
  if (it == presets.end()) return nullptr;
  Preset* p = it->second.get();
  std::call_once(p->once, [p] { p->Parse(); });
  return p;
}

absl::Status Catalog::AddDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) return absl::NotFoundError(absl::StrCat(dir, ": not a directory"));
  std::vector<std::string> added_frameworks;
  absl::Status status;
  for (const char* kind : {"hardware", "models", "frameworks"}) {
    const fs::path sub = fs::path(dir) / kind;
    if (!fs::is_directory(sub)) continue;
    for (const auto& entry : fs::directory_iterator(sub)) {
      if (entry.path().extension() != ".yaml") continue;
      std::ifstream in(entry.path());
      std::stringstream ss;
      ss << in.rdbuf();
      auto text = std::make_shared<const std::string>(ss.str());
      const std::string rel = absl::StrCat(kind, "/", entry.path().filename().string());
      if (status = Add(rel, *text, text); !status.ok()) break;
      const std::string name = absl::AsciiStrToLower(entry.path().stem().string());
      const Presets& presets = std::string(kind) == "hardware" ? hardware_ : std::string(kind) == "models" ? models_ : frameworks_;
      if (status = Parsed(presets, name)->status; !status.ok()) break;
      if (std::string(kind) == "frameworks") added_frameworks.push_back(name);
    }
    if (!status.ok()) break;
  }
  Invalidate();
  if (!status.ok()) return status;
  return Check(&added_frameworks, false);
}

absl::Status Catalog::Check(const std::vector<std::string>* frameworks, bool all) const {
  std::vector<std::string> names = frameworks != nullptr ? *frameworks : FrameworkNames();
  for (const std::string& name : names) {
    const Preset* raw = Parsed(frameworks_, name);
    if (raw == nullptr) continue;
    if (!raw->status.ok()) return raw->status;
    // Checked with its base chain resolved, so a broken preset fails at load, not at use (a
    // preset whose base is unknown is an error at use, unchecked here, as it always was).
    const Resolved& resolved = ResolvedEntry(name);
    if (!resolved.chain_status.ok() || !resolved.cycle_at.empty()) continue;
    if (!resolved.framework->status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(raw->origin, ": ", resolved.framework->status.message()));
    }
    // Every default, recipe value and named setting must be a job field and value a job file
    // accepts: checked now, not at the first job that matches.
    auto check = [&](const v1::FrameworkDefault& d, const std::string& where) -> absl::Status {
      v1::JobSpec probe;
      if (absl::Status s = CompiledDefault(d.field(), d.value()).Apply(probe, where, nullptr); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(raw->origin, ": ", where, ": ", s.message()));
      }
      return absl::OkStatus();
    };
    const v1::FrameworkSpec& spec = raw->framework;
    // Container releases (framework.proto first_release / last_release): both or neither after
    // the base chain (a derived preset may set one and inherit the other), each exactly "YY.MM"
    // as a run's text states it (ReleaseInText: 20.01-39.12), the first not after the last;
    // checked here so that a bad preset fails at load, not at the first run that states a release.
    const v1::FrameworkSpec& merged = resolved.framework->spec;
    if (!merged.first_release().empty() || !merged.last_release().empty()) {
      const int first = ParseRelease(merged.first_release()), last = ParseRelease(merged.last_release());
      if (first == 0 || last == 0 || first > last) {
        return absl::InvalidArgumentError(absl::StrCat(raw->origin, ": first_release '", merged.first_release(),
                                                       "' / last_release '", merged.last_release(),
                                                       "': expected two container releases YY.MM, the first not after the last"));
      }
    }
    // MoeModel.folded_from_release: a release YY.MM, and inside the preset's releases when it
    // has them (a folding release after the last one would never apply to an unstated job).
    if (const std::string& f = merged.moe().folded_from_release(); !f.empty()) {
      const int folded = ParseRelease(f), last = ParseRelease(merged.last_release());
      if (folded == 0 || (last != 0 && folded > last)) {
        return absl::InvalidArgumentError(absl::StrCat(raw->origin, ": moe.folded_from_release '", f,
                                                       "': expected a container release YY.MM not after last_release"));
      }
    }
    for (const auto& d : spec.defaults()) {
      if (absl::Status s = check(d, "defaults"); !s.ok()) return s;
    }
    {
      // The defaults' `when` conditions parse and name job fields.
      v1::JobSpec probe;
      if (absl::Status s = resolved.framework->defaults.ApplyDefaults(probe, nullptr); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(raw->origin, ": defaults: ", s.message()));
      }
    }
    for (const auto& r : spec.recipes()) {
      for (const auto& d : r.values()) {
        if (absl::Status s = check(d, absl::StrCat("recipe ", r.models_size() ? r.models(0) : "?")); !s.ok()) return s;
      }
    }
    for (const auto& ns : spec.settings()) {
      for (const auto& d : ns.values()) {
        if (absl::Status s = check(d, absl::StrCat("setting ", ns.names_size() ? ns.names(0) : "?")); !s.ok()) return s;
      }
    }
  }
  if (all) {
    for (const auto* presets : {&hardware_, &models_}) {
      for (const auto& kv : *presets) {
        if (const absl::Status& s = Parsed(*presets, kv.first)->status; !s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const Hardware*> Catalog::LookupHardware(const std::string& name) const {
  const Preset* p = Parsed(hardware_, absl::AsciiStrToLower(name));
  if (p == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown hardware '", name, "'; known: ", Names(hardware_)));
  }
  if (!p->status.ok()) return p->status;
  return &p->hardware;
}

absl::StatusOr<const ModelShape*> Catalog::LookupModel(const std::string& name) const {
  const Preset* p = Parsed(models_, absl::AsciiStrToLower(name));
  if (p == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown model '", name, "'; known: ", Names(models_)));
  }
  if (!p->status.ok()) return p->status;
  return &p->model;
}

absl::StatusOr<Hardware> Catalog::FindHardware(const std::string& name) const {
  absl::StatusOr<const Hardware*> h = LookupHardware(name);
  if (!h.ok()) return h.status();
  return **h;
}

absl::StatusOr<ModelShape> Catalog::FindModel(const std::string& name) const {
  absl::StatusOr<const ModelShape*> m = LookupModel(name);
  if (!m.ok()) return m.status();
  return **m;
}

const Catalog::Resolved& Catalog::ResolvedEntry(const std::string& lower_name) const {
  Resolved* r = resolved_.at(lower_name).get();
  std::call_once(r->once, [&] {
    // The base chain, from the preset up to its root.
    std::vector<const v1::FrameworkSpec*> chain;
    std::string n = lower_name;
    while (!n.empty()) {
      const Preset* p = Parsed(frameworks_, n);
      if (p == nullptr) {
        r->chain_status = absl::InvalidArgumentError(absl::StrCat(
            "framework '", chain.back()->name(), "': unknown base '", n, "'; known: ", Names(frameworks_)));
        return;
      }
      if (!p->status.ok()) {
        r->chain_status = p->status;
        return;
      }
      for (const v1::FrameworkSpec* c : chain) {
        if (c == &p->framework) {
          r->cycle_at = n;
          return;
        }
      }
      chain.push_back(&p->framework);
      n = absl::AsciiStrToLower(p->framework.base());
    }
    // Applied from the root down.
    v1::FrameworkSpec out = *chain.back();
    for (auto it = chain.rbegin() + 1; it != chain.rend(); ++it) out = OverlayFramework(out, **it);
    out.set_base("");
    r->framework = std::make_unique<const ResolvedFramework>(std::move(out), "framework");
  });
  return *r;
}

absl::StatusOr<const ResolvedFramework*> Catalog::LookupFramework(const std::string& name) const {
  const std::string n = absl::AsciiStrToLower(name);
  if (n.empty()) {  // `framework { preset: "" }` (fuzz_spec_textproto): chain.back() on no chain before
    return absl::InvalidArgumentError(absl::StrCat("the framework name is empty; known: ", Names(frameworks_)));
  }
  if (frameworks_.find(n) == frameworks_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown framework '", name, "'; known: ", Names(frameworks_)));
  }
  const Resolved& r = ResolvedEntry(n);
  if (!r.chain_status.ok()) return r.chain_status;
  if (!r.cycle_at.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("framework '", name, "': base chain has a cycle at '", r.cycle_at, "'"));
  }
  return r.framework.get();
}

absl::StatusOr<const v1::FrameworkSpec*> Catalog::FindFrameworkSpec(const std::string& name) const {
  absl::StatusOr<const ResolvedFramework*> f = LookupFramework(name);
  if (!f.ok()) return f.status();
  return &(*f)->spec;
}

absl::StatusOr<v1::FrameworkSpec> Catalog::FindFramework(const std::string& name) const {
  absl::StatusOr<const v1::FrameworkSpec*> f = FindFrameworkSpec(name);
  if (!f.ok()) return f.status();
  return **f;
}

std::vector<std::string> Catalog::FrameworkNames() const {
  std::vector<std::string> v;
  for (const auto& kv : frameworks_) v.push_back(kv.first);
  return v;
}

const std::map<std::string, Hardware>& Catalog::hardware() const {
  static const std::map<std::string, Hardware> kNone;
  if (listing_ == nullptr) return kNone;  // a default-constructed (empty) catalog
  Listing* l = listing_.get();
  std::call_once(l->hardware_once, [&] {
    for (const auto& kv : hardware_) {
      if (const Preset* p = Parsed(hardware_, kv.first); p->status.ok()) l->hardware[kv.first] = p->hardware;
    }
  });
  return l->hardware;
}

const std::map<std::string, ModelShape>& Catalog::models() const {
  static const std::map<std::string, ModelShape> kNone;
  if (listing_ == nullptr) return kNone;  // a default-constructed (empty) catalog
  Listing* l = listing_.get();
  std::call_once(l->models_once, [&] {
    for (const auto& kv : models_) {
      if (const Preset* p = Parsed(models_, kv.first); p->status.ok()) l->models[kv.first] = p->model;
    }
  });
  return l->models;
}

namespace {
// Words that, right after a framework's feature word, turn it off ("compile off", "torch.compile
// disabled").
const std::set<std::string>& OffAfterWords() {
  static const std::set<std::string> k = {"off", "disabled", "false"};
  return k;
}
}  // namespace

absl::StatusOr<std::string> Catalog::FrameworkForText(const std::string& text, int year) const {
  // Lower-case words; `clause` marks a word that follows punctuation (",;:()[]/+"), where a
  // negation's look-back stops: "torchtitan (no FP8), torch.compile" does not negate compile.
  struct Words {
    std::vector<std::string> w;
    std::vector<bool> clause;
  };
  const auto words = [](const std::string& t) {
    Words out;
    std::string cur;
    bool punct = false;
    for (char ch : absl::AsciiStrToLower(t)) {
      const bool space = ch == ' ' || ch == '\t';
      if (space || std::strchr(",;:()[]/+", ch) != nullptr) {
        if (!cur.empty()) {
          out.w.push_back(cur);
          out.clause.push_back(punct);
          cur.clear();
          punct = false;
        }
        if (!space) punct = true;
      } else {
        cur.push_back(ch);
      }
    }
    if (!cur.empty()) {
      out.w.push_back(cur);
      out.clause.push_back(punct);
    }
    return out;
  };
  const Words text_words = words(text);
  const std::vector<std::string>& hay = text_words.w;
  size_t best_pos = hay.size(), best_len = 0;
  std::vector<std::string> best;       // presets matched at the best place
  std::vector<std::string> best_alias;  // the words of the alias matched there
  for (const auto& kv : frameworks_) {
    const std::string& name = kv.first;
    const Preset* p = Parsed(frameworks_, name);
    if (!p->status.ok()) continue;
    const v1::FrameworkSpec& spec = p->framework;
    std::vector<std::string> names = {name};
    for (const std::string& a : spec.aliases()) names.push_back(a);
    for (const std::string& a : names) {
      const std::vector<std::string> needle = words(a).w;
      if (needle.empty() || needle.size() > hay.size()) continue;
      for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
        if (!std::equal(needle.begin(), needle.end(), hay.begin() + i)) continue;
        // "torchtitan; torch.compile disabled", "torchtitan, compile off": a word after a
        // several-word alias that turns its last word off (review L3) unmatches it.
        const size_t after = i + needle.size();
        if (needle.size() >= 2 && after < hay.size() && OffAfterWords().count(hay[after]) > 0) continue;
        if (i < best_pos || (i == best_pos && a.size() > best_len)) {
          best_pos = i;
          best_len = a.size();
          best = {name};
          best_alias = needle;
        } else if (i == best_pos && a.size() == best_len &&
                   std::find(best.begin(), best.end(), name) == best.end()) {
          best.push_back(name);
        }
        break;
      }
    }
  }
  if (best.empty()) {
    return absl::NotFoundError(absl::StrCat("no framework preset named in '", text, "'; known: ", Names(frameworks_)));
  }
  // A derived preset (`base:` the one named) whose alias extends the alias matched with words of
  // its own ("torchtitan (torch.compile)" over "torchtitan") wins when the text states those words
  // anywhere after the name, in order and not negated: "torchtitan with torch.compile" and
  // "torchtitan (FSDP2, compiled)" state what the alias states, with other words between. A text
  // that matched a more specific alias of the base keeps it: "PyTorch FSDP1 (migrating to FSDP2)"
  // matched "PyTorch FSDP1", which "PyTorch FSDP2" does not extend; "torchtitan (eager) vs
  // torch.compile" matched "torchtitan (eager)". Only when one preset holds the alias (an era
  // choice among several is the year's). Two derived presets stated at once are an error, not a
  // pick.
  if (best.size() == 1) {
    // The matched alias names a variant of its preset when it extends a shorter alias of the same
    // preset ("PyTorch FSDP1" over "PyTorch FSDP", "torchtitan (eager)" over "torchtitan",
    // "Megatron-LM 2021" over "Megatron-LM"): a
    // derived alias of the same length ("PyTorch FSDP2", "torchtitan (torch.compile)") is then a
    // sibling variant, not a refinement of it.
    bool best_alias_is_variant = false;
    {
      const v1::FrameworkSpec& spec = Parsed(frameworks_, best.front())->framework;
      std::vector<std::string> own = {best.front()};
      for (const std::string& a : spec.aliases()) own.push_back(a);
      for (const std::string& a : own) {
        // A shorter form of the matched alias: its words lead the matched alias's, the last one
        // possibly extended ("PyTorch FSDP" -> "PyTorch FSDP1", "torchtitan" -> "torchtitan (eager)").
        const std::vector<std::string> shorter = words(a).w;
        if (shorter.empty() || shorter.size() > best_alias.size() || shorter == best_alias) continue;
        const size_t last = shorter.size() - 1;
        if (std::equal(shorter.begin(), shorter.begin() + last, best_alias.begin()) &&
            absl::StartsWith(best_alias[last], shorter[last])) {
          best_alias_is_variant = true;
        }
      }
    }
    static const std::set<std::string> kNegations = {"no", "not", "without", "non"};
    const std::set<std::string>& off_after = OffAfterWords();
    std::vector<std::string> refined;
    for (const auto& kv : frameworks_) {
      const Preset* p = Parsed(frameworks_, kv.first);
      if (!p->status.ok() || absl::AsciiStrToLower(p->framework.base()) != best.front()) continue;
      for (const std::string& a : p->framework.aliases()) {
        const std::vector<std::string> needle = words(a).w;
        const bool extends = needle.size() > best_alias.size() &&
                             std::equal(best_alias.begin(), best_alias.end(), needle.begin());
        if (!extends && best_alias_is_variant && needle.size() == best_alias.size()) continue;
        if (needle.size() < 2 || needle.front() != hay[best_pos]) continue;
        size_t at = best_pos + 1;
        bool stated = true;
        for (size_t k = 1; k < needle.size() && stated; ++k) {
          while (at < hay.size() && hay[at] != needle[k]) ++at;
          if (at == hay.size()) {
            stated = false;
            break;
          }
          // "without torch.compile", "no compile", "not compiled": the word is negated (the two
          // words before it, within its clause).
          for (size_t back = 1; back <= 2 && at >= best_pos + back + 1; ++back) {
            if (text_words.clause[at - back + 1]) break;
            if (kNegations.count(hay[at - back]) > 0) stated = false;
          }
          if (at >= best_pos + 3 && hay[at - 1] == "o" && hay[at - 2] == "w") stated = false;  // "w/o"
          if (at + 1 < hay.size() && off_after.count(hay[at + 1]) > 0) stated = false;     // "compile off"
          ++at;
        }
        if (stated) {
          refined.push_back(kv.first);
          break;
        }
      }
    }
    if (refined.size() == 1) return refined.front();
    if (refined.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat("framework '", text, "' states the words of several presets derived from '",
                                                     best.front(), "': ", absl::StrJoin(refined, ", "),
                                                     "; name one of them"));
    }
  }
  // Among presets sharing the alias, the era that covers the year (or the nearest; the latest
  // when no year is known).
  std::string pick = best.front();
  double pick_dist = 1e9;
  for (const std::string& n : best) {
    const v1::FrameworkSpec& f = Parsed(frameworks_, n)->framework;
    const int from = f.from_year() > 0 ? f.from_year() : 0, to = f.to_year() > 0 ? f.to_year() : 9999;
    const double y = year > 0 ? year : 9998;
    const double dist = y < from ? from - y : (y > to ? y - to : 0);
    if (dist < pick_dist) {
      pick = n;
      pick_dist = dist;
    }
  }
  return pick;
}

namespace {
// Levenshtein distance, capped: enough to tell a typo of a preset name from another framework.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

absl::StatusOr<Catalog::FrameworkMatch> Catalog::FrameworkForTextOrGeneric(const std::string& text, int year) const {
  absl::StatusOr<std::string> named = FrameworkForText(text, year);
  if (named.ok()) return FrameworkMatch{*named, false};
  if (named.status().code() != absl::StatusCode::kNotFound) return named.status();  // ambiguous: not a fallback
  const std::string lower = absl::AsciiStrToLower(std::string(absl::StripAsciiWhitespace(text)));
  for (const auto& [name, spec] : frameworks_) {
    if (!lower.empty() && EditDistance(lower, name) <= 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("no framework preset '", text, "'; did you mean '", name, "'? known: ", Names(frameworks_)));
    }
  }
  if (frameworks_.find(kGenericFramework) == frameworks_.end()) {
    return absl::NotFoundError(absl::StrCat("no framework preset named in '", text, "' and no '", kGenericFramework,
                                            "' preset to fall back to; known: ", Names(frameworks_)));
  }
  return FrameworkMatch{kGenericFramework, true};
}

AssumedInput Catalog::GenericFrameworkAssumed(const std::string& text) {
  return {"framework", kGenericFramework,
          absl::StrCat("no framework preset is named in '", text,
                       "': the generic preset (presets/frameworks/generic.yaml, eager PyTorch with FSDP2 semantics; "
                       "docs/FRAMEWORKS.md \"generic\"); its assumptions are listed as framework.* inputs")};
}

namespace {
absl::Status CheckOverlap(const v1::OverlapMechanism& m, const std::string& path, OverlapMechanism& out) {
  if (!(m.efficiency() >= 0 && m.efficiency() <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".efficiency: ", m.efficiency(), " must be in [0, 1]"));
  }
  if (m.bucket_min_params() < 0 || m.bucket_params_per_dp_rank() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".bucket_min_params / bucket_params_per_dp_rank: must be >= 0"));
  }
  if (!(m.bucket_bytes() >= 0 && std::isfinite(m.bucket_bytes()))) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".bucket_bytes: ", m.bucket_bytes(), " must be a finite number >= 0"));
  }
  if (m.chunks() < 0 || m.chunks() > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".chunks: ", m.chunks(), " must be in [0, 1024]"));
  }
  if (!(m.compute_sm_fraction() >= 0 && m.compute_sm_fraction() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ".compute_sm_fraction: ", m.compute_sm_fraction(), " must be in [0, 1] (0: measured contention)"));
  }
  if (m.compute_sm_fraction() > 0 && m.compute_sm_fraction() < 0.25) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".compute_sm_fraction: ", m.compute_sm_fraction(),
                                                   " leaves under a quarter of the SMs to compute; no framework reserves that many"));
  }
  out.supported = m.supported();
  out.efficiency = m.efficiency();
  out.bucket_min_params = m.bucket_min_params();
  out.bucket_params_per_dp_rank = m.bucket_params_per_dp_rank();
  out.bucket_bytes = m.bucket_bytes();
  out.per_layer = m.per_layer();
  out.chunks = m.chunks();
  out.chunks_per_group_rank = m.chunks_per_group_rank();
  out.low_confidence = m.low_confidence();
  out.compute_sm_fraction = m.compute_sm_fraction();
  out.steady_state_only = m.steady_state_only();
  out.needs_vpp = m.needs_vpp();
  out.concurrent = m.concurrent();
  out.backward_only = m.backward_only();
  out.ag_ring_first_chunk_local = m.ag_ring_first_chunk_local();
  if (m.compute_streams() < 0 || m.compute_streams() > 64) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".compute_streams: ", m.compute_streams(), " must be in [0, 64]"));
  }
  out.compute_streams = m.compute_streams();
  out.fp8_rs_ring_exchange = m.fp8_rs_ring_exchange();
  // Both describe Transformer Engine's userbuffers splits: without them the fields would be read
  // and ignored.
  if ((out.compute_streams > 0 || out.fp8_rs_ring_exchange) && !out.ag_ring_first_chunk_local) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, out.compute_streams > 0 ? ".compute_streams" : ".fp8_rs_ring_exchange",
        ": describes Transformer Engine userbuffers' split GEMMs, which need ag_ring_first_chunk_local: true"));
  }
  // A supported mechanism without chunking rests on a single chosen efficiency: it must say so.
  if (out.supported && !out.Structured() && out.efficiency > 0 && !out.low_confidence) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a single efficiency (", out.efficiency,
        ") without chunking must set low_confidence: true (docs/MODEL.md \"Overlap\")"));
  }
  if (out.supported && m.source().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".source: required for a supported mechanism"));
  }
  return absl::OkStatus();
}
}  // namespace

// One attention kernel of a framework preset; errors name "<path>.rates[i].<field>".
absl::StatusOr<AttentionKernel> AttentionKernelFromProto(const v1::AttentionKernel& a, const std::string& path) {
  AttentionKernel out;
  out.kernel = a.kernel();
  out.fused = a.fused();
  std::vector<AttentionRate> rates;
  rates.reserve(a.rates_size());
  for (int i = 0; i < a.rates_size(); ++i) {
    const auto& r = a.rates(i);
    const std::string f = absl::StrCat(path, ".rates[", i, "]");
    if (!(r.forward_flops_per_s() > 0 && std::isfinite(r.forward_flops_per_s()))) {
      return absl::InvalidArgumentError(absl::StrCat(f, ".forward_flops_per_s: must be a finite number > 0"));
    }
    if (!(r.backward_flops_per_s() > 0 && std::isfinite(r.backward_flops_per_s()))) {
      return absl::InvalidArgumentError(absl::StrCat(f, ".backward_flops_per_s: must be a finite number > 0"));
    }
    if (r.architecture().empty()) return absl::InvalidArgumentError(absl::StrCat(f, ".architecture: required"));
    if (r.seq_length() < 0 || r.head_dim() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(f, ": seq_length and head_dim must be >= 0"));
    }
    if (r.window() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(f, ".window: ", r.window(), " must be >= 0 (0: a whole-sequence rate)"));
    }
    if (r.window() > 0 && !r.causal()) {
      return absl::InvalidArgumentError(
          absl::StrCat(f, ".window: a sliding-window rate is causal (each query attends to its last window keys); set causal: true"));
    }
    AttentionRate ar;
    ar.architecture = absl::AsciiStrToLower(r.architecture());
    ar.dtype = DTypeFromProto(r.dtype());
    ar.head_dim = r.head_dim();
    ar.seq_length = r.seq_length();
    ar.window = r.window();
    ar.causal = r.causal();
    ar.forward_flops_per_s = r.forward_flops_per_s();
    ar.backward_flops_per_s = r.backward_flops_per_s();
    ar.source = r.source();
    for (int j = 0; j < r.hardware_size(); ++j) {
      if (r.hardware(j).empty()) {
        return absl::InvalidArgumentError(absl::StrCat(f, ".hardware[", j, "]: empty (name a part of a GPU's name, e.g. B300)"));
      }
      ar.hardware.push_back(absl::AsciiStrToUpper(r.hardware(j)));
    }
    rates.push_back(std::move(ar));
  }
  out.rates = std::move(rates);
  return out;
}

absl::StatusOr<Framework> FrameworkFromProto(const v1::FrameworkSpec& spec, const std::string& prefix) {
  Framework fw;
  fw.name = spec.name();
  fw.display_name = spec.display_name().empty() ? spec.name() : spec.display_name();
  {
    absl::StatusOr<AttentionKernel> k = AttentionKernelFromProto(spec.attention(), prefix + ".attention");
    if (!k.ok()) return k.status();
    fw.attention = *std::move(k);
  }
  for (int i = 0; i < spec.alternative_attention_size(); ++i) {
    absl::StatusOr<AttentionKernel> k =
        AttentionKernelFromProto(spec.alternative_attention(i), absl::StrCat(prefix, ".alternative_attention[", i, "]"));
    if (!k.ok()) return k.status();
    if (k->kernel.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, ".alternative_attention[", i, "].kernel: required"));
    }
  }
  // Attention-kernel limits (framework.proto AttentionKernelLimit): each names where it holds, a
  // positive head dimension and its source.
  for (int i = 0; i < spec.attention_limits_size(); ++i) {
    const v1::AttentionKernelLimit& lim = spec.attention_limits(i);
    const std::string lp = absl::StrCat(prefix, ".attention_limits[", i, "]");
    if (lim.architectures_size() == 0) return absl::InvalidArgumentError(lp + ".architectures: required");
    for (const std::string& a : lim.architectures()) {
      if (a.empty()) return absl::InvalidArgumentError(lp + ".architectures: an empty name");
    }
    if (lim.max_head_dim() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(lp, ".max_head_dim: ", lim.max_head_dim(), " must be > 0"));
    }
    if (lim.source().empty()) return absl::InvalidArgumentError(lp + ".source: required");
  }
  const auto& e = spec.elementwise();
  fw.elementwise_traffic_factor = e.traffic_factor() == 0 ? 1.0 : e.traffic_factor();
  if (!(fw.elementwise_traffic_factor >= 1 && fw.elementwise_traffic_factor < 100)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".elementwise.traffic_factor: ",
                                                   e.traffic_factor(), " must be in [1, 100)"));
  }
  fw.cross_entropy_bytes_per_logit = e.cross_entropy_bytes_per_logit();
  if (!(fw.cross_entropy_bytes_per_logit >= 0 && fw.cross_entropy_bytes_per_logit < 1000)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".elementwise.cross_entropy_bytes_per_logit: ",
                                                   e.cross_entropy_bytes_per_logit(), " must be in [0, 1000)"));
  }
  fw.loss_peak_bytes_per_logit = e.loss_peak_bytes_per_logit();
  fw.expert_bias_eager = e.expert_bias_eager();
  fw.expert_clamp_eager = e.expert_clamp_eager();
  fw.scaled_rope_eager = e.scaled_rope_eager();
  fw.dense_embedding_grad = e.dense_embedding_grad();
  fw.fp8_weight_cast_every_use = e.fp8_weight_cast_every_use();
  if (!(fw.loss_peak_bytes_per_logit >= 0 && fw.loss_peak_bytes_per_logit < 1000)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".elementwise.loss_peak_bytes_per_logit: ",
                                                   e.loss_peak_bytes_per_logit(), " must be in [0, 1000)"));
  }
  const auto& o = spec.overlap();
  const std::string op = prefix + ".overlap";
  for (auto [m, name, out] : {std::tuple{&o.tp_comm(), "tp_comm", &fw.overlap.tp_comm},
                              {&o.dp_grad_reduce(), "dp_grad_reduce", &fw.overlap.dp_grad_reduce},
                              {&o.dp_param_gather(), "dp_param_gather", &fw.overlap.dp_param_gather},
                              {&o.fsdp_param_gather(), "fsdp_param_gather", &fw.overlap.fsdp_param_gather},
                              {&o.pp_p2p(), "pp_p2p", &fw.overlap.pp_p2p},
                              {&o.cp_ring(), "cp_ring", &fw.overlap.cp_ring},
                              {&o.ep_all_to_all(), "ep_all_to_all", &fw.overlap.ep_all_to_all},
                              {&o.tp_comm_backward(), "tp_comm_backward", &fw.overlap.tp_comm_backward}}) {
    if (absl::Status s = CheckOverlap(*m, absl::StrCat(op, ".", name), *out); !s.ok()) return s;
  }
  fw.sharding.reshard_after_forward = spec.sharding().reshard_after_forward();
  fw.sharding.gather_once_per_step_with_pp = spec.sharding().gather_once_per_step_with_pp();
  fw.sharding.reduce_once_per_step_with_accumulation = spec.sharding().reduce_once_per_step_with_accumulation();
  fw.expert_parallel_after_cp = spec.moe().expert_parallel_after_cp();
  fw.embedding_lookup_matmul = spec.embedding_lookup_matmul();
  fw.sharding.gather_copy_out = spec.sharding().gather_copy_out();
  fw.sharding.reduce_scatter_copy_in = spec.sharding().reduce_scatter_copy_in();
  fw.sharding.sharded_params_are_master = spec.sharding().sharded_params_are_master();
  fw.sharding.backward_gathers_exposed = spec.sharding().backward_gathers_exposed();
  fw.sharding.zero2_is_shard_grad_op = spec.sharding().zero2_is_shard_grad_op();
  fw.sharding.zero2_reduces_every_micro_batch = spec.sharding().zero2_reduces_every_micro_batch();
  fw.sharding.replica_all_reduce_every_micro_batch = spec.sharding().replica_all_reduce_every_micro_batch();
  {
    // FSDP / ZeRO-3 memory fields (framework.proto ShardingModel 30-36).
    const v1::ShardingModel& sh = spec.sharding();
    const std::string sp = prefix + ".sharding";
    for (auto [v, name] : {std::pair{sh.gathered_units(), "gathered_units"}, {sh.reduce_scatter_units(), "reduce_scatter_units"}}) {
      if (!(v >= 0 && v <= 64)) return absl::InvalidArgumentError(absl::StrCat(sp, ".", name, ": ", v, " must be in [0, 64]"));
    }
    for (auto [v, name] : {std::pair{sh.gather_prefetch_params(), "gather_prefetch_params"},
                           {sh.max_live_params(), "max_live_params"}, {sh.grad_bucket_params(), "grad_bucket_params"}}) {
      if (v < 0) return absl::InvalidArgumentError(absl::StrCat(sp, ".", name, ": ", v, " must be >= 0"));
    }
    fw.sharding.gathered_units = sh.gathered_units();
    fw.sharding.reduce_scatter_units = sh.reduce_scatter_units();
    fw.sharding.gather_prefetch_params = static_cast<double>(sh.gather_prefetch_params());
    fw.sharding.max_live_params = static_cast<double>(sh.max_live_params());
    fw.sharding.grad_bucket_params = static_cast<double>(sh.grad_bucket_params());
    fw.sharding.accumulated_grad_dtype_set = sh.accumulated_grad_dtype() != v1::D_TYPE_UNSPECIFIED;
    if (fw.sharding.accumulated_grad_dtype_set) fw.sharding.accumulated_grad_dtype = DTypeFromProto(sh.accumulated_grad_dtype());
  }
  if (!spec.schedule().default_schedule().empty()) fw.default_schedule = spec.schedule().default_schedule();
  if (spec.recompute().selective_modules_size() > 0) {
    fw.selective_recompute_modules.assign(spec.recompute().selective_modules().begin(),
                                          spec.recompute().selective_modules().end());
  }
  const auto& l = spec.launch();
  if (!(l.kernel_launch_overhead_s() >= 0 && l.kernel_launch_overhead_s() < 1e-2)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".launch.kernel_launch_overhead_s: ",
                                                   l.kernel_launch_overhead_s(), " must be in [0, 0.01)"));
  }
  if (!(l.looped_launch_overhead_s() >= 0 && l.looped_launch_overhead_s() < 1e-2)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".launch.looped_launch_overhead_s: ",
                                                   l.looped_launch_overhead_s(), " must be in [0, 0.01)"));
  }
  if (!(l.gemm_call_overhead_s() >= 0 && l.gemm_call_overhead_s() < 1e-2)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".launch.gemm_call_overhead_s: ",
                                                   l.gemm_call_overhead_s(), " must be in [0, 0.01)"));
  }
  // Kernel counts: above a million per layer is a typo that would make every layer host-bound.
  auto count = [](int64_t v, absl::string_view path) -> absl::Status {
    if (v < 0 || v > 1000000) return absl::InvalidArgumentError(absl::StrCat(path, ": ", v, " must be in [0, 1000000]"));
    return absl::OkStatus();
  };
  for (const auto& [v, name] : {std::pair<int64_t, absl::string_view>{l.scaled_rope_kernels_forward(), "scaled_rope_kernels_forward"},
                                {l.scaled_rope_kernels_backward(), "scaled_rope_kernels_backward"}}) {
    if (absl::Status st = count(v, absl::StrCat(prefix, ".launch.", name)); !st.ok()) return st;
  }
  if (l.kernels_per_layer_forward() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".launch.kernels_per_layer_forward: must be >= 0"));
  }
  fw.launch.cuda_graphs = l.cuda_graphs();
  fw.launch.kernel_launch_overhead_s = l.kernel_launch_overhead_s();
  // 0: a looped launch costs what any other does (framework.proto LaunchModel).
  fw.launch.looped_launch_overhead_s =
      l.looped_launch_overhead_s() > 0 ? l.looped_launch_overhead_s() : l.kernel_launch_overhead_s();
  // 0: a GEMM in such a loop costs a looped launch (StepModel::LaunchFloor reads 0 so).
  fw.launch.gemm_call_overhead_s = l.gemm_call_overhead_s();
  fw.launch.kernels_per_layer_forward = l.kernels_per_layer_forward();
  fw.launch.scaled_rope_kernels_forward = static_cast<double>(l.scaled_rope_kernels_forward());
  fw.launch.scaled_rope_kernels_backward = static_cast<double>(l.scaled_rope_kernels_backward());
  if (l.has_moe()) {
    const v1::MoeLaunchModel& m = l.moe();
    const std::string mp = absl::StrCat(prefix, ".launch.moe");
    for (const auto& [v, name] : {std::pair<int64_t, absl::string_view>{m.kernels_before_sync(), "kernels_before_sync"},
                                  {m.kernels_after_sync(), "kernels_after_sync"},
                                  {m.grouped_linears(), "grouped_linears"},
                                  {m.bias_loop_kernels_per_expert_forward(), "bias_loop_kernels_per_expert_forward"},
                                  {m.bias_loop_kernels_per_expert_backward(), "bias_loop_kernels_per_expert_backward"},
                                  {m.group_limited_router_kernels(), "group_limited_router_kernels"},
                                  {m.fused_router_kernels(), "fused_router_kernels"},
                                  {m.flex_fused_router_kernels_before_sync(), "flex_fused_router_kernels_before_sync"},
                                  {m.preprocess_kernels(), "preprocess_kernels"}}) {
      if (absl::Status st = count(v, absl::StrCat(mp, ".", name)); !st.ok()) return st;
    }
    if ((m.group_limited_router_kernels() > 0 || m.fused_router_kernels() > 0 ||
         m.flex_fused_router_kernels_before_sync() > 0 || m.preprocess_kernels() > 0) &&
        m.router_kernels_source().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(mp, ".router_kernels_source: required with the router counts"));
    }
    if (m.expert_gemms_size() == 0) return absl::InvalidArgumentError(absl::StrCat(mp, ".expert_gemms: at least one entry is needed"));
    if (m.grouped_linears() < 1) return absl::InvalidArgumentError(absl::StrCat(mp, ".grouped_linears: must be >= 1"));
    switch (m.host_sync()) {
      case v1::MOE_HOST_SYNC_NONE: fw.launch.moe.host_sync = MoeHostSync::kNone; break;
      case v1::MOE_HOST_SYNC_EVERY_LAYER: fw.launch.moe.host_sync = MoeHostSync::kEveryLayer; break;
      case v1::MOE_HOST_SYNC_WITH_EXPERT_PARALLEL: fw.launch.moe.host_sync = MoeHostSync::kWithExpertParallel; break;
      default: return absl::InvalidArgumentError(absl::StrCat(mp, ".host_sync: must be set (MOE_HOST_SYNC_NONE, _EVERY_LAYER or _WITH_EXPERT_PARALLEL)"));
    }
    for (int i = 0; i < m.expert_gemms_size(); ++i) {
      const v1::ExpertGemmLaunches& g = m.expert_gemms(i);
      const std::string gp = absl::StrCat("expert_gemms[", i, "]");
      if (g.gemm_dtype() == v1::D_TYPE_UNSPECIFIED) return absl::InvalidArgumentError(absl::StrCat(mp, ".", gp, ".gemm_dtype: must be set"));
      for (const auto& [v, name] : {std::pair<int64_t, absl::string_view>{g.kernels_forward(), "kernels_forward"},
                                    {g.kernels_per_expert_forward(), "kernels_per_expert_forward"},
                                    {g.kernels_backward(), "kernels_backward"},
                                    {g.kernels_per_expert_backward(), "kernels_per_expert_backward"},
                                    {g.gemms_per_expert_forward(), "gemms_per_expert_forward"},
                                    {g.gemms_per_expert_backward(), "gemms_per_expert_backward"}}) {
        if (absl::Status st = count(v, absl::StrCat(mp, ".", gp, ".", name)); !st.ok()) return st;
      }
      // The GEMMs are among the per-expert kernels, not beside them.
      for (const auto& [gemms, kernels, direction] :
           {std::tuple<int64_t, int64_t, absl::string_view>{g.gemms_per_expert_forward(), g.kernels_per_expert_forward(), "forward"},
            {g.gemms_per_expert_backward(), g.kernels_per_expert_backward(), "backward"}}) {
        if (gemms > kernels) {
          return absl::InvalidArgumentError(absl::StrCat(mp, ".", gp, ".gemms_per_expert_", direction, ": ", gemms,
                                                         " exceeds kernels_per_expert_", direction, " (", kernels,
                                                         "): the GEMMs are counted among them"));
        }
      }
      ExpertGemmLaunches e;
      e.gemm_dtype = DTypeFromProto(g.gemm_dtype());
      e.kernels_forward = static_cast<double>(g.kernels_forward());
      e.kernels_per_expert_forward = static_cast<double>(g.kernels_per_expert_forward());
      e.kernels_backward = static_cast<double>(g.kernels_backward());
      e.kernels_per_expert_backward = static_cast<double>(g.kernels_per_expert_backward());
      e.gemms_per_expert_forward = static_cast<double>(g.gemms_per_expert_forward());
      e.gemms_per_expert_backward = static_cast<double>(g.gemms_per_expert_backward());
      fw.launch.moe.expert_gemms.push_back(e);
    }
    fw.launch.moe.kernels_before_sync = static_cast<double>(m.kernels_before_sync());
    fw.launch.moe.kernels_after_sync = static_cast<double>(m.kernels_after_sync());
    fw.launch.moe.grouped_linears = static_cast<double>(m.grouped_linears());
    fw.launch.moe.bias_loop_kernels_per_expert_forward = static_cast<double>(m.bias_loop_kernels_per_expert_forward());
    fw.launch.moe.bias_loop_kernels_per_expert_backward = static_cast<double>(m.bias_loop_kernels_per_expert_backward());
    fw.launch.moe.group_limited_router_kernels = static_cast<double>(m.group_limited_router_kernels());
    fw.launch.moe.fused_router_kernels = static_cast<double>(m.fused_router_kernels());
    fw.launch.moe.flex_fused_router_kernels_before_sync = static_cast<double>(m.flex_fused_router_kernels_before_sync());
    fw.launch.moe.preprocess_kernels = static_cast<double>(m.preprocess_kernels());
    if (m.preprocess_kernels() > m.kernels_before_sync()) {
      return absl::InvalidArgumentError(absl::StrCat(mp, ".preprocess_kernels: ", m.preprocess_kernels(),
                                                     " exceeds kernels_before_sync (", m.kernels_before_sync(),
                                                     "), of which it is the EP preprocess's part"));
    }
  }
  for (const std::string& s : spec.sources()) fw.sources.push_back(s);
  return fw;
}

namespace {
// The per-GPU memory sizes a GPU text states, in GB as written: "96GB", "80 GB", "141G", "8x80GB"
// (the 80). Sizes over 200 GB are a node's or a superchip's total ("640GB", "GH200 480GB"), not one
// GPU's, and are left out.
// The per-GPU memory sizes a GPU cell states ("80GB", "141 GB", "96G", "40 GiB"), in GB. Not a
// link's rate: a unit followed by "/s", "ps" or "it" ("200Gb/s", "400Gbps", "200 Gbit"), a "Gb"
// written with a lower-case b in `original` (gigabits), or a size whose next word names a network
// ("8x 200G IB", "400G NDR", "200G RoCE NICs": review M3).
std::vector<int> StatedGpuMemoryGb(const std::string& lower, const std::string& original) {
  static const std::set<std::string> kNetworkWords = {"ib",  "infiniband", "roce", "ethernet", "eth",  "nic",
                                                       "nics", "hdr",       "ndr",  "xdr",      "network", "gbe",
                                                       "link", "links",     "cx7",  "connectx"};
  std::vector<int> out;
  for (size_t i = 0; i < lower.size();) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(lower[i])) ||
        (i > 0 && (absl::ascii_isdigit(static_cast<unsigned char>(lower[i - 1])) || lower[i - 1] == '.'))) {
      ++i;
      continue;
    }
    size_t j = i;
    int v = 0;
    while (j < lower.size() && absl::ascii_isdigit(static_cast<unsigned char>(lower[j])) && v < 100000) {
      v = v * 10 + (lower[j] - '0');
      ++j;
    }
    size_t k = j;
    while (k < lower.size() && lower[k] == ' ') ++k;
    // The unit ends the word: "gb", "gib" or "g", not "gbps", "gbit" or "gb/s" (a link's rate).
    auto ends = [&](size_t at) {
      return at == lower.size() ||
             (!absl::ascii_isalnum(static_cast<unsigned char>(lower[at])) && lower.compare(at, 2, "/s") != 0);
    };
    const bool unit = (lower.compare(k, 2, "gb") == 0 && ends(k + 2)) || (lower.compare(k, 3, "gib") == 0 && ends(k + 3)) ||
                      (k < lower.size() && lower[k] == 'g' && ends(k + 1));
    // "Gb" with a lower-case b: gigabits (a NIC's "200Gb"), not memory.
    const bool bits = lower.compare(k, 2, "gb") == 0 && k + 1 < original.size() && original[k] == 'G' && original[k + 1] == 'b';
    // The next word names a network: "200G IB", "400G NDR InfiniBand".
    size_t w = k;
    while (w < lower.size() && absl::ascii_isalpha(static_cast<unsigned char>(lower[w]))) ++w;
    while (w < lower.size() && (lower[w] == ' ' || lower[w] == '-')) ++w;
    size_t w_end = w;
    while (w_end < lower.size() && absl::ascii_isalnum(static_cast<unsigned char>(lower[w_end]))) ++w_end;
    const bool network = kNetworkWords.count(lower.substr(w, w_end - w)) > 0;
    // Only a NIC's speed is read as one, and never a size written "GB" / "GiB" ("H100 96GB IB" is
    // 96 GB of memory; "H100 96Gb" is not a NIC).
    const bool nic_speed = v == 25 || v == 50 || v == 100 || v == 200 || v == 400 || v == 800;
    const bool upper_gb = original.compare(k, 2, "GB") == 0 || original.compare(k, 3, "GiB") == 0;
    const bool link_rate = nic_speed && !upper_gb && (bits || network);
    if (unit && !link_rate && v > 0 && v <= 200) out.push_back(v);
    i = j;
  }
  return out;
}
}  // namespace

absl::StatusOr<std::string> HardwarePresetForGpuName(const std::string& gpu_name) {
  const std::string n = absl::AsciiStrToLower(gpu_name);
  const std::vector<std::string> words = absl::StrSplit(n, absl::ByAnyChar(" -_()/,;"), absl::SkipEmpty());
  auto word = [&](const char* w) { return std::find(words.begin(), words.end(), w) != words.end(); };
  auto has = [&](const char* s) { return absl::StrContains(n, s); };
  auto preset = [](const char* p) { return absl::StatusOr<std::string>(std::string(p)); };
  auto none = [&](absl::string_view why) {
    return absl::StatusOr<std::string>(
        absl::NotFoundError(absl::StrCat("no hardware preset for GPU '", gpu_name, "'", why)));
  };
  // The form factor the text names: "SXM", "SXM5", "H100-SXM-80GB" name the SXM module; "NVL" as a
  // word (not "NVLink", not "NVL72") the NVL card. SXM named wins over a stray NVL ("SXM ... between
  // SXM and NVL"): the NVL card only when the text names NVL and not SXM.
  const bool sxm = std::any_of(words.begin(), words.end(), [](const std::string& w) { return absl::StartsWith(w, "sxm"); });
  const bool nvl = word("nvl") && !sxm;
  // A stated per-GPU memory size other than the preset's is refused with the sizes the presets have
  // (NVIDIA H100 / H200 / A100 datasheets), never mapped with the size dropped.
  const std::vector<int> stated_gb = StatedGpuMemoryGb(n, gpu_name);
  // "PCIe" names the PCIe card unless, beside a named SXM module, every mention is the host link
  // ("PCIe Gen5 host", "PCIe 5.0", "PCIe switch": review M3).
  bool pcie_link_only = true;
  for (size_t at = n.find("pcie"); at != std::string::npos; at = n.find("pcie", at + 4)) {
    // The host link when one of the next three words says so ("PCIe Gen5 host", "PCIe 5.0 x16
    // host link", "PCIe switch"); "H100 PCIe Gen5 (not SXM)" is the card.
    const std::vector<std::string> after = absl::StrSplit(n.substr(at + 4), absl::ByAnyChar(" -_(),;/"), absl::SkipEmpty());
    bool link = false;
    for (size_t w = 0; w < after.size() && w < 3; ++w) {
      for (const char* host : {"host", "switch", "link", "bus", "x16"}) link |= absl::StartsWith(after[w], host);
    }
    if (!link) pcie_link_only = false;
  }
  const bool pcie = has("pcie") && !(sxm && pcie_link_only);
  auto other_size = [&](std::initializer_list<int> preset_gb) -> int {
    for (int v : stated_gb) {
      if (std::find(preset_gb.begin(), preset_gb.end(), v) == preset_gb.end()) return v;
    }
    return 0;
  };
  // Most specific first: several names contain another part's name ("gh200" holds "h200", "gb200"
  // "b200", "h200" "h20"), and variants of one die differ in memory, links or clocks.
  if (has("gb300")) {  // "NVIDIA GB300" (nvidia-smi), "GB300 (DGX-GB300 NVL72)": 1,400 W, not the HGX B300
    if (int v = other_size({288, 279, 278}); v > 0) {
      return none(absl::StrCat(": it states ", v, " GB; the GB300 NVL72 preset has 288 GB HBM3e (284,208 MiB as "
                               "nvidia-smi reports it); give an inline spec"));
    }
    return preset("gb300");
  }
  if (has("gb200")) return preset("gb200");
  if (has("gh200")) return preset("gh200");  // "NVIDIA GH200 480GB" (96 GB HBM3) and the 144 GB HBM3e module
  if (has("b300")) return preset("b300");    // "NVIDIA B300 SXM6 AC"
  if (has("b200")) return preset("b200");
  if (has("h200")) {
    if (int v = other_size({141}); v > 0) {
      return none(absl::StrCat(": it states ", v, " GB; the H200 presets (SXM, NVL) have 141 GB HBM3e; give an inline spec"));
    }
    return preset(nvl ? "h200-nvl" : "h200");
  }
  if (word("h20")) {
    if (word("3e") || has("141g")) return none(": the H20-3e has 141 GB HBM3e, not the H20 preset's 96 GB HBM3");
    return preset("h20");
  }
  if (has("h800")) {
    if (pcie) return none(": the H800 PCIe is a PCIe card with HBM2e, not the SXM5 H800 preset");
    return preset("h800");
  }
  if (has("h100")) {
    if (sxm && pcie) {
      return none(": it names both SXM and PCIe, two H100 parts with different clocks, power and links; name one or give an inline spec");
    }
    if (nvl) {
      if (int v = other_size({94}); v > 0) {
        return none(absl::StrCat(": it states ", v, " GB; the H100 NVL preset has 94 GB HBM3; give an inline spec"));
      }
      return preset("h100-nvl");
    }
    // The 96 GB HBM2e SXM part (Meta's Grand Teton H100, 500 W; torchtitan's 2024 benchmarks): its
    // own preset. "H100 96GB" without HBM2e may be the HBM3 part: refused below.
    if (!pcie && has("hbm2e") && other_size({80}) == 96) return preset("h100-sxm-96gb");
    if (int v = other_size({80}); v > 0) {
      return none(absl::StrCat(": it states ", v, " GB and no H100 preset has ", v,
                               " GB (SXM and PCIe: 80 GB, NVL: 94 GB, the 500 W SXM part: 96 GB HBM2e; a 96 GB H100 "
                               "not named HBM2e may be the HBM3 part); give an inline spec"));
    }
    if (pcie) return preset("h100-pcie");  // 80 GB HBM2e
    if (has("hbm2e")) {
      return none(": an H100 with HBM2e is the PCIe card (80 GB; name PCIe) or the 96 GB 500 W SXM part (name 96GB), "
                  "not the HBM3 H100 SXM preset; give an inline spec");
    }
    return preset("h100-sxm");
  }
  if (has("a800")) {
    if (has("40gb")) return none(": no A800 40GB preset");
    return preset("a800-80gb");
  }
  if (has("a100")) {
    if (int v = other_size({40, 80}); v > 0) {
      return none(absl::StrCat(": it states ", v, " GB; the A100 presets have 40 GB or 80 GB; give an inline spec"));
    }
    const bool gb40 = has("40gb") || std::find(stated_gb.begin(), stated_gb.end(), 40) != stated_gb.end();
    return preset(gb40 ? "a100-40gb" : "a100-80gb");
  }
  if (has("mi355x")) return preset("mi355x");
  if (has("mi350x")) return preset("mi350x");
  if (has("mi325x")) return preset("mi325x");
  if (has("mi300x")) return preset("mi300x");
  if (has("mi250x")) return preset("mi250x");  // per GCD; rocm-smi also prints "MI250X/MI250"
  if (word("l4")) return preset("l4");
  return none("");
}

}  // namespace stepcast
