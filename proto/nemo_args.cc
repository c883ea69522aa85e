// NeMo 2 and Megatron-Bridge launch lines (proto/nemo_args.h).
#include "proto/nemo_args.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "toml++/toml.h"
#include "core/job.h"
#include "proto/catalog.h"
#include "proto/launch_data.h"
#include "proto/torchtitan_args.h"

namespace stepcast {
namespace {

constexpr char kBridgeCommit[] = "067f987df03b8355b03192d88d70f1709fedf51a";
constexpr char kNemoCommit[] = "8cfedd7203462cb251a914e700e5605444277561";

absl::Status Bad(const std::string& what, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
}

// One of the recipe tables (presets/launchers/megatron-bridge.toml or nemo.toml), parsed once.
const toml::table& RecipeTable(const char* file) {
  static std::map<std::string, toml::table>* const kTables = new std::map<std::string, toml::table>;
  auto it = kTables->find(file);
  if (it != kTables->end()) return it->second;
  toml::table t;
  if (const char* text = LaunchDataFile(file)) {
    try {
      t = toml::parse(std::string_view(text), std::string_view(file));
    } catch (const toml::parse_error&) {
      // A build defect (the file is generated); the recipes then read as unknown.
    }
  }
  return (*kTables)[file] = std::move(t);
}

bool HasPresetFile(const std::string& preset) {
  for (const EmbeddedPreset& e : EmbeddedPresets()) {
    if (std::string(e.path) == absl::StrCat("models/", preset, ".yaml")) return true;
  }
  return false;
}

// Kimi K2 (moonshotai/Kimi-K2-Instruct config.json; arXiv:2507.20534 Table 2): DeepSeek-V3's
// architecture with 61 layers, hidden 7168, 64 heads, MLA (q_lora 1536, kv_lora 512, qk 128 +
// 64 rope, v 128), 384 routed experts top-8 of 2048 plus one shared, the first layer dense
// (18432), vocabulary 163,840.
v1::ModelShape KimiK2Shape() {
  v1::ModelShape m;
  m.set_name("kimi-k2");
  m.set_source("moonshotai/Kimi-K2-Instruct config.json; arXiv:2507.20534 Table 2");
  m.set_layers(61);
  m.set_hidden_size(7168);
  m.set_attention_heads(64);
  m.set_kv_heads(64);
  m.set_ffn_hidden_size(18432);
  m.set_ffn_type(v1::FFN_TYPE_SWIGLU);
  m.set_norm_type(v1::NORM_TYPE_RMSNORM);
  m.set_vocab_size(163840);
  m.set_tied_embeddings(false);
  v1::MlaShape& mla = *m.mutable_mla();
  mla.set_q_lora_rank(1536);
  mla.set_kv_lora_rank(512);
  mla.set_qk_nope_head_dim(128);
  mla.set_qk_rope_head_dim(64);
  mla.set_v_head_dim(128);
  v1::MoeShape& moe = *m.mutable_moe();
  moe.set_routed_experts(384);
  moe.set_top_k(8);
  moe.set_expert_ffn_hidden_size(2048);
  moe.set_shared_experts(1);
  moe.set_shared_expert_ffn_hidden_size(2048);
  moe.set_first_dense_layers(1);
  return m;
}

// The model a recipe names: its Hugging Face id (Megatron-Bridge's AutoBridge.from_hf_pretrained),
// its provider class, or its NeMo 2 config class / NAME. A preset, a torchtitan flavor's shape
// (the same released models), or a refusal saying why the model is not expressible.
absl::StatusOr<v1::ModelSpec> RecipeModel(const std::string& id) {
  v1::ModelSpec out;
  const std::string l = absl::AsciiStrToLower(id);
  auto preset = [&](const char* p) {
    out.set_preset(p);
    return out;
  };
  auto flavor = [&](const char* module, const char* f) { return TorchtitanFlavorModel(module, f); };
  // Nemotron-H hybrids: the family's presets (presets/architectures/nemotron_h.yaml) by the
  // recipe's or provider's name (Megatron-Bridge recipes/nemotronh/: nemotronh_8b, nemotron_3_nano,
  // nemotron_nano_9b_v2; providers NemotronHModelProvider56B, Nemotron3NanoProvider; HF ids
  // NVIDIA-Nemotron-3-Nano-30B-A3B-BF16, Nemotron-H-8B-Base-8K), Nemotron 3 Super / Ultra (latent
  // MoE, MTP), Nemotron 3.5 Lightning. Other Mamba hybrids and a bare HybridModelProvider are
  // refused.
  // Not a bare "nemotron3" / "nemotron-3": NeMo 2's attention-only Nemotron-3 (2023) recipes are
  // nemotron3_4b / _8b / _22b (Nemotron3Config8B(NemotronConfig)), its HF ids nemotron-3-8b-*.
  bool nemotron_h_family = false;
  for (const char* k : {"nemotronh", "nemotron-h", "nemotron_h", "nemotron_nano", "nemotron-nano", "nemotronnano",
                        "nemotron_3_nano", "nemotron-3-nano", "nemotron3nano", "nemotron_3_super", "nemotron-3-super",
                        "nemotron3super", "nemotron_3_ultra", "nemotron-3-ultra", "nemotron3ultra", "nemotron_3_5",
                        "nemotron-3.5", "nemotron-3-5"}) {
    nemotron_h_family = nemotron_h_family || absl::StrContains(l, k);
  }
  // NVIDIA's Llama-Nemotron models (llama31_nemotron_nano_8b, Llama31NemotronNano8BConfig) are
  // Llama 3.1 transformers, not hybrids.
  if (absl::StrContains(l, "llama")) nemotron_h_family = false;
  if (nemotron_h_family) {
    // Nemotron 3 Super / Ultra (latent MoE, MTP) and 3.5 Lightning: their presets since the twelfth
    // session.
    // Not a bare "3.5": Nano's "30B-A3.5B" has one.
    bool three_five = absl::StrContains(l, "lightning");
    for (const char* k : {"nemotron_3_5", "nemotron-3.5", "nemotron_3.5", "nemotron3.5", "nemotron-3-5", "nemotron3_5"}) {
      three_five = three_five || absl::StrContains(l, k);
    }
    // Nemotron 3.5 Lightning: the Nano recipe's model with an MTP module
    // (perf_recipes/nemotronh/gb200/nemotronh.py nemotron_3_5_lightning_*).
    if (three_five) return preset("nemotron-3.5-lightning-30b-a3b");
    if (!three_five && absl::StrContains(l, "super")) return preset("nemotron-3-super-120b-a12b");
    if (!three_five && absl::StrContains(l, "ultra")) return preset("nemotron-3-ultra-550b-a55b");
    if (!three_five) {
      struct Named {
        const char* key;
        const char* preset;
      };
      // The most specific first: Nano 4B before Nano 30B, sizes after the Nano names.
      for (const Named& n : {Named{"nano_4b", "nemotron-3-nano-4b"}, {"nano-4b", "nemotron-3-nano-4b"},
                             {"nano4b", "nemotron-3-nano-4b"}, {"3_nano", "nemotron-3-nano-30b-a3b"},
                             {"3-nano", "nemotron-3-nano-30b-a3b"}, {"3nano", "nemotron-3-nano-30b-a3b"},
                             {"12b", "nemotron-nano-12b-v2"}, {"9b", "nemotron-nano-9b-v2"}, {"56b", "nemotron-h-56b"},
                             {"47b", "nemotron-h-47b"}, {"8b", "nemotron-h-8b"}, {"4b", "nemotron-h-4b"}}) {
        if (absl::StrContains(l, n.key)) return preset(n.preset);
      }
    }
  }
  if (nemotron_h_family || absl::StrContains(l, "hybridmodelprovider") || absl::StrContains(l, "mamba")) {
    return absl::InvalidArgumentError(absl::StrCat(
        id, ": a Mamba model without a preset here (NeMo's mamba2_* and Mamba-2-Hybrid configs, a hybrid it describes "
            "but has no preset for: "
            "give the shape, e.g. as the Megatron-LM line; Nemotron-H presets: ",
        "nemotron-h-4b/8b/47b/56b, nemotron-nano-9b-v2/12b-v2, nemotron-3-nano-4b/30b-a3b, nemotron-3-super-120b-a12b, "
        "nemotron-3-ultra-550b-a55b, nemotron-3.5-lightning-30b-a3b)"));
  }
  if (absl::StrContains(l, "-vl-") || absl::StrContains(l, "_vl_") || absl::StrContains(l, "-vl") ||
      absl::StrContains(l, "vlm")) {
    return absl::InvalidArgumentError(absl::StrCat(id, ": a vision-language model; the vision tower is not modelled"));
  }
  if (absl::StrContains(l, "qwen3-next") || absl::StrContains(l, "qwen3_next") || absl::StrContains(l, "qwen35") ||
      absl::StrContains(l, "qwen3.5")) {
    return absl::InvalidArgumentError(absl::StrCat(id, ": Gated DeltaNet (linear attention) layers, not modelled"));
  }
  // Llama 3 / 3.1.
  for (const char* k : {"meta-llama-3-8b", "meta-llama-3.1-8b", "llama-3.1-8b", "llama3config8b", "llama31config8b",
                        "llama31_8b", "llama3_8b"}) {
    if (absl::StrContains(l, k)) return preset("llama3-8b");
  }
  for (const char* k : {"meta-llama-3-70b", "meta-llama-3.1-70b", "llama-3.1-70b", "llama3config70b",
                        "llama31config70b", "llama31_70b", "llama3_70b"}) {
    if (absl::StrContains(l, k)) return preset("llama3-70b");
  }
  for (const char* k : {"meta-llama-3.1-405b", "llama-3.1-405b", "llama31config405b", "llama31_405b"}) {
    if (absl::StrContains(l, k)) return preset("llama3-405b");
  }
  if (absl::StrContains(l, "llama-3.2-1b") || absl::StrContains(l, "llama32config1b") || absl::StrContains(l, "llama32_1b")) {
    return flavor("llama3", "1B");
  }
  if (absl::StrContains(l, "llama-3.2-3b") || absl::StrContains(l, "llama32config3b") || absl::StrContains(l, "llama32_3b")) {
    return flavor("llama3", "3B");
  }
  if (absl::StrContains(l, "llama4experts16") || absl::StrContains(l, "llama-4-scout")) return flavor("llama4", "17bx16e");
  if (absl::StrContains(l, "llama4experts128") || absl::StrContains(l, "llama-4-maverick")) return flavor("llama4", "17bx128e");
  // DeepSeek.
  if (absl::StrContains(l, "deepseek-v3") || l == "deepseekv3config") return preset("deepseek-v3");
  if ((absl::StrContains(l, "deepseek-v2") && !absl::StrContains(l, "lite")) || l == "deepseekv2config") {
    return flavor("deepseek_v3", "236B");
  }
  if (absl::StrContains(l, "mixtralconfig8x7b") || absl::StrContains(l, "mixtral-8x7b")) return preset("mixtral-8x7b");
  if (absl::StrContains(l, "gptconfig175b") || l == "gpt3_175b") return preset("gpt3-175b");
  // Qwen3 (dense and MoE): the released shapes (torchtitan's qwen3 flavors).
  static const std::vector<std::pair<const char*, const char*>> kQwen3 = {
      {"qwen3-235b-a22b", "235B-A22B"}, {"qwen3_235b_a22b", "235B-A22B"}, {"qwen3-30b-a3b", "30B-A3B"},
      {"qwen3_30b_a3b", "30B-A3B"},     {"qwen3-0.6b", "0.6B"},           {"qwen3_600m", "0.6B"},
      {"qwen3-1.7b", "1.7B"},           {"qwen3_1p7b", "1.7B"},           {"qwen3-4b", "4B"},
      {"qwen3_4b", "4B"},               {"qwen3-8b", "8B"},               {"qwen3_8b", "8B"},
      {"qwen3-14b", "14B"},             {"qwen3_14b", "14B"},             {"qwen3-32b", "32B"},
      {"qwen3_32b", "32B"}};
  for (const auto& [k, f] : kQwen3) {
    if (absl::StrContains(l, k)) return flavor("qwen3", f);
  }
  if (absl::StrContains(l, "gpt-oss-120b") || absl::StrContains(l, "gptossconfig120b") || absl::StrContains(l, "gpt_oss_120b")) {
    return flavor("gpt_oss", "120b");
  }
  if (absl::StrContains(l, "gpt-oss-20b") || absl::StrContains(l, "gptossconfig20b") || absl::StrContains(l, "gpt_oss_20b")) {
    return flavor("gpt_oss", "20b");
  }
  if (absl::StrContains(l, "kimi-k2") || absl::StrContains(l, "kimik2")) {
    if (HasPresetFile("kimi-k2")) return preset("kimi-k2");
    *out.mutable_shape() = KimiK2Shape();
    return out;
  }
  return absl::NotFoundError(absl::StrCat(id, ": a model stepcast has no shape for here"));
}

// A TOML value as override text ("8", "true", "selective", "[a, b]"); "None" for a missing one.
std::string TomlText(const toml::node* n) {
  if (!n) return "None";
  if (const auto* b = n->as_boolean()) return b->get() ? "true" : "false";
  if (const auto* i = n->as_integer()) return absl::StrCat(i->get());
  if (const auto* f = n->as_floating_point()) return absl::StrCat(f->get());
  if (const auto* s = n->as_string()) return s->get();
  if (const toml::array* a = n->as_array()) {
    std::vector<std::string> parts;
    for (const auto& e : *a) parts.push_back(TomlText(&e));
    return absl::StrJoin(parts, ",");
  }
  return "None";
}

bool IsNone(const std::string& v) { return v == "None" || v == "null" || v == "none" || v == "~" || v.empty(); }

// The items of a Python list as a recipe or override writes it ("['attn', 'mlp']", "[CudaGraphScope.attn]",
// "moe_act,expert_fc1"): brackets and quotes dropped, split at commas and spaces, an enum's
// "Name." prefix removed.
std::vector<std::string> PythonListItems(std::string text) {
  for (char& c : text) {
    if (c == '[' || c == ']' || c == '\'' || c == '"') c = ' ';
  }
  std::vector<std::string> items;
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    if (const size_t dot = part.rfind('.'); dot != absl::string_view::npos) part.remove_prefix(dot + 1);
    items.emplace_back(part);
  }
  return items;
}

// The values of a recipe (or the command line's overrides of them) by their ConfigContainer /
// NeMo-Run paths.
using Values = std::map<std::string, std::string>;

void Flatten(const toml::table& t, const std::string& prefix, Values& out) {
  for (const auto& [k, v] : t) {
    const std::string path = prefix.empty() ? std::string(k.str()) : absl::StrCat(prefix, ".", std::string(k.str()));
    if (const toml::table* sub = v.as_table()) Flatten(*sub, path, out);
    else out[path] = TomlText(&v);
  }
}

// Canonical path of an override key: a leading "recipe." and any ".config." dropped, NeMo's
// dataset seq key names unified.
std::string CanonicalKey(std::string key) {
  if (absl::StartsWith(key, "recipe.")) key = key.substr(7);
  key = absl::StrReplaceAll(key, {{".config.", "."}});
  if (key == "dataset.sequence_length") key = "dataset.seq_length";
  return key;
}

}  // namespace

