#include "proto/catalog.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "proto/codec.h"
#include "stepcast/v1/hardware.pb.h"
#include "stepcast/v1/model.pb.h"

namespace stepcast {

absl::StatusOr<Catalog> Catalog::Builtin() {
  Catalog c;
  for (const EmbeddedPreset& p : EmbeddedPresets()) {
    if (absl::Status s = c.Add(p.path, p.text); !s.ok()) return s;
  }
  return c;
}

absl::Status Catalog::Add(const std::string& rel_path, const std::string& text) {
  const std::filesystem::path path(rel_path);
  const std::string name = absl::AsciiStrToLower(path.stem().string());
  const std::string kind = path.parent_path().filename().string();
  const std::string origin = "presets/" + rel_path;
  if (kind == "hardware") {
    v1::HardwareSpec spec;
    if (absl::Status s = ParseMessage(text, SpecFormat::kYaml, origin, &spec); !s.ok()) return s;
    absl::StatusOr<Hardware> hw = HardwareFromProto(spec, "hardware");
    if (!hw.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", hw.status().message()));
    if (hw->name.empty()) hw->name = name;
    if (hw->reference_profile.name.empty()) hw->reference_profile.name = name + "-reference";
    hardware_[name] = *std::move(hw);
  } else if (kind == "models") {
    v1::ModelShape spec;
    if (absl::Status s = ParseMessage(text, SpecFormat::kYaml, origin, &spec); !s.ok()) return s;
    absl::StatusOr<ModelShape> m = ModelShapeFromProto(spec, "model");
    if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", m.status().message()));
    if (m->name.empty()) m->name = name;
    models_[name] = *std::move(m);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": presets live in hardware/ or models/"));
  }
  return absl::OkStatus();
}

absl::Status Catalog::AddDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) return absl::NotFoundError(absl::StrCat(dir, ": not a directory"));
  for (const char* kind : {"hardware", "models"}) {
    const fs::path sub = fs::path(dir) / kind;
    if (!fs::is_directory(sub)) continue;
    for (const auto& entry : fs::directory_iterator(sub)) {
      if (entry.path().extension() != ".yaml") continue;
      std::ifstream in(entry.path());
      std::stringstream ss;
      ss << in.rdbuf();
      if (absl::Status s = Add(absl::StrCat(kind, "/", entry.path().filename().string()), ss.str()); !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

namespace {
template <typename Map>
std::string Names(const Map& m) {
  std::vector<std::string> v;
  for (const auto& kv : m) v.push_back(kv.first);
  return absl::StrJoin(v, ", ");
}
}  // namespace

absl::StatusOr<Hardware> Catalog::FindHardware(const std::string& name) const {
  auto it = hardware_.find(absl::AsciiStrToLower(name));
  if (it == hardware_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown hardware '", name, "'; known: ", Names(hardware_)));
  }
  return it->second;
}

absl::StatusOr<ModelShape> Catalog::FindModel(const std::string& name) const {
  auto it = models_.find(absl::AsciiStrToLower(name));
  if (it == models_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown model '", name, "'; known: ", Names(models_)));
  }
  return it->second;
}

absl::StatusOr<std::string> HardwarePresetForGpuName(const std::string& gpu_name) {
  const std::string n = absl::AsciiStrToLower(gpu_name);
  const std::vector<std::string> words = absl::StrSplit(n, absl::ByAnyChar(" -_()/,"), absl::SkipEmpty());
  auto word = [&](const char* w) { return std::find(words.begin(), words.end(), w) != words.end(); };
  if (absl::StrContains(n, "gb200")) return std::string("gb200");
  if (absl::StrContains(n, "b200")) return std::string("b200");
  if (absl::StrContains(n, "h200")) return std::string("h200");
  if (absl::StrContains(n, "h100")) return std::string(absl::StrContains(n, "pcie") ? "h100-pcie" : "h100-sxm");
  if (absl::StrContains(n, "a100")) return std::string(absl::StrContains(n, "40gb") ? "a100-40gb" : "a100-80gb");
  if (absl::StrContains(n, "mi300x")) return std::string("mi300x");
  if (word("l4")) return std::string("l4");
  return absl::NotFoundError(absl::StrCat("no hardware preset for GPU '", gpu_name, "'"));
}

}  // namespace stepcast
