#include "proto/hf_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "core/model_shape.h"
#include "proto/architectures.h"
#include "proto/codec.h"
#include "yaml-cpp/yaml.h"

namespace stepcast {
namespace {

namespace pb = google::protobuf;

// Largest integer accepted in a config field: 2^31 - 1.
constexpr int64_t kMaxField = (int64_t{1} << 31) - 1;
// Largest config.json read: real ones are a few KB; a device or a huge file is refused instead of
// read until memory runs out (reliability review: hf_config: /dev/zero aborted the CLI).
constexpr uintmax_t kMaxConfigBytes = uintmax_t{16} << 20;
// Longest list read (layer_types, moe_layers, no_rope_layers): one entry per layer.
constexpr size_t kMaxList = 1 << 16;

// A value's canonical text, to compare a config's value with a listed key's accepted values:
// null, integers and numbers as %g, booleans, lower-case strings, lists and objects element-wise.
std::string Canon(const YAML::Node& n, int depth = 0) {
  if (!n || n.IsNull()) return "null";
  if (depth > 8) return "...";
  if (n.IsSequence()) {
    std::vector<std::string> v;
    for (const auto& e : n) v.push_back(Canon(e, depth + 1));
    return absl::StrCat("[", absl::StrJoin(v, ","), "]");
  }
  if (n.IsMap()) {
    std::vector<std::string> v;
    for (const auto& kv : n) v.push_back(absl::StrCat(kv.first.Scalar(), ":", Canon(kv.second, depth + 1)));
    return absl::StrCat("{", absl::StrJoin(v, ","), "}");
  }
  const std::string s = n.Scalar();
  double d = 0;
  if (absl::SimpleAtod(s, &d) && std::isfinite(d)) return absl::StrFormat("%g", d);
  return absl::AsciiStrToLower(s);
}

// The names a family's keys and listed keys make known, with the listed keys' entries.
struct KnownKeys {
  std::set<std::string> read;                              // keys and aliases of HfKeys
  std::map<std::string, v1::HfListedKey> listed;           // listed keys (family's, then common)
  bool Known(const std::string& k) const { return read.count(k) || listed.count(k); }
  // A known name starts with `prefix` + "." (an object whose members are read or listed).
  bool HasMembers(const std::string& prefix) const {
    const std::string p = prefix + ".";
    for (const std::string& k : read) {
      if (absl::StartsWith(k, p)) return true;
    }
    for (const auto& [k, v] : listed) {
      if (absl::StartsWith(k, p)) return true;
    }
    return false;
  }
};

// The member at a dotted path ("ffn_config.moe_num_experts"), or an undefined node. (yaml-cpp
// nodes are references: assigning to one writes through, so nodes here are only ever reset.)
YAML::Node At(const YAML::Node& body, const std::string& path) {
  YAML::Node n;
  n.reset(body);
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (!n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node& cn = n;
    YAML::Node next = cn[std::string(part)];
    if (!next) return YAML::Node(YAML::NodeType::Undefined);
    n.reset(next);
  }
  return n;
}

class HfReader {
 public:
  HfReader(const v1::Architecture& family, std::string type, std::string origin)
      : family_(family), type_(std::move(type)), origin_(std::move(origin)) {}

  absl::Status Err(const std::string& key, const std::string& why) const {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": ", key, ": ", why));
  }
  std::string Where() const {
    return absl::StrCat("model_type '", type_, "' (presets/architectures/", family_.name(), ".yaml)");
  }

  // Every key of `node` (members of objects whose members are named, recursively) is read or
  // listed, and a listed key with accepted values has one of them.
  absl::Status CheckKeys(const YAML::Node& node, const std::string& prefix, const KnownKeys& known,
                         std::vector<std::string>* notes) const {
    for (const auto& kv : node) {
      const std::string key = prefix.empty() ? kv.first.Scalar() : absl::StrCat(prefix, ".", kv.first.Scalar());
      if (known.Known(key)) {
        auto it = known.listed.find(key);
        if (it != known.listed.end()) {
          const v1::HfListedKey& l = it->second;
          if (l.values_size() > 0) {
            const std::string have = Canon(kv.second);
            bool ok = false;
            for (const std::string& v : l.values()) {
              YAML::Node want;
              try {
                want = YAML::Load(v);
              } catch (const YAML::Exception&) {
                continue;
              }
              ok |= Canon(want) == have;
            }
            if (!ok) {
              return Err(key, absl::StrCat("'", have.substr(0, 64), "' is not modelled (", l.reason(), "; accepted: ",
                                           absl::StrJoin(l.values(), ", "), ") for ", Where()));
            }
          }
          if (family_listed_.count(key) && notes != nullptr) {
            notes->push_back(absl::StrCat(key, " = ", Canon(kv.second).substr(0, 64), ": ", l.reason()));
          }
        }
        continue;
      }
      if (kv.second.IsMap() && known.HasMembers(key)) {
        if (absl::Status s = CheckKeys(kv.second, key, known, notes); !s.ok()) return s;
        continue;
      }
      return Err(key, absl::StrCat("not modelled and not listed for ", Where(),
                                   "; it may change cost or memory: add it to the family's keys or listed keys"));
    }
    return absl::OkStatus();
  }

