#include "proto/architectures.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/catalog.h"
#include "proto/codec.h"

namespace stepcast {
namespace {

// The ModelShape fields an HfKey may set (proto/stepcast/v1/architecture.proto HfKey.field).
const std::set<std::string>& KnownFields() {
  static const std::set<std::string> k = {
      "layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "ffn_hidden_size", "vocab_size",
      "tied_embeddings", "linear_bias", "learned_position_embeddings", "moe.routed_experts", "moe.top_k",
      "moe.expert_ffn_hidden_size", "moe.shared_experts", "moe.shared_expert_ffn_hidden_size", "moe.layer_freq",
      "moe.first_dense_layers", "mla.q_lora_rank", "mla.kv_lora_rank", "mla.qk_nope_head_dim", "mla.qk_rope_head_dim",
      "mla.v_head_dim", "local_attention_window", "global_attention_every", "attention_logit_softcap",
      "final_logit_softcap", "mtp_layers", "mamba.state_dim", "mamba.head_dim", "mamba.num_groups", "mamba.num_heads",
      "mamba.conv_kernel", "mamba.chunk_size", "moe.latent_size", "mtp_repeated_layer", "moe.routed_groups",
      "moe.max_routed_groups"};
  return k;
}
const std::set<std::string>& KnownRules() {
  static const std::set<std::string> k = {"",           "activation",         "layer_types", "moe_layer_indices",
                                          "nope_layers", "shared_expert_size", "sparse_step", "moe_layer_freq", "plus_offset",
                                          "equals_hidden", "hybrid_pattern", "hybrid_mtp_pattern"};
  return k;
}

std::vector<std::string> KeyNames(const v1::HfKey& k) {
  std::vector<std::string> v = {k.key()};
  v.insert(v.end(), k.aliases().begin(), k.aliases().end());
  return v;
}

}  // namespace

absl::StatusOr<const ArchitectureRegistry*> ArchitectureRegistry::Builtin() {
  static const absl::StatusOr<const ArchitectureRegistry*> kRegistry = []() -> absl::StatusOr<const ArchitectureRegistry*> {
    auto* r = new ArchitectureRegistry();
    for (const EmbeddedPreset& p : EmbeddedPresets()) {
      if (!absl::StartsWith(p.path, "architectures/")) continue;
      if (absl::Status s = r->Add(absl::StrCat("presets/", p.path), p.text); !s.ok()) return s;
    }
    if (absl::Status s = r->Check(); !s.ok()) return s;
    return r;
  }();
  return kRegistry;
}

absl::Status ArchitectureRegistry::Add(absl::string_view origin, absl::string_view yaml) {
  v1::Architecture a;
  if (absl::Status s = ParseMessage(yaml, SpecFormat::kYaml, origin, &a); !s.ok()) return s;
  auto bad = [&](const std::string& why) { return absl::InvalidArgumentError(absl::StrCat(origin, ": ", why)); };
  if (a.name().empty()) return bad("name: required");
  if (a.name() == "common") {
    common_ = std::move(a);
    return absl::OkStatus();
  }
  if (entries_.count(a.name())) return bad(absl::StrCat("name: '", a.name(), "' is already in the registry"));
  if (a.sources_size() == 0) return bad("sources: at least one source is required");
  for (int i = 0; i < a.hf().keys_size(); ++i) {
    const v1::HfKey& k = a.hf().keys(i);
    const std::string where = absl::StrCat("hf.keys[", i, "] (", k.key(), ")");
    if (k.key().empty()) return bad(absl::StrCat(where, ".key: required"));
    if (!KnownFields().count(k.field()) && !k.field().empty()) {
      return bad(absl::StrCat(where, ".field: '", k.field(), "' is not a field the reader sets"));
    }
    if (!KnownRules().count(k.rule())) return bad(absl::StrCat(where, ".rule: '", k.rule(), "' is not a known rule"));
    if (k.field().empty() && k.rule().empty()) return bad(absl::StrCat(where, ": a field or a rule is required"));
  }
  for (const std::string& t : a.hf().model_types()) {
    const std::string lower = absl::AsciiStrToLower(t);
    if (hf_types_.count(lower)) {
      return bad(absl::StrCat("hf.model_types: '", t, "' is already read by ", hf_types_[lower]));
    }
    hf_types_[lower] = a.name();
  }
  entries_[a.name()] = std::move(a);
  return absl::OkStatus();
}

absl::Status ArchitectureRegistry::Check() const {
  for (const auto& [name, a] : entries_) {
    std::set<std::string> seen = {name};
    for (const v1::Architecture* e = &a; !e->hf().keys_from().empty();) {
      const v1::Architecture* base = Find(e->hf().keys_from());
      if (base == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("presets/architectures/", e->name(), ".yaml: hf.keys_from: '",
                                                       e->hf().keys_from(), "' is not in the registry"));
      }
      if (!seen.insert(base->name()).second) {
        return absl::InvalidArgumentError(absl::StrCat("presets/architectures/", name, ".yaml: hf.keys_from: a cycle"));
      }
      e = base;
    }
  }
  return absl::OkStatus();
}

