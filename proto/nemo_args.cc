#include "proto/nemo_args.h"

#include <cstring>
#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace stepcast {
namespace {

// A recipe's model and, for NeMo 2, its pretrain defaults.
struct Recipe {
  const char* preset;
  int64_t tp, pp, vpp, cp, ep;
  bool sp;
  int64_t seq, gbs, mbs;
  const char* source;
};

// NeMo 2 pretrain recipes (NVIDIA/NeMo nemo/collections/llm/recipes/): trainer() defaults and
// pretrain_recipe()'s MockDataModule(seq_length, global_batch_size, micro_batch_size).
const std::map<std::string, Recipe>& NemoRecipes() {
  static const std::map<std::string, Recipe> k = {
      {"llama3_8b", {"llama3-8b", 1, 1, 0, 2, 1, false, 8192, 512, 1,
                     "nemo/collections/llm/recipes/llama3_8b.py (commit 00617962): TP1 PP1 CP2, 8192 x 512, mbs 1"}},
      {"llama3_70b", {"llama3-70b", 4, 4, 5, 2, 1, true, 8192, 512, 1,
                      "nemo/collections/llm/recipes/llama3_70b.py: TP4 PP4 VPP5 CP2 SP, 8192 x 512, mbs 1"}},
      {"mixtral_8x7b", {"mixtral-8x7b", 1, 4, 8, 1, 8, false, 4096, 512, 1,
                        "nemo/collections/llm/recipes/mixtral_8x7b.py: TP1 PP4 VPP8 EP8, 4096 x 512, mbs 1"}},
  };
  return k;
}

// Megatron-Bridge recipe names ("<model>_pretrain_config") -> presets.
const std::map<std::string, std::string>& BridgeModels() {
  static const std::map<std::string, std::string> k = {
      {"llama3_8b", "llama3-8b"},       {"llama31_8b", "llama3-8b"},   {"llama3_70b", "llama3-70b"},
      {"llama31_70b", "llama3-70b"},    {"llama31_405b", "llama3-405b"}, {"mixtral_8x7b", "mixtral-8x7b"},
      {"deepseek_v3", "deepseek-v3"},
  };
  return k;
}

absl::Status Bad(const std::string& what, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
}

}  // namespace