  // Sets `field` (a dotted ModelShape path) from `value`, typed by the field.
  absl::Status SetField(const std::string& key, const std::string& field, const YAML::Node& value,
                        v1::ModelShape* shape) const {
    pb::Message* msg = shape;
    std::vector<std::string> parts = absl::StrSplit(field, '.');
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const pb::FieldDescriptor* f = msg->GetDescriptor()->FindFieldByName(parts[i]);
      if (f == nullptr || f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        return absl::InternalError(absl::StrCat("architecture registry: no ModelShape field ", field));
      }
      msg = msg->GetReflection()->MutableMessage(msg, f);
    }
    const pb::FieldDescriptor* f = msg->GetDescriptor()->FindFieldByName(parts.back());
    if (f == nullptr) return absl::InternalError(absl::StrCat("architecture registry: no ModelShape field ", field));
    const pb::Reflection* r = msg->GetReflection();
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT64: {
        absl::StatusOr<int64_t> v = Int(key, value);
        if (!v.ok()) return v.status();
        static const std::set<std::string> kCounts = {"layers",          "hidden_size",       "attention_heads",
                                                      "vocab_size",      "mamba.state_dim",   "mamba.head_dim",
                                                      "mamba.num_groups", "mamba.num_heads",  "mamba.conv_kernel",
                                                      "mamba.chunk_size"};
        if (kCounts.count(field) && *v < 1) return Err(key, absl::StrCat("must be at least 1 (got ", *v, ")"));
        r->SetInt64(msg, f, *v);
        return absl::OkStatus();
      }
      case pb::FieldDescriptor::CPPTYPE_DOUBLE: {
        double d = 0;
        if (!value.IsScalar() || !absl::SimpleAtod(value.Scalar(), &d) || !std::isfinite(d) || d < 0) {
          return Err(key, absl::StrCat("'", Canon(value).substr(0, 64), "' is not a finite number >= 0"));
        }
        r->SetDouble(msg, f, d);
        return absl::OkStatus();
      }
      case pb::FieldDescriptor::CPPTYPE_BOOL: {
        absl::StatusOr<bool> b = Bool(key, value);
        if (!b.ok()) return b.status();
        r->SetBool(msg, f, *b);
        return absl::OkStatus();
      }
      default:
        return absl::InternalError(absl::StrCat("architecture registry: field ", field, " is not a number"));
    }
  }

  absl::StatusOr<int64_t> Int(const std::string& key, const YAML::Node& value) const {
    if (!value.IsScalar()) return Err(key, "is not an integer");
    // A quoted "32" is a string to json.load: the config class keeps it, and the model fails
    // (or, for a flag, reads any non-empty string as true); refused here rather than read as 32.
    if (value.Tag() == "!") {
      int64_t unused = 0;
      if (absl::SimpleAtoi(value.Scalar(), &unused)) {
        return Err(key, absl::StrCat("\"", value.Scalar().substr(0, 64), "\" is a string, not an integer: write it unquoted"));
      }
      return Err(key, absl::StrCat("'", value.Scalar().substr(0, 64), "' is not an integer"));
    }
    try {
      const int64_t v = value.as<int64_t>();
      // Bounded so that derived sizes (4 * n_embd, products of dims) cannot overflow int64
      // (reliability review: hf_config.cc 4 * n_embd with n_embd 4e18).
      if (v < 0 || v > kMaxField) {
        return Err(key, absl::StrCat(v, " is out of range (0 to ", kMaxField, ")"));
      }
      return v;
    } catch (const YAML::Exception&) {
      return Err(key, absl::StrCat("'", value.Scalar().substr(0, 64), "' is not an integer"));
    }
  }
  absl::StatusOr<bool> Bool(const std::string& key, const YAML::Node& value) const {
    if (!value.IsScalar()) return Err(key, "is not true or false");
    // A quoted "false" is a non-empty string, which Python reads as true.
    if (value.Tag() == "!") {
      return Err(key, absl::StrCat("\"", value.Scalar().substr(0, 64),
                                   "\" is a string, not true or false (Python reads any non-empty string as true): "
                                   "write it unquoted"));
    }
    const std::string s = absl::AsciiStrToLower(value.Scalar());
    if (s == "true") return true;
    if (s == "false") return false;
    return Err(key, absl::StrCat("'", value.Scalar().substr(0, 64), "' is not true or false"));
  }

  // Which layers of a per-layer list are global: the period k with global iff (i + 1) % k == 0
  // (0: none global, every layer local), or an error naming the key.
  absl::StatusOr<int64_t> GlobalEvery(const std::string& key, const std::vector<bool>& global) const {
    const int64_t n = static_cast<int64_t>(global.size());
    int64_t first = -1, count = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (global[i]) {
        ++count;
        if (first < 0) first = i;
      }
    }
    if (count == 0) return 0;
    const int64_t k = first + 1;
    for (int64_t i = 0; i < n; ++i) {
      if (global[i] != ((i + 1) % k == 0)) {
        return Err(key, absl::StrCat("a global layer every ", k, " layers does not describe it (layer ", i,
                                     "); only a periodic local/global pattern is modelled"));
      }
    }
    return k;
  }

  // Applies the registry's key `k` (its field, or its rule) to `shape` with the config's value
  // under `key` (presets/architectures/*.yaml HfKey.rule; each rule cites transformers' config
  // class it follows in the method that applies it).
  absl::Status ApplyRule(const v1::HfKey& k, const std::string& key, const YAML::Node& value,
                         v1::ModelShape* shape) const {
    const std::string& rule = k.rule();
    if (rule.empty()) return SetField(key, k.field(), value, shape);
    if (rule == "activation") return ApplyActivation(key, value, shape);
    if (rule == "layer_types" || rule == "nope_layers") return ApplyLayerPattern(rule, key, value, shape);
    if (rule == "moe_layer_indices") return ApplyMoeLayerIndices(key, value, shape);
    if (rule == "hybrid_pattern" || rule == "hybrid_mtp_pattern") {
      return ApplyHybridPattern(key, value, rule == "hybrid_mtp_pattern", shape);
    }
    if (rule == "shared_expert_size" || rule == "sparse_step" || rule == "moe_layer_freq" || rule == "plus_offset" ||
        rule == "equals_hidden") {
      return ApplyIntegerRule(k, key, value, shape);
    }
    return absl::InternalError(absl::StrCat("architecture registry: unknown rule ", rule));
  }

  std::set<std::string> family_listed_;  // keys listed by the family itself (reported as notes)

 private:
  // rule "hybrid_pattern": Nemotron-H's hybrid_override_pattern ("M-M-M*-...", Megatron-Core's
  // symbols) or transformers' layers_block_type list (configuration_nemotron_h.py maps M, *, -, E
  // to linear_attention (older: mamba), full_attention (attention), mlp, moe): the model's layers.
  // rule "hybrid_mtp_pattern" (`mtp`): the same for one MTP module (mtp_hybrid_override_pattern /
  // mtp_layers_block_type; Nemotron 3 "*E").
  absl::Status ApplyHybridPattern(const std::string& key, const YAML::Node& value, bool mtp,
                                  v1::ModelShape* shape) const {
    // Without MTP depths (read before: num_nextn_predict_layers) the module's keys are not read
    // (Megatron-Bridge _hf_mtp_config returns (0, None) first).
    if (mtp && shape->mtp_layers() == 0) return absl::OkStatus();
    std::string pattern;
    if (value.IsScalar() && value.Tag() != "?") {
      pattern = value.Scalar();
    } else if (value.IsSequence() && value.size() <= kMaxList) {
      for (size_t i = 0; i < value.size(); ++i) {
        const std::string kind = value[i].IsScalar() ? value[i].Scalar() : std::string();
        if (kind == "mamba" || kind == "linear_attention") pattern += 'M';
        else if (kind == "attention" || kind == "full_attention") pattern += '*';
        else if (kind == "mlp") pattern += '-';
        else if (kind == "moe") pattern += 'E';
        else return Err(key, absl::StrCat("entry ", i, " '", kind.substr(0, 32), "' is not mamba, attention, mlp or moe"));
      }
    } else {
      return Err(key, "is not a layer pattern (a string of M, *, -, E or a list of layer kinds)");
    }
    const size_t max_layers = mtp ? 64 : kMaxList;
    if (pattern.empty() || pattern.size() > max_layers) {
      return Err(key, absl::StrCat("must name between 1 and ", max_layers, " layers"));
    }
    for (size_t i = 0; i < pattern.size(); ++i) {
      const char c = pattern[i];
      if (!IsHybridLayerSymbol(c)) {
        return Err(key, absl::StrCat("'", std::string(1, c), "' at position ", i,
                                     " is not a layer this family's layers are read as (M Mamba-2, * attention, - MLP, "
                                     "E MoE", mtp ? ": one MTP module's layers" : "; the MTP module's layers are mtp_hybrid_override_pattern's",
                                     ")"));
      }
    }
    if (mtp) {
      shape->set_hybrid_mtp_pattern(pattern);
      return absl::OkStatus();
    }
    shape->set_hybrid_layer_pattern(pattern);
    shape->set_layers(static_cast<int64_t>(pattern.size()));
    return absl::OkStatus();
  }

  // rule "activation": hidden_act / hidden_activation as the FFN type, gated (SwiGLU / GeGLU) or
  // not (GELU, squared ReLU) as the family's conventions say.
  absl::Status ApplyActivation(const std::string& key, const YAML::Node& value, v1::ModelShape* shape) const {
    const v1::FamilyConventions& c = family_.conventions();
    if (!value.IsScalar()) return Err(key, "is not an activation name");
    const std::string act = absl::AsciiStrToLower(value.Scalar());
    const bool gated = c.ffn_type() == v1::FFN_TYPE_SWIGLU || c.ffn_type() == v1::FFN_TYPE_GEGLU;
    v1::FfnType t = v1::FFN_TYPE_UNSPECIFIED;
    if (gated) {
      if (act == "silu" || act == "swish") t = v1::FFN_TYPE_SWIGLU;
      else if (absl::StartsWith(act, "gelu")) t = v1::FFN_TYPE_GEGLU;
    } else {
      if (act == "relu2" || act == "squared_relu" || act == "relu_squared") t = v1::FFN_TYPE_SQUARED_RELU;
      else if (absl::StartsWith(act, "gelu") || act == "relu") t = v1::FFN_TYPE_GELU;
    }
    if (t == v1::FFN_TYPE_UNSPECIFIED) {
      return Err(key, absl::StrCat("'", value.Scalar().substr(0, 64), "' is not modelled for ", Where(), " (",
                                   gated ? "silu, swish, gelu*" : "gelu*, relu, relu2", ")"));
    }
    shape->set_ffn_type(t);
    return absl::OkStatus();
  }

  // rules "layer_types" (per-layer full_attention / sliding_attention / chunked_attention) and
  // "nope_layers" (Llama 4: 1 = a RoPE chunked layer, 0 = a NoPE full layer): the local/global
  // attention pattern, periodic only.
  absl::Status ApplyLayerPattern(const std::string& rule, const std::string& key, const YAML::Node& value,
                                 v1::ModelShape* shape) const {
    if (!value.IsSequence() || value.size() > kMaxList) return Err(key, "is not a list of per-layer entries");
    // An empty list is falsy in the config classes: their default pattern holds
    // (configuration_llama4.py: `self.no_rope_layers if self.no_rope_layers else default`).
    if (value.size() == 0) return absl::OkStatus();
    if (static_cast<int64_t>(value.size()) != shape->layers()) {
      return Err(key, absl::StrCat("has ", value.size(), " entries for ", shape->layers(), " layers"));
    }
    std::vector<bool> global;
    std::set<std::string> local_kinds;
    for (const auto& e : value) {
      const std::string s = e.IsScalar() ? absl::AsciiStrToLower(e.Scalar()) : "?";
      if (rule == "nope_layers") {
        // Llama 4: 1 = a RoPE layer (chunked attention), 0 = a NoPE layer (full attention).
        if (s != "0" && s != "1") return Err(key, absl::StrCat("entry '", s, "' is not 0 or 1"));
        global.push_back(s == "0");
        continue;
      }
      if (s == "full_attention") {
        global.push_back(true);
      } else if (s == "sliding_attention" || s == "chunked_attention") {
        global.push_back(false);
        local_kinds.insert(s);
      } else {
        return Err(key, absl::StrCat("entry '", s.substr(0, 64),
                                     "' is not modelled (full_attention, sliding_attention, chunked_attention)"));
      }
    }
    if (local_kinds.size() > 1) return Err(key, "mixes sliding and chunked layers, which is not modelled");
    absl::StatusOr<int64_t> every = GlobalEvery(key, global);
    if (!every.ok()) return every.status();
    const bool any_local = std::find(global.begin(), global.end(), false) != global.end();
    if (!any_local) {
      shape->set_local_attention_window(0);
      shape->set_global_attention_every(0);
      return absl::OkStatus();
    }
    if (local_kinds.count("chunked_attention")) shape->set_local_attention_kind(v1::LOCAL_ATTENTION_KIND_CHUNKED);
    if (local_kinds.count("sliding_attention")) shape->set_local_attention_kind(v1::LOCAL_ATTENTION_KIND_SLIDING);
    shape->set_global_attention_every(*every);
    return absl::OkStatus();
  }

  // rule "moe_layer_indices": the MoE layers' indices, every k-th layer from a first one to the
  // last layers (first_dense_layers, layer_freq).
  absl::Status ApplyMoeLayerIndices(const std::string& key, const YAML::Node& value, v1::ModelShape* shape) const {
    if (!value.IsSequence() || value.size() > kMaxList) return Err(key, "is not a list of layer indices");
    std::vector<int64_t> idx;
    for (const auto& e : value) {
      absl::StatusOr<int64_t> v = Int(key, e);
      if (!v.ok()) return v.status();
      idx.push_back(*v);
    }
    if (idx.empty()) return Err(key, "is empty: an MoE model without MoE layers is not modelled");
    std::sort(idx.begin(), idx.end());
    const int64_t first = idx[0], freq = idx.size() > 1 ? idx[1] - idx[0] : shape->layers();
    for (size_t i = 0; i < idx.size(); ++i) {
      if (freq <= 0 || idx[i] != first + static_cast<int64_t>(i) * freq || idx[i] >= shape->layers()) {
        return Err(key, "is not every k-th layer from a first one, the only MoE layout modelled");
      }
    }
    if (first + static_cast<int64_t>(idx.size()) * freq < shape->layers()) {
      return Err(key, "stops before the last layers, which is not modelled");
    }
    shape->mutable_moe()->set_first_dense_layers(first);
    shape->mutable_moe()->set_layer_freq(freq);
    return absl::OkStatus();
  }

  // The rules on one integer: "shared_expert_size" (a shared expert of that FFN size, 0: none),
  // "sparse_step" (every step-th layer MoE, (layer_idx + 1) % step == 0), "plus_offset" (the
  // field plus the family's learned-position offset rows; learned positions), "equals_hidden"
  // (must equal the hidden size, else not modelled).
  absl::Status ApplyIntegerRule(const v1::HfKey& k, const std::string& key, const YAML::Node& value,
                                v1::ModelShape* shape) const {
    const std::string& rule = k.rule();
    absl::StatusOr<int64_t> v = Int(key, value);
    if (!v.ok()) return v.status();
    if (rule == "shared_expert_size") {
      shape->mutable_moe()->set_shared_experts(*v > 0 ? 1 : 0);
      shape->mutable_moe()->set_shared_expert_ffn_hidden_size(*v);
      return absl::OkStatus();
    }
    if (rule == "sparse_step") {
      if (*v < 1) return Err(key, "must be at least 1");
      if (*v > shape->layers()) return Err(key, absl::StrCat(*v, " exceeds the ", shape->layers(), " layers"));
      // (layer_idx + 1) % step == 0: layers step-1, 2 step-1, ...
      shape->mutable_moe()->set_layer_freq(*v);
      shape->mutable_moe()->set_first_dense_layers(*v - 1);
      return absl::OkStatus();
    }
    if (rule == "moe_layer_freq") {
      // DeepSeek (configuration_deepseek.py / modeling_deepseek.py): layer i is MoE when
      // i >= first_k_dense_replace and i % moe_layer_freq == 0; 0 divides by zero there. The same
      // layers as ModelShape's (i - first_dense) % freq == 0 from the first multiple of freq at or
      // after first_k_dense_replace (first_k 3, freq 2: layers 4, 6, 8, ...).
      if (*v < 1) return Err(key, "must be at least 1 (modeling_deepseek.py takes layer_idx % moe_layer_freq)");
      if (*v > shape->layers()) return Err(key, absl::StrCat(*v, " exceeds the ", shape->layers(), " layers"));
      const int64_t first_k = shape->moe().first_dense_layers();
      shape->mutable_moe()->set_layer_freq(*v);
      shape->mutable_moe()->set_first_dense_layers((first_k + *v - 1) / *v * *v);
      return absl::OkStatus();
    }
    if (rule == "plus_offset") {
      YAML::Node n(*v + family_.conventions().learned_position_offset());
      if (absl::Status s = SetField(key, k.field(), n, shape); !s.ok()) return s;
      shape->set_position_encoding(v1::POSITION_ENCODING_LEARNED);
      return absl::OkStatus();
    }
    // equals_hidden
    if (*v != shape->hidden_size()) {
      return Err(key, absl::StrCat(*v, " differs from the hidden size ", shape->hidden_size(), ": ",
                                   k.source().empty() ? "not modelled" : k.source()));
    }
    return absl::OkStatus();
  }

  const v1::Architecture& family_;
  std::string type_;
  std::string origin_;
};

}  // namespace