bool IsNemoCommand(const std::vector<std::string>& argv) {
  bool run_recipe = false;
  for (const auto& a : argv) {
    if (a == "--factory" || a == "--recipe" || absl::StartsWith(a, "--factory=") || absl::StartsWith(a, "--recipe=")) {
      return true;
    }
    run_recipe = run_recipe || absl::EndsWith(a, "run_recipe.py");
  }
  // Megatron-Bridge's run_recipe.py --model STEM --mode pretrain.
  if (run_recipe) {
    for (const auto& a : argv) {
      if (a == "--model" || absl::StartsWith(a, "--model=")) return true;
    }
  }
  return false;
}

namespace {

// run_recipe.py's convenience options (scripts/training/run_recipe.py _build_parser at
// kBridgeCommit) and the ConfigContainer override they stand for.
const std::map<std::string, std::string>& RunRecipeShortOptions() {
  static const std::map<std::string, std::string> kShort = {
      {"-ms", "train.train_iters"},
      {"--max_steps", "train.train_iters"},
      {"-gb", "train.global_batch_size"},
      {"--global_batch_size", "train.global_batch_size"},
      {"-mb", "train.micro_batch_size"},
      {"--micro_batch_size", "train.micro_batch_size"},
      {"-sl", "dataset.seq_length"},
      {"--seq_length", "dataset.seq_length"},
      {"-tp", "model.tensor_model_parallel_size"},
      {"--tensor_model_parallel_size", "model.tensor_model_parallel_size"},
      {"-pp", "model.pipeline_model_parallel_size"},
      {"--pipeline_model_parallel_size", "model.pipeline_model_parallel_size"},
      {"-cp", "model.context_parallel_size"},
      {"--context_parallel_size", "model.context_parallel_size"},
      {"-vp", "model.virtual_pipeline_model_parallel_size"},
      {"--virtual_pipeline_model_parallel_size", "model.virtual_pipeline_model_parallel_size"},
      {"-ep", "model.expert_model_parallel_size"},
      {"--expert_model_parallel_size", "model.expert_model_parallel_size"},
      {"-etp", "model.expert_tensor_parallel_size"},
      {"--expert_tensor_parallel_size", "model.expert_tensor_parallel_size"}};
  return kShort;
}

// What a NeMo 2 (nemo llm pretrain --factory) or Megatron-Bridge (run_recipe.py --recipe, or
// --model STEM --mode) line says.
struct NemoLine {
  std::string factory, recipe_flag, model_stem, mode;
  std::vector<std::pair<std::string, std::string>> overrides;        // KEY=VALUE, in order
  std::vector<std::pair<std::string, std::string>> short_overrides;  // applied before KEY=VALUE ones
};

// Reads argv[start...] (after the launchers, whose own flags are not the recipe's): the recipe
// options, run_recipe.py's short options and the KEY=VALUE overrides after the program's
// --factory/--recipe/--model (NeMo-Run and run_recipe.py's override syntax); flags go to
// out.flags, the rest to out.ignored.
absl::Status ParseNemoLine(const std::vector<std::string>& argv, size_t start, NemoLine& line, ImportedJob& out) {
  const std::map<std::string, std::string>& kShort = RunRecipeShortOptions();
  bool after_program = false;
  for (size_t i = start; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    std::string* target = nullptr;
    std::string value;
    if (a == "--factory" || a == "--recipe" || a == "--model" || a == "--mode") {
      target = a == "--factory" ? &line.factory : a == "--recipe" ? &line.recipe_flag : a == "--model" ? &line.model_stem : &line.mode;
      if (i + 1 >= argv.size()) return Bad(a, "needs a value");
      value = argv[++i];
    } else if (absl::StartsWith(a, "--factory=") || absl::StartsWith(a, "--recipe=") || absl::StartsWith(a, "--model=") ||
               absl::StartsWith(a, "--mode=")) {
      target = absl::StartsWith(a, "--factory=") ? &line.factory
               : absl::StartsWith(a, "--recipe=") ? &line.recipe_flag
               : absl::StartsWith(a, "--model=")  ? &line.model_stem
                                                  : &line.mode;
      value = a.substr(a.find('=') + 1);
    }
    if (target) {
      *target = value;
      if (target != &line.mode) after_program = true;
      continue;
    }
    const std::string name = a.substr(0, a.find('='));
    if (after_program && kShort.count(name)) {
      std::string v;
      if (a.find('=') != std::string::npos) v = a.substr(a.find('=') + 1);
      else if (i + 1 < argv.size()) v = argv[++i];
      line.short_overrides.push_back({kShort.at(name), v});
      out.flags.push_back(name);
      continue;
    }
    const size_t eq = a.find('=');
    if (after_program && eq != std::string::npos && !absl::StartsWith(a, "-")) {
      line.overrides.push_back({a.substr(0, eq), a.substr(eq + 1)});
      out.flags.push_back(CanonicalKey(a.substr(0, eq)));
    } else if (after_program || absl::StartsWith(a, "--")) {
      out.ignored.push_back(a);
    }
  }
  return absl::OkStatus();
}

// The recipe's values (presets/launchers/nemo.toml for a NeMo 2 factory, megatron-bridge.toml for
// a Megatron-Bridge recipe; read from the recipe files at kNemoCommit / kBridgeCommit) into
// `values`; returns the model id the recipe names (its config class, HF id or provider). An
// unknown recipe is an error listing the known ones (or this model's).
absl::StatusOr<std::string> LoadRecipeValues(bool nemo, const std::string& name, const std::string& recipe_flag,
                                             Values& values) {
  std::string model_id;
  if (nemo) {
    std::string key = absl::AsciiStrToLower(name);
    for (const char* suffix : {"_pretrain", "_pretrain_recipe"}) {
      if (absl::EndsWith(key, suffix)) key = key.substr(0, key.size() - strlen(suffix));
    }
    const toml::table* r = RecipeTable("launchers/nemo.toml")[key].as_table();
    if (!r) {
      std::vector<std::string> known;
      for (const auto& [k, v] : RecipeTable("launchers/nemo.toml")) known.push_back(std::string(k.str()));
      return Bad("--factory", absl::StrCat("'", name, "' is not a NeMo 2 pre-training recipe (",
                                           "nemo/collections/llm/recipes at NVIDIA/NeMo ",
                                           std::string(kNemoCommit).substr(0, 8), ": ", absl::StrJoin(known, ", "), ")"));
    }
    Flatten(*r, "", values);
    model_id = values["model.config"];
  } else {
    const std::string key = absl::AsciiStrToLower(name);
    const toml::table* r = RecipeTable("launchers/megatron-bridge.toml")[key].as_table();
    if (!r) {
      // The names of the same model, to say what exists.
      std::vector<std::string> near;
      const std::string stem = key.substr(0, key.find("_pretrain"));
      for (const auto& [k, v] : RecipeTable("launchers/megatron-bridge.toml")) {
        if (absl::StartsWith(std::string(k.str()), stem + "_pretrain") && near.size() < 12) near.push_back(std::string(k.str()));
      }
      return Bad("--recipe",
                 absl::StrCat("'", recipe_flag, "' is not a Megatron-Bridge pre-training recipe (",
                              "src/megatron/bridge/recipes and perf_recipes at NVIDIA-NeMo/Megatron-Bridge ",
                              std::string(kBridgeCommit).substr(0, 8), ")",
                              near.empty() ? "" : absl::StrCat("; recipes of this model: ", absl::StrJoin(near, ", "))));
    }
    Flatten(*r, "", values);
    model_id = values.count("model._hf_model") ? values["model._hf_model"] : values["model._provider"];
    if (values["model._provider"] == "GPTModelProvider" && absl::StrContains(values["source"], "gpt3_175b")) {
      model_id = "gpt3_175b";
    }
    // The Nemotron-H recipes build a generic HybridModelProvider(...) (recipes/nemotronh/ @067f987):
    // the recipe's name says which model.
    if (values["model._provider"] == "HybridModelProvider" && !values.count("model._hf_model")) {
      model_id = recipe_flag;
    }
  }
  return model_id;
}

// The layout fields (NeMo's MegatronStrategy trainer.strategy.*, Megatron-Bridge's model.*).
bool IsLayoutLeaf(const std::string& leaf) {
  static const std::set<std::string> kLayout = {
      "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
      "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size", "sequence_parallel"};
  return kLayout.count(leaf) > 0;
}

// Lays the overrides over the recipe's values: the runner's short options first, then KEY=VALUE
// (run_recipe.py: the trailing KEY=VALUE wins where both set a field), each at the one path the
// job reads it from (`prefix` + a layout field, the framework's sequence-length key).
void ApplyNemoOverrides(const NemoLine& line, bool nemo, const std::string& prefix, Values& values) {
  for (const auto& [k, v] : line.short_overrides) values[k] = v;
  for (const auto& kv : line.overrides) {
    const std::string key = CanonicalKey(kv.first);
    std::string field = key;
    // NeMo's MegatronStrategy fields may also be written on model.* (and Bridge's on trainer.*):
    // one place each.
    const std::string leaf = key.substr(key.rfind('.') + 1);
    if (IsLayoutLeaf(leaf) && (absl::StartsWith(key, "trainer.") || absl::StartsWith(key, "model."))) {
      field = prefix + leaf;
    }
    if (nemo && (key == "data.seq_length" || key == "model.seq_length")) field = "data.seq_length";
    if (!nemo && (key == "dataset.seq_length" || key == "model.seq_length")) field = "dataset.seq_length";
    values[field] = kv.second;
  }
}

// Lists in out.ignored the KEY=VALUE overrides the job does not read (the GPU count ones saying
// where the count comes from).
void ListUnreadOverrides(const NemoLine& line, ImportedJob& out) {
  for (const auto& kv : line.overrides) {
    const std::string key = CanonicalKey(kv.first);
    const std::string leaf = key.substr(key.rfind('.') + 1);
    const bool read =
        IsLayoutLeaf(leaf) || key == "data.seq_length" || key == "dataset.seq_length" || key == "model.seq_length" ||
        key == "data.global_batch_size" || key == "train.global_batch_size" || key == "data.micro_batch_size" ||
        key == "train.micro_batch_size" || key == "trainer.max_steps" || key == "train.train_iters" ||
        leaf == "recompute_granularity" || leaf == "recompute_modules" || key == "trainer.plugins" ||
        key == "mixed_precision" || absl::StartsWith(key, "mixed_precision.") || key == "ddp.use_distributed_optimizer" ||
        key == "ddp.use_megatron_fsdp" || key == "ddp.data_parallel_sharding_strategy" || key == "ddp.overlap_grad_reduce" ||
        key == "ddp.grad_reduce_in_fp32" || key == "comm_overlap.tp_comm_overlap" || leaf == "cuda_graph_impl" ||
        leaf == "cuda_graph_scope" ||
        (!absl::StartsWith(key, "trainer.") &&
         (leaf == "mtp_num_layers" || leaf == "moe_token_dispatcher_type" || leaf == "moe_flex_dispatcher_backend" ||
          leaf == "moe_expert_capacity_factor" || leaf == "moe_pad_expert_input_to_capacity" ||
          leaf == "moe_router_fusion" ||
          leaf == "fine_grained_activation_offloading" || leaf == "offload_modules"));
    if (key == "trainer.num_nodes" || key == "trainer.devices") {
      out.ignored.push_back(absl::StrCat(kv.first, "=", kv.second, " (the GPU count comes from the allocation or --gpus)"));
    } else if (!read) {
      out.ignored.push_back(absl::StrCat(kv.first, "=", kv.second));
    }
  }
}

// Typed reads of the recipe's values with the overrides laid over them; an error names the
// override key the user wrote (else the field's path).
class NemoValues {
 public:
  NemoValues(const Values& values, const NemoLine& line) : values_(values), line_(line) {}
  const Values& all() const { return values_; }
  bool Has(const std::string& k) const { return values_.count(k) > 0; }
  // The value's text; "None" when neither the recipe nor an override sets it.
  std::string Get(const std::string& k) const {
    auto it = values_.find(k);
    return it == values_.end() ? "None" : it->second;
  }
  // The override key the user wrote for a field, for errors.
  std::string SourceOf(const std::string& k) const {
    for (const auto& kv : line_.overrides) {
      if (CanonicalKey(kv.first) == k || absl::EndsWith(CanonicalKey(kv.first), k.substr(k.rfind('.')))) return kv.first;
    }
    return k;
  }
  absl::StatusOr<int64_t> Int(const std::string& k, int64_t fallback, int64_t lo) const {
    const std::string v = Get(k);
    if (IsNone(v)) return fallback;
    int64_t x = 0;
    if (!absl::SimpleAtoi(v, &x) || x < lo || x > kMaxLaunchSize) {
      return Bad(SourceOf(k), absl::StrCat("'", v, "' is not an integer >= ", lo));
    }
    return x;
  }
  absl::StatusOr<bool> Bool(const std::string& k, bool fallback) const {
    const std::string v = absl::AsciiStrToLower(Get(k));
    if (IsNone(v)) return fallback;
    if (v != "true" && v != "false") return Bad(SourceOf(k), absl::StrCat("'", Get(k), "' is not true or false"));
    return v == "true";
  }

