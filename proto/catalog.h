// File: proto/catalog.h
//
// The preset catalog: hardware and model presets, one YAML file each under presets/ (compiled
// into the binary), plus any directory given at run time.
#ifndef STEPCAST_PROTO_CATALOG_H_
#define STEPCAST_PROTO_CATALOG_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/framework.h"
#include "core/hardware.h"
#include "core/model_shape.h"
#include "stepcast/v1/framework.pb.h"

namespace stepcast {

struct EmbeddedPreset {
  const char* path;  // relative to presets/, e.g. "hardware/h100-sxm.yaml"
  const char* text;
};
const std::vector<EmbeddedPreset>& EmbeddedPresets();

class Catalog {
 public:
  // The compiled-in presets. Fails only if a preset file is malformed (a build defect).
  static absl::StatusOr<Catalog> Builtin();
  // Adds or replaces presets from `dir`/{hardware,models,frameworks}/*.yaml.
  absl::Status AddDirectory(const std::string& dir);

  // Lookups by name (the file name without .yaml, case-insensitive). Errors list known names.
  absl::StatusOr<Hardware> FindHardware(const std::string& name) const;
  absl::StatusOr<ModelShape> FindModel(const std::string& name) const;
  // A framework preset with its `base` chain resolved (FrameworkSpec.base: sub-messages set in
  // the preset replace the base's; `defaults` replace by field; sources add up; aliases are the
  // preset's own). NotFound lists the known names; a cycle or unknown base is InvalidArgument.
  absl::StatusOr<v1::FrameworkSpec> FindFramework(const std::string& name) const;
  // The framework preset a free-text description names ("NeMo 24.09 container", "Megatron-LM
  // (2022)", "llm-foundry + Composer"): the name or alias that occurs first in the text as a
  // word sequence (the longer one at the same place). When several presets share that alias
  // (Megatron-LM by era), the one whose from_year..to_year covers `year` wins (the nearest
  // when none does; `year` 0: the latest). NotFound when no preset is named.
  absl::StatusOr<std::string> FrameworkForText(const std::string& text, int year = 0) const;
  // The preset a framework nobody named falls back to (presets/frameworks/generic.yaml).
  static constexpr const char* kGenericFramework = "generic";
  struct FrameworkMatch {
    std::string name;       // the preset
    bool fallback = false;  // the text names no preset: the generic one
  };
  // FrameworkForText, or the generic preset when the text names none (issue 21: a framework
  // nobody named gets a documented generic preset instead of a refusal; the caller records
  // GenericFrameworkAssumed; an empty text names none). InvalidArgument when the text is a near
  // miss of a preset name (edit distance <= 2, e.g. "megatron-cor": a typo, not another
  // framework); NotFound when the catalog has no generic preset.
  absl::StatusOr<FrameworkMatch> FrameworkForTextOrGeneric(const std::string& text, int year = 0) const;
  // The assumed input a fallback records: field "framework", value "generic", the text it
  // replaced and where the generic preset's assumptions are listed.
  static AssumedInput GenericFrameworkAssumed(const std::string& text);
  std::vector<std::string> FrameworkNames() const;
  const std::map<std::string, Hardware>& hardware() const { return hardware_; }
  const std::map<std::string, ModelShape>& models() const { return models_; }

 private:
  absl::Status Add(const std::string& rel_path, const std::string& text);
  std::map<std::string, Hardware> hardware_;
  std::map<std::string, ModelShape> models_;
  std::map<std::string, v1::FrameworkSpec> frameworks_;  // as written (base unresolved)
};

// Core view of one attention kernel of a framework preset; errors name "<path>.rates[i]...".
absl::StatusOr<AttentionKernel> AttentionKernelFromProto(const v1::AttentionKernel& a, const std::string& path);

// Core view of a resolved framework spec. Errors name "<prefix>.<field>" (rates must be > 0,
// efficiencies in [0, 1], ...).
absl::StatusOr<Framework> FrameworkFromProto(const v1::FrameworkSpec& spec, const std::string& prefix);

// The hardware preset for a GPU as drivers and papers name it: "NVIDIA H100 80GB HBM3" and
// "H100 (DGX-H100)" -> "h100-sxm", "NVIDIA H100 PCIe" -> "h100-pcie", "NVIDIA H100 NVL" ->
// "h100-nvl", "NVIDIA A100-SXM4-40GB" -> "a100-40gb", "NVIDIA GH200 480GB" -> "gh200" (not "h200"),
// "NVIDIA H20" -> "h20", "NVIDIA B300 SXM6 AC" -> "b300", "AMD Instinct MI250X" -> "mi250x" (per
// GCD), "NVIDIA L4" -> "l4" (not "L40S"). NotFound, with the reason where one is known, when no
// preset matches (e.g. "NVIDIA H800 PCIe", "NVIDIA H20-3e", "NVIDIA GB300").
absl::StatusOr<std::string> HardwarePresetForGpuName(const std::string& gpu_name);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_CATALOG_H_
