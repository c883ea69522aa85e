// File: proto/catalog.h
//
// The preset catalog: hardware, model and framework presets, one YAML file each under presets/
// (compiled into the binary), plus any directory given at run time. Everything that depends only
// on the presets is parsed and resolved once (when the catalog loads, or at a preset's first
// lookup with CatalogLoad::kOnUse) into the core types the model uses: a framework's base chain
// applied, converted to a Framework, its defaults and recipes compiled (ResolvedFramework,
// proto/job_defaults.h). A request only looks them up, by reference (docs/PERFORMANCE.md,
// "The request path").
#ifndef STEPCAST_PROTO_CATALOG_H_
#define STEPCAST_PROTO_CATALOG_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/framework.h"
#include "core/hardware.h"
#include "core/model_shape.h"
#include "proto/job_defaults.h"
#include "stepcast/v1/framework.pb.h"

namespace stepcast {

struct EmbeddedPreset {
  const char* path;  // relative to presets/, e.g. "hardware/h100-sxm.yaml"
  const char* text;
};
const std::vector<EmbeddedPreset>& EmbeddedPresets();

// How much of the catalog is parsed when it is built.
enum class CatalogLoad {
  // Every preset parsed, every framework's base chain resolved, converted and its defaults and
  // recipes compiled, every default checked: a malformed preset fails the load. For a server
  // (`stepcast serve`) and anything that loads once and looks up many times.
  kAll,
  // Each preset parsed (and a framework resolved) at its first lookup, once: a one-shot command
  // (`stepcast predict`) reads the two or three presets its job names, not all of them.
  // Presets added with AddDirectory are still checked when added.
  kOnUse,
};

// The preset catalog. Immutable after AddDirectory; lookups are thread-safe (a preset parsed
// on use is parsed once, under std::call_once). Copies share the parsed presets.
class Catalog {
 public:
  // The compiled-in presets. Fails only if a preset file is malformed (a build defect); with
  // kOnUse it cannot fail (a malformed built-in preset fails its lookups instead, and the tests
  // load every preset with kAll).
  static absl::StatusOr<Catalog> Builtin(CatalogLoad load = CatalogLoad::kAll);
  // Adds or replaces presets from `dir`/{hardware,models,frameworks}/*.yaml. Each file is parsed
  // and checked now (a framework with its base chain, when the base is known), whatever the load.
  absl::Status AddDirectory(const std::string& dir);

  // Lookups by name (the file name without .yaml, case-insensitive). Errors list known names.
  // The pointers live as long as the catalog (or a copy of it).
  absl::StatusOr<const Hardware*> LookupHardware(const std::string& name) const;
  absl::StatusOr<const ModelShape*> LookupModel(const std::string& name) const;
  // The same, copied.
  absl::StatusOr<Hardware> FindHardware(const std::string& name) const;
  absl::StatusOr<ModelShape> FindModel(const std::string& name) const;
  // A framework preset with its `base` chain resolved (FrameworkSpec.base: sub-messages set in
  // the preset replace the base's; `defaults` replace by field; sources add up; aliases are the
  // preset's own). NotFound lists the known names; a cycle or unknown base is InvalidArgument.
  absl::StatusOr<v1::FrameworkSpec> FindFramework(const std::string& name) const;
  // The same by reference (resolved once).
  absl::StatusOr<const v1::FrameworkSpec*> FindFrameworkSpec(const std::string& name) const;
  // The same, converted and compiled (ResolvedFramework: the core Framework, compiled defaults and
  // recipes). Errors as FindFramework; a preset that does not convert has it in `status`.
  absl::StatusOr<const ResolvedFramework*> LookupFramework(const std::string& name) const;
  // The framework preset a free-text description names ("NeMo 24.09 container", "Megatron-LM
  // (2022)", "llm-foundry + Composer"): the name or alias that occurs first in the text as a
  // word sequence (the longer one at the same place). When several presets share that alias
  // (Megatron-LM by era), the one whose from_year..to_year covers `year` wins (the nearest
  // when none does; `year` 0: the latest). When one preset holds that alias, a preset derived
  // from it (`base:`) whose alias extends the matched alias with words of its own wins where the
  // text states those words later, in order, not negated ("no", "not", "without", "non" within
  // the two words before and the same clause, "w/o" before; "off", "disabled", "false" right
  // after): "torchtitan with torch.compile" -> torchtitan-compile (alias "torchtitan
  // (torch.compile)"), "torchtitan without torch.compile" -> torchtitan, "PyTorch FSDP1
  // (migrating to FSDP2)" -> pytorch-fsdp1 ("PyTorch FSDP2" does not extend "PyTorch FSDP1").
  // NotFound when no preset is named; InvalidArgument when the text states the words of two
  // derived presets.
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
  // framework) and FrameworkForText's InvalidArgument (two derived presets stated); NotFound when
  // the catalog has no generic preset.
  absl::StatusOr<FrameworkMatch> FrameworkForTextOrGeneric(const std::string& text, int year = 0) const;
  // The assumed input a fallback records: field "framework", value "generic", the text it
  // replaced and where the generic preset's assumptions are listed.
  static AssumedInput GenericFrameworkAssumed(const std::string& text);
  std::vector<std::string> FrameworkNames() const;
  // Every hardware / model preset (with kOnUse: parsed at the first call; a built-in preset that
  // does not parse is left out).
  const std::map<std::string, Hardware>& hardware() const;
  const std::map<std::string, ModelShape>& models() const;