namespace {

// The config.json text as a YAML/JSON node (yaml-cpp reads JSON), a map or an error naming
// `origin`.
// A key given twice in an object of `node` (recursively): its dotted path, else "". yaml-cpp
// keeps both members and looks up the first, where Python's json (transformers) keeps the last.
std::string DuplicateKey(const YAML::Node& node, const std::string& prefix) {
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& kv : node) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      const std::string path = prefix.empty() ? key : absl::StrCat(prefix, ".", key);
      if (!seen.insert(key).second) return path;
      if (std::string d = DuplicateKey(kv.second, path); !d.empty()) return d;
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      if (std::string d = DuplicateKey(node[i], absl::StrCat(prefix, "[", i, "]")); !d.empty()) return d;
    }
  }
  return "";
}

absl::StatusOr<YAML::Node> ParseHfRoot(absl::string_view text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": not valid JSON: line ", e.mark.line + 1, ": ", e.msg));
  }
  // One JSON value: text after it (yaml-cpp reads it as a second document) is refused, as
  // Python's json.load refuses it ("Extra data").
  if (const int line = SecondYamlDocumentLine(std::string(text), root); line > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": not valid JSON: line ", line, ": text after the end of the object"));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(origin, ": expected a JSON object"));
  if (std::string d = DuplicateKey(root, ""); !d.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": ", d, ": given twice (transformers would keep the last, this reader the first): "
                                      "give each key once"));
  }
  return root;
}