const v1::Architecture* ArchitectureRegistry::Find(absl::string_view name) const {
  auto it = entries_.find(std::string(name));
  return it == entries_.end() ? nullptr : &it->second;
}

const v1::Architecture* ArchitectureRegistry::ForHfModelType(absl::string_view model_type) const {
  auto it = hf_types_.find(absl::AsciiStrToLower(model_type));
  return it == hf_types_.end() ? nullptr : Find(it->second);
}

const v1::Architecture* ArchitectureRegistry::ForModelName(absl::string_view name, bool moe) const {
  const std::string n = absl::AsciiStrToLower(name);
  // A refused family's pattern anywhere in the name wins over every transformer family: a name
  // stating a layer kind stepcast does not model ("Llama3.2-Mamba2-3B") names a model it cannot
  // predict, whatever transformer family's name it also carries. Then only the refused and the
  // hybrid families (nemotron_h) compete, by place: "Nemotron 3 Nano (hybrid Mamba-2)" is
  // nemotron_h's, "Jamba (Mamba)" hybrid_ssm's. Without a refused match every family competes by
  // place: "Llama-3.1-Nemotron-Nano-8B" (a Llama transformer) is llama's.
  bool refused_match = false;
  for (const auto& [key, a] : entries_) {
    if (a.refused().empty()) continue;
    for (const std::string& pattern : a.model_names()) refused_match |= !pattern.empty() && n.find(pattern) != std::string::npos;
  }
  const v1::Architecture* best = nullptr;
  size_t best_at = std::string::npos, best_len = 0;
  for (const auto& [key, a] : entries_) {
    if (refused_match && a.refused().empty() && !a.hybrid()) continue;
    for (const std::string& pattern : a.model_names()) {
      const size_t at = n.find(pattern);
      if (at == std::string::npos || pattern.empty()) continue;
      const bool better = best == nullptr || at < best_at || (at == best_at && pattern.size() > best_len) ||
                          (at == best_at && pattern.size() == best_len && a.moe() == moe && best->moe() != moe);
      if (better) {
        best = &a;
        best_at = at;
        best_len = pattern.size();
      }
    }
  }
  return best;
}

const v1::FamilyModel* ArchitectureRegistry::ModelOf(const v1::Architecture& family, absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  for (const v1::FamilyModel& m : family.models()) {
    for (const std::string& s : m.names()) {
      if (!s.empty() && absl::StrContains(n, s)) return &m;
    }
  }
  return nullptr;
}

const v1::Architecture* ArchitectureRegistry::ForTorchtitanModule(absl::string_view module) const {
  for (const auto& [name, a] : entries_) {
    for (const std::string& m : a.torchtitan_modules()) {
      if (m == module) return &a;
    }
  }
  return nullptr;
}

const v1::Architecture* ArchitectureRegistry::ForMegatronProvider(absl::string_view provider) const {
  for (const auto& [name, a] : entries_) {
    for (const std::string& p : a.megatron_providers()) {
      if (p == provider) return &a;
    }
  }
  return nullptr;
}

