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
  auto has = [&](const char* s) { return absl::StrContains(n, s); };
  auto preset = [](const char* p) { return absl::StatusOr<std::string>(std::string(p)); };
  auto none = [&](const char* why) {
    return absl::StatusOr<std::string>(
        absl::NotFoundError(absl::StrCat("no hardware preset for GPU '", gpu_name, "'", why)));
  };
  // Most specific first: several names contain another part's name ("gh200" holds "h200", "gb200"
  // "b200", "h200" "h20"), and variants of one die differ in memory, links or clocks.
  if (has("gb300")) return none(": GB300 runs at 1,400 W with 2.5/5 PFLOP/s bf16/fp8, not the HGX B300; give an inline spec");
  if (has("gb200")) return preset("gb200");
  if (has("gh200")) return preset("gh200");  // "NVIDIA GH200 480GB" (96 GB HBM3) and the 144 GB HBM3e module
  if (has("b300")) return preset("b300");    // "NVIDIA B300 SXM6 AC"
  if (has("b200")) return preset("b200");
  if (has("h200")) return preset(word("nvl") ? "h200-nvl" : "h200");
  if (word("h20")) {
    if (word("3e") || has("141g")) return none(": the H20-3e has 141 GB HBM3e, not the H20 preset's 96 GB HBM3");
    return preset("h20");
  }
  if (has("h800")) {
    if (has("pcie")) return none(": the H800 PCIe is a PCIe card with HBM2e, not the SXM5 H800 preset");
    return preset("h800");
  }
  if (has("h100")) {
    if (word("nvl")) return preset("h100-nvl");
    return preset(has("pcie") ? "h100-pcie" : "h100-sxm");
  }
  if (has("a800")) {
    if (has("40gb")) return none(": no A800 40GB preset");
    return preset("a800-80gb");
  }
  if (has("a100")) return preset(has("40gb") ? "a100-40gb" : "a100-80gb");
  if (has("mi355x")) return preset("mi355x");
  if (has("mi325x")) return preset("mi325x");
  if (has("mi300x")) return preset("mi300x");
  if (has("mi250x")) return preset("mi250x");  // per GCD; rocm-smi also prints "MI250X/MI250"
  if (word("l4")) return preset("l4");
  return none("");
}

}  // namespace stepcast