bool IsNemoCommand(const std::vector<std::string>& argv) {
  for (const auto& a : argv) {
    if (a == "--factory" || a == "--recipe" || absl::StartsWith(a, "--factory=") || absl::StartsWith(a, "--recipe=")) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<ImportedJob> JobFromNemoCommand(const std::vector<std::string>& argv) {
  ImportedJob out;
  std::string factory, recipe_flag;
  std::vector<std::pair<std::string, std::string>> overrides;
  bool after_program = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    std::string* target = nullptr;
    std::string value;
    if (a == "--factory" || a == "--recipe") {
      target = a == "--factory" ? &factory : &recipe_flag;
      if (i + 1 >= argv.size()) return Bad(a, "needs a value");
      value = argv[++i];
    } else if (absl::StartsWith(a, "--factory=") || absl::StartsWith(a, "--recipe=")) {
      target = absl::StartsWith(a, "--factory=") ? &factory : &recipe_flag;
      value = a.substr(a.find('=') + 1);
    }
    if (target) {
      *target = value;
      after_program = true;
      continue;
    }
    const size_t eq = a.find('=');
    if (after_program && eq != std::string::npos && !absl::StartsWith(a, "-")) {
      overrides.push_back({a.substr(0, eq), a.substr(eq + 1)});
    } else if (after_program || absl::StartsWith(a, "--")) {
      out.ignored.push_back(a);
    }
  }
  const bool nemo = !factory.empty();
  std::string name = nemo ? factory : recipe_flag;
  out.source = nemo ? "nemo" : "megatron-bridge";
  // "llama3_70b(num_nodes=8, name='x')": the factory's arguments are listed.
  if (size_t paren = name.find('('); paren != std::string::npos) {
    out.ignored.push_back(absl::StrCat("--factory ", name, " (the factory's arguments; the GPU count comes from the "
                                       "allocation or --gpus)"));
    name = name.substr(0, paren);
  }
  name = absl::AsciiStrToLower(name);
  for (const char* suffix : {"_pretrain_config", "_finetune_config", "_pretrain", "_finetune"}) {
    if (absl::EndsWith(name, suffix)) name = name.substr(0, name.size() - strlen(suffix));
  }
  v1::TrainingSpec& t = *out.spec.mutable_training();
  v1::ParallelismSpec& p = *out.spec.mutable_parallelism();
  p.set_tp(1), p.set_pp(1), p.set_cp(1), p.set_ep(1);
  t.mutable_precision()->set_params(v1::D_TYPE_BF16);
  t.mutable_precision()->set_gemm(v1::D_TYPE_BF16);
  t.set_sharding(v1::SHARDING_ZERO1);  // distributed_fused_adam (both frameworks' default optimizer)
  if (nemo) {
    auto it = NemoRecipes().find(name);
    if (it == NemoRecipes().end()) {
      std::vector<std::string> known;
      for (const auto& [k, r] : NemoRecipes()) known.push_back(k);
      return Bad("--factory", absl::StrCat("'", name, "' is not a NeMo 2 recipe known here (", absl::StrJoin(known, ", "),
                                           ")"));
    }
    const Recipe& r = it->second;
    out.spec.mutable_model()->set_preset(r.preset);
    p.set_tp(r.tp), p.set_pp(r.pp), p.set_cp(r.cp), p.set_ep(r.ep), p.set_sequence_parallel(r.sp);
    if (r.vpp > 0) p.set_vpp(r.vpp);
    t.set_seq_length(r.seq), t.set_global_batch_size(r.gbs), t.set_micro_batch_size(r.mbs);
  } else {
    auto it = BridgeModels().find(name);
    if (it == BridgeModels().end()) {
      std::vector<std::string> known;
      for (const auto& [k, m] : BridgeModels()) known.push_back(k + "_pretrain_config");
      return Bad("--recipe", absl::StrCat("'", recipe_flag, "' is not a Megatron-Bridge recipe known here (",
                                          absl::StrJoin(known, ", "), ")"));
    }
    out.spec.mutable_model()->set_preset(it->second);
    t.set_micro_batch_size(1);
  }
  for (const auto& kv : overrides) {
    // Named references, not structured bindings: clang 14 cannot capture those in the lambda below.
    const std::string& raw_key = kv.first;
    const std::string& value = kv.second;
    // recipe.model.config.tensor_model_parallel_size -> model.tensor_model_parallel_size.
    std::string key = raw_key;
    if (absl::StartsWith(key, "recipe.")) key = key.substr(7);
    key = absl::StrReplaceAll(key, {{".config.", "."}});
    const std::string field = key.substr(key.rfind('.') + 1);
    const std::string section = key.substr(0, key.find('.'));
    auto as_int = [&](int64_t lo) -> absl::StatusOr<int64_t> {
      int64_t v = 0;
      if (!absl::SimpleAtoi(value, &v) || v < lo || v > (int64_t{1} << 31)) {
        return Bad(raw_key, absl::StrCat("'", value, "' is not an integer >= ", lo));
      }
      return v;
    };
    const bool layout_section = section == "trainer" || section == "model";
    absl::StatusOr<int64_t> v = int64_t{0};
    if (layout_section && field == "tensor_model_parallel_size") { v = as_int(1); if (v.ok()) p.set_tp(*v); }
    else if (layout_section && field == "pipeline_model_parallel_size") { v = as_int(1); if (v.ok()) p.set_pp(*v); }
    else if (layout_section && field == "virtual_pipeline_model_parallel_size") {
      if (value == "null" || value == "None") p.clear_vpp(); else { v = as_int(1); if (v.ok()) p.set_vpp(*v); }
    }
    else if (layout_section && field == "context_parallel_size") { v = as_int(1); if (v.ok()) p.set_cp(*v); }
    else if (layout_section && field == "expert_model_parallel_size") { v = as_int(1); if (v.ok()) p.set_ep(*v); }
    else if (layout_section && field == "expert_tensor_parallel_size") { v = as_int(1); if (v.ok()) p.set_etp(*v); }
    else if (layout_section && field == "sequence_parallel") {
      const std::string b = absl::AsciiStrToLower(value);
      if (b != "true" && b != "false") return Bad(raw_key, absl::StrCat("'", value, "' is not true or false"));
      p.set_sequence_parallel(b == "true");
    }
    else if ((key == "data.seq_length" || key == "dataset.sequence_length" || key == "dataset.seq_length" ||
              key == "model.seq_length")) { v = as_int(1); if (v.ok()) t.set_seq_length(*v); }
    else if (key == "data.global_batch_size" || key == "train.global_batch_size") { v = as_int(1); if (v.ok()) t.set_global_batch_size(*v); }
    else if (key == "data.micro_batch_size" || key == "train.micro_batch_size") { v = as_int(1); if (v.ok()) t.set_micro_batch_size(*v); }
    else if (key == "trainer.max_steps" || key == "train.train_iters") { v = as_int(0); if (v.ok()) t.set_train_iters(*v); }
    else if (field == "recompute_granularity") {
      if (value == "full") t.set_recompute(v1::RECOMPUTE_FULL);
      else if (value == "selective") t.set_recompute(v1::RECOMPUTE_SELECTIVE);
      else if (value == "null" || value == "None") t.set_recompute(v1::RECOMPUTE_NONE);
      else return Bad(raw_key, absl::StrCat("'", value, "' is not full, selective or null"));
    }
    else if ((key == "trainer.plugins" || key == "mixed_precision" || absl::StartsWith(key, "trainer.plugins.fp8") ||
              key == "mixed_precision.fp8") && absl::StrContains(absl::AsciiStrToLower(value), "fp8")) {
      t.mutable_precision()->set_gemm(v1::D_TYPE_FP8);
    }
    else if (key == "trainer.num_nodes" || key == "trainer.devices") {
      out.ignored.push_back(absl::StrCat(raw_key, "=", value, " (the GPU count comes from the allocation or --gpus)"));
    } else {
      out.ignored.push_back(absl::StrCat(raw_key, "=", value));
    }
    if (!v.ok()) return v.status();
  }
  if (t.seq_length() <= 0) return Bad("dataset.sequence_length", "required for a Megatron-Bridge recipe (not known here)");
  if (t.global_batch_size() <= 0) return Bad("train.global_batch_size", "required for a Megatron-Bridge recipe (not known here)");
  return out;
}

}  // namespace stepcast