std::vector<v1::HfKey> ArchitectureRegistry::HfKeys(const v1::Architecture& a) const {
  std::vector<v1::HfKey> out;
  if (const v1::Architecture* base = a.hf().keys_from().empty() ? nullptr : Find(a.hf().keys_from())) {
    out = HfKeys(*base);
  }
  // The family's own keys replace the base's entries that share a key or an alias, and a key the
  // family lists (reads as not modelled) is not read by the base's entry.
  std::set<std::string> own;
  for (const v1::HfKey& k : a.hf().keys()) {
    for (const std::string& n : KeyNames(k)) own.insert(n);
  }
  for (const v1::HfListedKey& l : a.hf().listed()) own.insert(l.key());
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](const v1::HfKey& k) {
                             for (const std::string& n : KeyNames(k)) {
                               if (own.count(n)) return true;
                             }
                             return false;
                           }),
            out.end());
  out.insert(out.end(), a.hf().keys().begin(), a.hf().keys().end());
  return out;
}

std::vector<v1::HfListedKey> ArchitectureRegistry::HfListed(const v1::Architecture& a) const {
  std::vector<v1::HfListedKey> out;
  if (const v1::Architecture* base = a.hf().keys_from().empty() ? nullptr : Find(a.hf().keys_from())) {
    out = HfListed(*base);
  }
  // The family's own listed keys replace the base's; a key the family reads (its own keys) is
  // not listed by the base's entry.
  std::set<std::string> own;
  for (const v1::HfListedKey& k : a.hf().listed()) own.insert(k.key());
  for (const v1::HfKey& k : a.hf().keys()) {
    for (const std::string& n : KeyNames(k)) own.insert(n);
  }
  out.erase(std::remove_if(out.begin(), out.end(), [&](const v1::HfListedKey& k) { return own.count(k.key()) > 0; }),
            out.end());
  out.insert(out.end(), a.hf().listed().begin(), a.hf().listed().end());
  return out;
}

std::vector<std::string> ArchitectureRegistry::HfModelTypes(bool refused) const {
  std::vector<std::string> v;
  for (const auto& [t, name] : hf_types_) {
    if (Find(name)->refused().empty() != refused) v.push_back(t);
  }
  return v;
}

std::vector<std::string> ArchitectureRegistry::Names() const {
  std::vector<std::string> v;
  for (const auto& [name, a] : entries_) v.push_back(name);
  return v;
}

void ApplyConventions(const v1::FamilyConventions& c, v1::ModelShape* s) {
  if (c.ffn_type() != v1::FFN_TYPE_UNSPECIFIED) s->set_ffn_type(c.ffn_type());
  if (c.norm_type() != v1::NORM_TYPE_UNSPECIFIED) s->set_norm_type(c.norm_type());
  if (c.has_linear_bias()) s->set_linear_bias(c.linear_bias());
  if (c.has_tied_embeddings()) s->set_tied_embeddings(c.tied_embeddings());
  if (c.position_encoding() != v1::POSITION_ENCODING_UNSPECIFIED &&
      c.position_encoding() != v1::POSITION_ENCODING_LEARNED) {
    // Learned positions need the table's size, which the caller knows (a row's sequence, a
    // config's key); rotary and ALiBi need nothing.
    s->set_position_encoding(c.position_encoding());
  }
  if (c.head_dim() > 0) s->set_head_dim(c.head_dim());
  if (c.local_attention_window() > 0) s->set_local_attention_window(c.local_attention_window());
  if (c.local_attention_kind() != v1::LOCAL_ATTENTION_KIND_UNSPECIFIED) {
    s->set_local_attention_kind(c.local_attention_kind());
  }
  if (c.global_attention_every() > 0) s->set_global_attention_every(c.global_attention_every());
  if (c.attention_sinks()) s->set_attention_sinks(true);
  if (c.attention_logit_softcap() > 0) s->set_attention_logit_softcap(c.attention_logit_softcap());
  if (c.final_logit_softcap() > 0) s->set_final_logit_softcap(c.final_logit_softcap());
  if (c.embedding_norm()) s->set_embedding_norm(true);
  if (c.activation_clamp()) s->set_activation_clamp(true);
  if (c.rope_attention_factor() > 0) s->set_rope_attention_factor(c.rope_attention_factor());
}