 private:
  const Values& values_;
  const NemoLine& line_;
};

#define NEMO_INT(var, key, fallback, lo)      \
  int64_t var = 0;                            \
  {                                           \
    auto _v = v.Int(key, fallback, lo);       \
    if (!_v.ok()) return _v.status();         \
    var = *_v;                                \
  }
#define NEMO_BOOL(var, key, fallback)         \
  bool var = false;                           \
  {                                           \
    auto _v = v.Bool(key, fallback);          \
    if (!_v.ok()) return _v.status();         \
    var = *_v;                                \
  }

// The layout (`prefix`: trainer.strategy. for NeMo's MegatronStrategy, model. for Megatron-Bridge)
// and the batch and run length (NeMo's data.* / trainer.max_steps, Bridge's dataset.* / train.*);
// the sequence length and global batch are required of the recipe.
absl::Status SetNemoLayoutAndBatch(const NemoValues& v, bool nemo, const std::string& prefix,
                                   const std::string& recipe_source, v1::ParallelismSpec& p, v1::TrainingSpec& t) {
  NEMO_INT(tp, prefix + "tensor_model_parallel_size", 1, 1);
  NEMO_INT(pp, prefix + "pipeline_model_parallel_size", 1, 1);
  NEMO_INT(vpp, prefix + "virtual_pipeline_model_parallel_size", 0, 1);
  NEMO_INT(cp, prefix + "context_parallel_size", 1, 1);
  NEMO_INT(ep, prefix + "expert_model_parallel_size", 1, 1);
  NEMO_INT(etp, prefix + "expert_tensor_parallel_size", 0, 1);
  NEMO_BOOL(sp, prefix + "sequence_parallel", false);
  p.set_tp(tp), p.set_pp(pp), p.set_cp(cp), p.set_ep(ep), p.set_sequence_parallel(sp);
  if (vpp > 0) p.set_vpp(vpp);
  if (etp > 0) p.set_etp(etp);
  const std::string seq_key = nemo ? "data.seq_length" : "dataset.seq_length";
  NEMO_INT(seq, seq_key, 0, 1);
  NEMO_INT(gbs, nemo ? "data.global_batch_size" : "train.global_batch_size", 0, 1);
  NEMO_INT(mbs, nemo ? "data.micro_batch_size" : "train.micro_batch_size", 1, 1);
  if (!nemo && seq == 0) {
    NEMO_INT(model_seq, "model.seq_length", 0, 1);
    seq = model_seq;
  }
  if (seq <= 0) return Bad(seq_key, absl::StrCat("required: the recipe (", recipe_source, ") does not set it"));
  if (gbs <= 0) {
    return Bad(nemo ? "data.global_batch_size" : "train.global_batch_size",
               absl::StrCat("required: the recipe (", recipe_source, ") does not set it"));
  }
  t.set_seq_length(seq), t.set_global_batch_size(gbs), t.set_micro_batch_size(mbs);
  for (const char* k : {"trainer.max_steps", "train.train_iters"}) {
    NEMO_INT(steps, k, 0, 0);
    if (steps > 0) t.set_train_iters(steps);
  }
  return absl::OkStatus();
}

// Precision: the recipe's mixed-precision config (bf16_mixed, bf16_with_fp8_*_mixed,
// bf16_with_mxfp8_mixed; NeMo's trainer.plugins) or an override naming one; NVFP4 is refused.
absl::Status SetNemoPrecision(const NemoValues& v, bool nemo, v1::TrainingSpec& t, std::vector<std::string>& ignored) {
  t.mutable_precision()->set_params(v1::D_TYPE_BF16);
  t.mutable_precision()->set_gemm(v1::D_TYPE_BF16);
  std::string precision = absl::AsciiStrToLower(v.Get("trainer.plugins"));
  for (const auto& [k, val] : v.all()) {
    if (k == "mixed_precision" || absl::StartsWith(k, "mixed_precision.")) {
      if (k == "mixed_precision.fp8" && (IsNone(val) || val == "false")) continue;
      if (absl::StrContains(k, "fp8_param") || absl::StrContains(k, "in_bf16") || absl::StrContains(k, "fp8_recipe")) continue;
      absl::StrAppend(&precision, " ", absl::AsciiStrToLower(val));
    }
  }
  if (absl::StrContains(precision, "nvfp4") || absl::StrContains(precision, "fp4")) {
    return Bad(nemo ? "trainer.plugins" : "mixed_precision",
               absl::StrCat("'", absl::StripAsciiWhitespace(precision), "': NVFP4 is not modelled (no fp4 GEMM dtype)"));
  }
  if (absl::StrContains(precision, "fp8")) {
    t.mutable_precision()->set_gemm(v1::D_TYPE_FP8);
    // The scaling recipe: an override of mixed_precision.fp8_recipe, else the one the named config
    // sets, else the framework preset's default. The configs by name (first match; hyphenated
    // names are registered too): Megatron-Bridge src/megatron/bridge/training/mixed_precision.py
    // @067f987 (nanov2_bf16_with_fp8_current_scaling_mixed sets fp8_recipe "blockwise" despite its
    // name; *_subchannel_scaling_mixed blockwise; *_mxfp8_mixed mxfp8; *_current_scaling_mixed
    // tensorwise; *_delayed_scaling_mixed delayed), its perf_recipes/_common.py _perf_precision
    // (fp8_sc, fp8_mx, fp8_cs, fp8_ds), and NeMo recipes/precision/mixed_precision.py
    // (bf16_with_fp8_mixed delayed).
    std::string named = precision;
    absl::StrReplaceAll({{"-", "_"}}, &named);
    static constexpr std::pair<const char*, const char*> kConfigs[] = {
        {"nanov2_bf16_with_fp8_current_scaling", "blockwise"}, {"subchannel", "blockwise"}, {"fp8_sc", "blockwise"},
        {"mxfp8", "mxfp8"},           {"fp8_mx", "mxfp8"},          {"current_scaling", "tensorwise"},
        {"fp8_cs", "tensorwise"},     {"delayed", "delayed"},       {"fp8_ds", "delayed"},
        {"_with_fp8_mixed", "delayed"}};
    std::string recipe = absl::AsciiStrToLower(v.Get("mixed_precision.fp8_recipe"));
    if (IsNone(recipe)) recipe.clear();
    if (const size_t dot = recipe.rfind('.'); dot != std::string::npos) recipe = recipe.substr(dot + 1);  // Fp8Recipe.x
    for (const auto& [key, value] : kConfigs) {
      if (!recipe.empty()) break;
      if (absl::StrContains(named, key)) recipe = value;
    }
    if (Fp8Recipe parsed; Fp8RecipeFromName(recipe, &parsed)) {
      t.mutable_precision()->set_fp8_recipe(recipe);
    } else if (!recipe.empty()) {
      // blockwise (Megatron-Bridge's H100 fp8sc recipes) and custom: no measured rate of their
      // GEMMs; costed with the framework preset's default recipe, and said so.
      ignored.push_back(absl::StrCat("fp8 recipe ", recipe, " (not modelled: costed with the framework's default recipe)"));
    }
  }
  return absl::OkStatus();
}

// Recompute (model.recompute_granularity / _modules / _method / _num_layers, Megatron-Core's
// TransformerConfig fields).
absl::Status SetNemoRecompute(const NemoValues& v, v1::TrainingSpec& t) {
  const std::string gran = absl::AsciiStrToLower(v.Get("model.recompute_granularity"));
  if (gran == "full") {
    t.set_recompute(v1::RECOMPUTE_FULL);
    if (v.Get("model.recompute_method") == "block") {
      NEMO_INT(n, "model.recompute_num_layers", 0, 0);
      t.set_recompute_num_layers(n);
    }
  } else if (gran == "selective") {
    t.set_recompute(v1::RECOMPUTE_SELECTIVE);
    const std::string mods = v.Get("model.recompute_modules");
    if (!IsNone(mods)) {
      std::string m = mods;
      for (char& c : m) {
        if (c == '[' || c == ']' || c == '\'' || c == '"') c = ' ';
      }
      for (absl::string_view part : absl::StrSplit(m, absl::ByAnyChar(", "), absl::SkipEmpty())) {
        t.add_recompute_modules(std::string(part));
      }
    }
  } else if (IsNone(gran)) {
    if (v.Has("model.recompute_granularity")) t.set_recompute(v1::RECOMPUTE_NONE);
  } else {
    return Bad(v.SourceOf("model.recompute_granularity"), absl::StrCat("'", gran, "' is not full, selective or null"));
  }
  return absl::OkStatus();
}

// Megatron-Bridge's sharding and overlaps (ddp.use_megatron_fsdp, ddp.use_distributed_optimizer,
// ddp.data_parallel_sharding_strategy, ddp.overlap_grad_reduce, ddp.grad_reduce_in_fp32,
// comm_overlap.tp_comm_overlap), CUDA graphs (model.cuda_graph_impl / _scope), the MTP depths
// (model.mtp_num_layers), the MoE dispatcher and capacity padding.
absl::Status SetBridgeShardingAndOverlaps(const NemoValues& v, int64_t tp, v1::TrainingSpec& t) {
  NEMO_BOOL(mfsdp, "ddp.use_megatron_fsdp", false);
  NEMO_BOOL(dist, "ddp.use_distributed_optimizer", true);
  const std::string strategy = v.Get("ddp.data_parallel_sharding_strategy");
  if (mfsdp) {
    t.set_sharding(strategy == "optim" ? v1::SHARDING_ZERO1
                   : strategy == "optim_grads" ? v1::SHARDING_ZERO2
                   : strategy == "no_shard" ? v1::SHARDING_NONE
                                            : v1::SHARDING_ZERO3);
  } else {
    t.set_sharding(dist ? v1::SHARDING_ZERO1 : v1::SHARDING_NONE);
  }
  if (v.Has("ddp.overlap_grad_reduce")) {
    NEMO_BOOL(ov, "ddp.overlap_grad_reduce", true);
    t.set_overlap_dp_comm(ov);
  }
  if (v.Has("ddp.grad_reduce_in_fp32")) {
    NEMO_BOOL(fp32, "ddp.grad_reduce_in_fp32", true);
    // One flag sets both: the DDP gradient buffer (main_grad) is fp32 only when
    // grad_reduce_in_fp32, else the params dtype (megatron/core/distributed/
    // param_and_grad_buffer.py: torch.float if grad_reduce_in_fp32 else param.dtype).
    t.mutable_precision()->set_grad_reduce(fp32 ? v1::D_TYPE_FP32 : v1::D_TYPE_BF16);
    t.mutable_precision()->set_grads(fp32 ? v1::D_TYPE_FP32 : v1::D_TYPE_BF16);
  }
  if (v.Has("comm_overlap.tp_comm_overlap")) {
    NEMO_BOOL(tpo, "comm_overlap.tp_comm_overlap", false);
    t.set_overlap_tp_comm(tpo && tp > 1);
  }
  // CUDA graphs: cuda_graph_impl "local" with scope "full_iteration" captures the whole step
  // (scripts/performance/utils/overrides.py); "none" none; "transformer_engine" with a scope list
  // (["attn", "moe_router", "moe_preprocess"]) the parts named (training.cuda_graph_scope),
  // without one the whole layer.
  const std::string graphs = v.Get("model.cuda_graph_impl");
  const std::vector<std::string> scopes = PythonListItems(v.Get("model.cuda_graph_scope"));
  if (graphs == "local") {
    // arguments.py: "other scopes are only supported with --cuda-graph-impl=transformer_engine".
    for (const std::string& part : scopes) {
      if (part != "full_iteration" && part != "full" && !IsNone(part)) {
        return Bad(v.SourceOf("model.cuda_graph_scope"),
                   absl::StrCat("'", part, "' needs cuda_graph_impl transformer_engine (local captures full_iteration only)"));
      }
    }
  }
  if (graphs == "none") t.set_cuda_graphs(false);
  else if (graphs == "local" && std::find(scopes.begin(), scopes.end(), "full_iteration") != scopes.end()) t.set_cuda_graphs(true);
  else if (graphs == "full_iteration") t.set_cuda_graphs(true);
  else if (graphs == "transformer_engine") {
    t.set_cuda_graphs(true);
    for (const std::string& part : scopes) {
      if (part != "full" && !IsNone(part)) t.add_cuda_graph_scope(part);
    }
  }
  // MTP depths (model.mtp_num_layers: Nemotron 3 Super / Ultra 2, with the model preset's
  // repeated layer; DeepSeek-V3's recipes 1).
  if (v.Has("model.mtp_num_layers")) {
    NEMO_INT(mtp, "model.mtp_num_layers", 0, 0);
    if (mtp > 16) return Bad(v.SourceOf("model.mtp_num_layers"), absl::StrCat(mtp, " MTP layers: at most 16 are modelled"));
    t.set_mtp_layers(mtp);
  }
  // The MoE token dispatcher (Megatron-Core TransformerConfig moe_token_dispatcher_type "alltoall" /
  // "flex" with moe_flex_dispatcher_backend "deepep" (its default) or "hybridep"; "allgather" is not
  // modelled and left to the preset) and capacity padding (moe_expert_capacity_factor with
  // moe_pad_expert_input_to_capacity).
  const MegatronMoeDispatcher d =
      ReadMegatronMoeDispatcher(v.Get("model.moe_token_dispatcher_type"), v.Get("model.moe_flex_dispatcher_backend"));
  if (!d.bad.empty()) {
    return Bad(v.SourceOf(d.bad == "type" ? "model.moe_token_dispatcher_type" : "model.moe_flex_dispatcher_backend"),
               d.why);
  }
  if (!d.dispatcher.empty()) t.set_moe_dispatcher(d.dispatcher);
  if (v.Has("model.moe_expert_capacity_factor")) {
    const std::string text = v.Get("model.moe_expert_capacity_factor");
    double cap = 0;
    if (!IsNone(text)) {
      if (!absl::SimpleAtod(text, &cap) || !std::isfinite(cap)) {
        return Bad(v.SourceOf("model.moe_expert_capacity_factor"), absl::StrCat("'", text, "' is not a number"));
      }
    }
    // Megatron-Core reads a negative factor as none (transformer_config.py); none is stated
    // (0), so that no recipe default pads.
    t.set_moe_expert_capacity_factor(cap > 0 ? cap : 0.0);
  }
  // Fine-grained activation offloading (model.fine_grained_activation_offloading with
  // model.offload_modules): "moe_act" and "expert_fc1" as named; "fused_group_mlp" (the fused
  // grouped MLP's inputs above min_offloaded_tensor_size, which Nemotron 3 Ultra's recipes say
  // "approximates offloading the moe_act (pre-activation input)") as moe_act; the attention
  // modules are not modelled (listed by ListRecipeNotes' caller as the recipe's unread settings).
  NEMO_BOOL(offload, "model.fine_grained_activation_offloading", false);
  if (offload) {
    bool act = false, fc1 = false;
    for (const std::string& part : PythonListItems(v.Get("model.offload_modules"))) {
      act = act || part == "moe_act" || part == "fused_group_mlp";
      fc1 = fc1 || part == "expert_fc1";
    }
    if (act) t.add_offload_modules("moe_act");
    if (fc1) t.add_offload_modules("expert_fc1");
  }
  // Transformer Engine's fused router (TransformerConfig moe_router_fusion; Megatron-Bridge's
  // performance scripts set cfg.model.moe_router_fusion = True for their MoE models).
  if (v.Has("model.moe_router_fusion")) {
    NEMO_BOOL(fusion, "model.moe_router_fusion", false);
    t.set_moe_router_fusion(fusion);
  }
  if (v.Has("model.moe_pad_expert_input_to_capacity")) {
    NEMO_BOOL(pad, "model.moe_pad_expert_input_to_capacity", false);
    t.set_moe_pad_expert_input_to_capacity(pad && t.moe_expert_capacity_factor() > 0);
  }
  return absl::OkStatus();
}

#undef NEMO_INT
#undef NEMO_BOOL

// Lists in out.ignored what the recipe sets and the job does not model: an uneven pipeline placed
// by the recipe (a layout, first/last stage layers; the model puts ceil(layers / stages) on the
// slowest stage), and the recipe itself with what of it is read.
void ListRecipeNotes(const NemoValues& v, bool nemo, const std::string& name, const std::string& recipe_source,
                     ImportedJob& out) {
  for (const char* k : {"model.pipeline_model_parallel_layout", "model.num_layers_in_first_pipeline_stage",
                        "model.num_layers_in_last_pipeline_stage"}) {
    if (!IsNone(v.Get(k))) out.ignored.push_back(absl::StrCat(k, "=", v.Get(k), " (the recipe's uneven pipeline split)"));
  }
  out.ignored.push_back(absl::StrCat(nemo ? "--factory " : "--recipe ", name, " (", recipe_source, " at ",
                                     nemo ? "NVIDIA/NeMo " : "NVIDIA-NeMo/Megatron-Bridge ",
                                     std::string(nemo ? kNemoCommit : kBridgeCommit).substr(0, 8),
                                     "; its layout, batch, precision, recompute, sharding and overlaps are read, the "
                                     "optimizer, data and checkpoint settings are not)"));
}

}  // namespace