// The family of a config's model_type in the architecture registry (presets/architectures/); an
// unknown or refused (hybrid) type is an error listing what is read.
absl::StatusOr<const v1::Architecture*> HfFamilyOf(const ArchitectureRegistry& registry, const std::string& type,
                                                   const std::string& origin) {
  if (type.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": model_type: missing (the family decides how the file is read)"));
  }
  const v1::Architecture* family = registry.ForHfModelType(type);
  if (family == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": model_type: '", type.substr(0, 64),
        "' is not in the architecture registry (presets/architectures/), so what its fields mean for cost and memory "
        "is not known; read: ",
        absl::StrJoin(registry.HfModelTypes(), ", "), "; refused (hybrids): ",
        absl::StrJoin(registry.HfModelTypes(/*refused=*/true), ", ")));
  }
  if (!family->refused().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": model_type: '", type, "' (", family->display_name(),
                                                   ") is refused: it ", family->refused()));
  }
  return family;
}

// Every key of the config is read by the family (`keys` and their aliases), listed by it or by
// every family (registry.Common()), else an error (HfReader::CheckKeys); the listed ones go to
// out.listed. A multimodal config's outer keys are checked too.
absl::Status CheckHfConfigKeys(const ArchitectureRegistry& registry, const v1::Architecture& family,
                               const std::vector<v1::HfKey>& keys, const YAML::Node& root, const YAML::Node& body,
                               bool nested, HfReader& reader, HfImport& out) {
  KnownKeys known;
  for (const v1::HfKey& k : keys) {
    known.read.insert(k.key());
    known.read.insert(k.aliases().begin(), k.aliases().end());
  }
  for (const v1::HfListedKey& l : registry.HfListed(family)) {
    known.listed[l.key()] = l;
    reader.family_listed_.insert(l.key());
  }
  for (const v1::HfListedKey& l : registry.Common().hf().listed()) known.listed.emplace(l.key(), l);
  if (absl::Status s = reader.CheckKeys(body, "", known, &out.listed); !s.ok()) return s;
  if (nested) {
    KnownKeys outer;
    for (const v1::HfListedKey& l : family.hf().outer_listed()) outer.listed[l.key()] = l;
    for (const v1::HfListedKey& l : registry.Common().hf().listed()) outer.listed.emplace(l.key(), l);
    outer.read = {"text_config", "tie_word_embeddings"};
    if (absl::Status s = reader.CheckKeys(root, "", outer, nullptr); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Reads each of the family's keys (or its first alias given) into `shape`: a missing key takes the
// registry's default, or the family's tied-embeddings convention (transformers' config class
// default), else it is an error; the outer config's tie_word_embeddings wins for a multimodal one.
absl::Status ReadHfKeys(const v1::Architecture& family, const std::vector<v1::HfKey>& keys, const YAML::Node& root,
                        const YAML::Node& body, bool nested, const HfReader& reader, v1::ModelShape& shape) {
  for (const v1::HfKey& k : keys) {
    std::string used = k.key();
    YAML::Node value = At(body, k.key());
    for (int i = 0; (!value || value.IsNull()) && i < k.aliases_size(); ++i) {
      value.reset(At(body, k.aliases(i)));
      used = k.aliases(i);
    }
    if (k.field() == "tied_embeddings" && nested && root["tie_word_embeddings"] &&
        !root["tie_word_embeddings"].IsNull()) {
      value.reset(root["tie_word_embeddings"]);  // the outer config's key wins (Gemma3Config, Llama4Config)
      used = k.key();
    }
    if (value && value.IsNull() && !k.null_value().empty()) {
      // An explicit null the config class keeps as None, read by its model as null_value.
      value.reset(YAML::Load(k.null_value()));
    }
    if (!value || value.IsNull()) {
      used = k.key();
      if (k.field() == "tied_embeddings" && k.default_().empty()) {
        // transformers' default for the family's config class.
        if (!family.conventions().has_tied_embeddings()) {
          return reader.Err(k.key(), "missing, and the family has no default: add \"tie_word_embeddings\": true or false");
        }
        continue;  // ApplyConventions set it
      }
      if (k.default_().empty()) return reader.Err(k.key(), "missing");
      if (k.default_() == "null") continue;
      try {
        value.reset(YAML::Load(k.default_()));
      } catch (const YAML::Exception&) {
        return absl::InternalError(absl::StrCat("presets/architectures/", family.name(), ".yaml: ", k.key(),
                                                ": default '", k.default_(), "' is not JSON"));
      }
    }
    if (absl::Status s = reader.ApplyRule(k, used, value, &shape); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// What the keys leave implied: learned positions when the family's table has rows, no global
// period without a local window, an MoE family's dense FFN size as its experts', no MoE block
// without routed experts.
void CompleteHfShape(const v1::Architecture& family, v1::ModelShape& shape) {
  // Learned positions: the table's rows (gpt2 n_positions) make the encoding learned.
  if (family.conventions().position_encoding() == v1::POSITION_ENCODING_LEARNED &&
      shape.learned_position_embeddings() > 0) {
    shape.set_position_encoding(v1::POSITION_ENCODING_LEARNED);
  }
  // Without any local layer the window means nothing.
  if (shape.local_attention_window() == 0) shape.set_global_attention_every(0);
  // MoE families without a dense FFN: the dense size is the experts' (every layer MoE).
  if (shape.ffn_hidden_size() == 0 && shape.moe().routed_experts() > 0) {
    shape.set_ffn_hidden_size(shape.moe().expert_ffn_hidden_size());
  }
  // Without MTP depths the MTP pattern is not read (Megatron-Bridge nemotron_h_bridge.py
  // _hf_mtp_config returns (0, None)), nor whether the depths share a layer.
  if (shape.mtp_layers() == 0) {
    shape.clear_hybrid_mtp_pattern();
    shape.clear_mtp_repeated_layer();
  }
  // A hybrid without Mamba layers (its MTP module's included) has no mixer, whatever the config
  // class writes for it; the same for MoE layers and the config class's expert defaults.
  const std::string all_layers = shape.hybrid_layer_pattern() + shape.hybrid_mtp_pattern();
  if (!shape.hybrid_layer_pattern().empty() && all_layers.find('M') == std::string::npos) shape.clear_mamba();
  if (!shape.hybrid_layer_pattern().empty() && all_layers.find('E') == std::string::npos) shape.clear_moe();
  if (shape.moe().routed_experts() == 0) shape.clear_moe();
}

// The model's name: the config's _name_or_path, else the file's stem ("llama3-8b-config"), else
// the model type.
std::string HfModelName(const std::string& name_or_path, const std::string& origin, const std::string& type) {
  if (!name_or_path.empty()) return name_or_path;
  std::string stem(origin);
  if (auto slash = stem.find_last_of('/'); slash != std::string::npos) stem = stem.substr(slash + 1);
  if (auto dot = stem.rfind('.'); dot != std::string::npos) stem = stem.substr(0, dot);
  return stem.empty() || stem == "config" ? type : stem;
}

std::string ScalarAt(const YAML::Node& n, const char* k) {
  const YAML::Node v = n[k];
  return v && v.IsScalar() ? v.Scalar() : std::string();
}

}  // namespace

absl::StatusOr<HfImport> ReadHfConfig(absl::string_view text, absl::string_view origin_view) {
  const std::string origin(origin_view);
  absl::StatusOr<const ArchitectureRegistry*> reg = ArchitectureRegistry::Builtin();
  if (!reg.ok()) return reg.status();
  const ArchitectureRegistry& registry = **reg;
  absl::StatusOr<YAML::Node> parsed = ParseHfRoot(text, origin);
  if (!parsed.ok()) return parsed.status();
  const YAML::Node root = *parsed;
  // Multimodal configs (Gemma 3, Llama 4) keep the language model in "text_config"; the decoder
  // is what trains, the vision tower is not counted.
  const YAML::Node text_node = root["text_config"];
  const bool nested = text_node && text_node.IsMap();
  YAML::Node body;
  body.reset(nested ? text_node : root);
  std::string type = absl::AsciiStrToLower(ScalarAt(body, "model_type"));
  if (type.empty()) type = absl::AsciiStrToLower(ScalarAt(root, "model_type"));
  absl::StatusOr<const v1::Architecture*> family = HfFamilyOf(registry, type, origin);
  if (!family.ok()) return family.status();
  HfReader reader(**family, type, origin);

  // What the family reads and lists, and the keys every config may carry.
  const std::vector<v1::HfKey> keys = registry.HfKeys(**family);
  HfImport out;
  out.family = (*family)->name();
  if (absl::Status s = CheckHfConfigKeys(registry, **family, keys, root, body, nested, reader, out); !s.ok()) return s;

  v1::ModelShape shape;
  ApplyConventions((*family)->conventions(), &shape);
  if (absl::Status s = ReadHfKeys(**family, keys, root, body, nested, reader, shape); !s.ok()) return s;
  CompleteHfShape(**family, shape);
  shape.set_name(HfModelName(ScalarAt(root, "_name_or_path"), origin, type));
  shape.set_source(absl::StrCat("Hugging Face config.json (", origin, "), read as ", (*family)->display_name(),
                                " (presets/architectures/", (*family)->name(), ".yaml)"));
  absl::StatusOr<ModelShape> m = ModelShapeFromProto(shape, "model.shape");
  if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", m.status().message()));
  out.shape = *std::move(m);
  return out;
}

absl::StatusOr<ModelShape> ModelShapeFromHfConfig(absl::string_view text, absl::string_view origin) {
  absl::StatusOr<HfImport> r = ReadHfConfig(text, origin);
  if (!r.ok()) return r.status();
  return std::move(r->shape);
}

absl::StatusOr<HfImport> LoadHfConfigWithNotes(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) &&
      (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) > kMaxConfigBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file of at most 16 MiB"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ReadHfConfig(ss.str(), path);
}

absl::StatusOr<ModelShape> LoadHfConfig(const std::string& path) {
  absl::StatusOr<HfImport> r = LoadHfConfigWithNotes(path);
  if (!r.ok()) return r.status();
  return std::move(r->shape);
}

}  // namespace stepcast