absl::Status ArchitectureFieldsFromProto(const v1::ModelShape& m, const std::string& prefix, ModelShape* s) {
  s->local_attention_window = m.local_attention_window();
  switch (m.local_attention_kind()) {
    case v1::LOCAL_ATTENTION_KIND_UNSPECIFIED:
    case v1::LOCAL_ATTENTION_KIND_SLIDING: s->local_attention_kind = LocalAttentionKind::kSliding; break;
    case v1::LOCAL_ATTENTION_KIND_CHUNKED: s->local_attention_kind = LocalAttentionKind::kChunked; break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, ".local_attention_kind: ", static_cast<int>(m.local_attention_kind()), " is not known"));
  }
  s->global_attention_every = m.global_attention_every();
  s->attention_sinks = m.attention_sinks();
  s->attention_logit_softcap = m.attention_logit_softcap();
  s->final_logit_softcap = m.final_logit_softcap();
  switch (m.position_encoding()) {
    case v1::POSITION_ENCODING_UNSPECIFIED: s->position_encoding = PositionEncoding::kDefault; break;
    case v1::POSITION_ENCODING_ROTARY: s->position_encoding = PositionEncoding::kRotary; break;
    case v1::POSITION_ENCODING_LEARNED: s->position_encoding = PositionEncoding::kLearned; break;
    case v1::POSITION_ENCODING_ALIBI: s->position_encoding = PositionEncoding::kAlibi; break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, ".position_encoding: ", static_cast<int>(m.position_encoding()), " is not known"));
  }
  s->embedding_norm = m.embedding_norm();
  s->mtp_layers = m.mtp_layers();
  s->activation_clamp = m.activation_clamp();
  if (!(m.rope_attention_factor() >= 0 && m.rope_attention_factor() < 100)) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, ".rope_attention_factor: ", m.rope_attention_factor(), " must be in [0, 100)"));
  }
  s->rope_attention_factor = m.rope_attention_factor();
  s->hybrid_layer_pattern = m.hybrid_layer_pattern();
  s->hybrid_mtp_pattern = m.hybrid_mtp_pattern();
  s->mtp_repeated_layer = m.mtp_repeated_layer();
  s->mamba.state_dim = m.mamba().state_dim();
  s->mamba.head_dim = m.mamba().head_dim();
  s->mamba.num_groups = m.mamba().num_groups();
  s->mamba.num_heads = m.mamba().num_heads();
  s->mamba.conv_kernel = m.mamba().conv_kernel();
  s->mamba.chunk_size = m.mamba().chunk_size();
  return absl::OkStatus();
}

void ArchitectureFieldsToProto(const ModelShape& s, v1::ModelShape* m) {
  m->set_local_attention_window(s.local_attention_window);
  if (s.local_attention_window > 0) {
    m->set_local_attention_kind(s.local_attention_kind == LocalAttentionKind::kChunked
                                    ? v1::LOCAL_ATTENTION_KIND_CHUNKED
                                    : v1::LOCAL_ATTENTION_KIND_SLIDING);
  }
  m->set_global_attention_every(s.global_attention_every);
  m->set_attention_sinks(s.attention_sinks);
  m->set_activation_clamp(s.activation_clamp);
  m->set_rope_attention_factor(s.rope_attention_factor);
  m->set_attention_logit_softcap(s.attention_logit_softcap);
  m->set_final_logit_softcap(s.final_logit_softcap);
  switch (s.position_encoding) {
    case PositionEncoding::kDefault: m->set_position_encoding(v1::POSITION_ENCODING_UNSPECIFIED); break;
    case PositionEncoding::kRotary: m->set_position_encoding(v1::POSITION_ENCODING_ROTARY); break;
    case PositionEncoding::kLearned: m->set_position_encoding(v1::POSITION_ENCODING_LEARNED); break;
    case PositionEncoding::kAlibi: m->set_position_encoding(v1::POSITION_ENCODING_ALIBI); break;
  }
  m->set_embedding_norm(s.embedding_norm);
  m->set_mtp_layers(s.mtp_layers);
  m->set_mtp_repeated_layer(s.mtp_repeated_layer);
  m->set_hybrid_mtp_pattern(s.hybrid_mtp_pattern);
  if (s.Hybrid() || s.mamba != MambaShape{}) {
    m->set_hybrid_layer_pattern(s.hybrid_layer_pattern);
    v1::MambaShape* mb = m->mutable_mamba();
    mb->set_state_dim(s.mamba.state_dim);
    mb->set_head_dim(s.mamba.head_dim);
    mb->set_num_groups(s.mamba.num_groups);
    mb->set_num_heads(s.mamba.num_heads);
    mb->set_conv_kernel(s.mamba.conv_kernel);
    mb->set_chunk_size(s.mamba.chunk_size);
  }
}

}  // namespace stepcast