absl::StatusOr<ImportedJob> JobFromNemoCommand(const std::vector<std::string>& argv) {
  ImportedJob out;
  const LauncherPrefix launch = ParseLauncherPrefix(argv, /*shell_scripts=*/false);
  out.launcher_gpus = launch.gpus;
  out.launcher_gpus_from = launch.gpus_from;
  NemoLine line;
  // The launcher's own flags (torchrun --nproc_per_node ...) are not the recipe's.
  if (absl::Status s = ParseNemoLine(argv, launch.args_index, line, out); !s.ok()) return s;
  const bool nemo = !line.factory.empty();
  if (!nemo && line.recipe_flag.empty() && !line.model_stem.empty()) {
    // run_recipe.py: --model STEM --mode pretrain -> STEM_pretrain_config
    // (scripts/training/run_recipe.py _selected_recipe_name).
    if (!line.mode.empty() && line.mode != "pretrain") {
      return Bad("--mode", absl::StrCat("'", line.mode, "': only pre-training (--mode pretrain) is modelled"));
    }
    line.recipe_flag = absl::StrCat(line.model_stem, "_pretrain_config");
  }
  std::string name = nemo ? line.factory : line.recipe_flag;
  out.source = nemo ? "nemo" : "megatron-bridge";
  out.spec.mutable_framework()->set_preset(out.source);
  // "llama3_70b(num_nodes=8, name='x')": the factory's arguments are listed.
  if (size_t paren = name.find('('); paren != std::string::npos) {
    out.ignored.push_back(absl::StrCat("--factory ", name, " (the factory's arguments; the GPU count comes from the "
                                       "allocation or --gpus)"));
    name = name.substr(0, paren);
  }
  // The recipe's values (presets/launchers/*.toml).
  Values values;
  absl::StatusOr<std::string> model_id = LoadRecipeValues(nemo, name, line.recipe_flag, values);
  if (!model_id.ok()) return model_id.status();
  const std::string recipe_source = values["source"];
  absl::StatusOr<v1::ModelSpec> model = RecipeModel(model_id->empty() ? name : *model_id);
  if (!model.ok()) {
    return Bad(nemo ? "--factory" : "--recipe", absl::StrCat("'", name, "' (", recipe_source, "): ", model.status().message()));
  }
  *out.spec.mutable_model() = *model;
  const std::string prefix = nemo ? "trainer.strategy." : "model.";
  ApplyNemoOverrides(line, nemo, prefix, values);
  ListUnreadOverrides(line, out);
  // ---- The job from the values.
  const NemoValues v(values, line);
  v1::TrainingSpec& t = *out.spec.mutable_training();
  v1::ParallelismSpec& p = *out.spec.mutable_parallelism();
  if (absl::Status s = SetNemoLayoutAndBatch(v, nemo, prefix, recipe_source, p, t); !s.ok()) return s;
  if (absl::Status s = SetNemoPrecision(v, nemo, t, out.ignored); !s.ok()) return s;
  if (absl::Status s = SetNemoRecompute(v, t); !s.ok()) return s;
  // Sharding and overlaps (Megatron-Bridge's ddp / comm_overlap; NeMo 2's distributed optimizer
  // default, MegatronStrategy with distributed_fused_adam).
  t.set_sharding(v1::SHARDING_ZERO1);
  if (!nemo) {
    if (absl::Status s = SetBridgeShardingAndOverlaps(v, p.tp(), t); !s.ok()) return s;
  }
  ListRecipeNotes(v, nemo, name, recipe_source, out);
  return out;
}

}  // namespace stepcast