 private:
  struct Preset;     // one preset file: origin, text, the value parsed from it (once)
  struct Resolved;   // one framework's base chain resolved and compiled (once)
  struct Listing;    // hardware() and models(), filled once
  using Presets = std::map<std::string, std::shared_ptr<Preset>>;

  absl::Status Add(const std::string& rel_path, absl::string_view text, std::shared_ptr<const std::string> owned);
  const Preset* Parsed(const Presets& presets, const std::string& lower_name) const;  // null: no such preset
  const Resolved& ResolvedEntry(const std::string& lower_name) const;
  // Fresh resolution entries and listings after the presets changed.
  void Invalidate();
  // Parses, resolves and checks `names` of frameworks (all when null), and every hardware and
  // model preset when `all`; the first error, naming the preset file.
  absl::Status Check(const std::vector<std::string>* frameworks, bool all) const;

  Presets hardware_, models_, frameworks_;
  std::map<std::string, std::shared_ptr<Resolved>> resolved_;
  std::shared_ptr<Listing> listing_;
};

// Core view of one attention kernel of a framework preset; errors name "<path>.rates[i]...".
absl::StatusOr<AttentionKernel> AttentionKernelFromProto(const v1::AttentionKernel& a, const std::string& path);

// Core view of a resolved framework spec. Errors name "<prefix>.<field>" (rates must be > 0,
// efficiencies in [0, 1], ...).
absl::StatusOr<Framework> FrameworkFromProto(const v1::FrameworkSpec& spec, const std::string& prefix);

// The hardware preset for a GPU as drivers and papers name it: "NVIDIA H100 80GB HBM3" and
// "H100 (DGX-H100)" -> "h100-sxm", "NVIDIA H100 PCIe" -> "h100-pcie", "NVIDIA H100 NVL" ->
// "h100-nvl", "NVIDIA A100-SXM4-40GB" -> "a100-40gb", "NVIDIA GH200 480GB" -> "gh200" (not "h200"),
// "NVIDIA H20" -> "h20", "NVIDIA B300 SXM6 AC" -> "b300", "NVIDIA GB300" -> "gb300" (not "b300"),
// "AMD Instinct MI250X" -> "mi250x" (per GCD), "NVIDIA L4" -> "l4" (not "L40S"). NotFound, with the
// reason where one is known, when no preset matches (e.g. "NVIDIA H800 PCIe", "NVIDIA H20-3e"). A named form factor wins:
// "SXM" -> the SXM preset even when the text also says NVL; the NVL preset only when NVL is named
// and SXM is not; SXM and PCIe both named is refused. A stated per-GPU memory size (a number with
// GB / GiB / G, at most 200) other than the preset's is refused with the sizes the presets have:
// "H100 96GB", "H100 HBM2e" (not PCIe), "H200 96GB", "A100 64GB"; "H100 SXM 96GB HBM2e" is the
// 500 W Grand Teton part ("h100-sxm-96gb").
absl::StatusOr<std::string> HardwarePresetForGpuName(const std::string& gpu_name);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_CATALOG_H_
