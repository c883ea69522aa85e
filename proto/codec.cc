#include "proto/codec.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include <sys/stat.h>

#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "proto/catalog.h"
#include "proto/interval_table.h"
#include "proto/architectures.h"
#include "proto/hf_config.h"
#include "proto/job_defaults.h"
#include "proto/profile_schema.h"
#include "proto/published_runs.h"
#include "yaml-cpp/depthguard.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/parser.h"
#include "yaml-cpp/yaml.h"

namespace stepcast {

namespace pb = google::protobuf;

absl::Status CheckInputFile(const std::string& path, int64_t max_bytes) {
  struct stat st {};
  // stat, not open: opening a FIFO blocks until a writer comes (reliability review M10).
  if (::stat(path.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file (a device, FIFO or directory); give a file"));
  }
  if (st.st_size > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", st.st_size, " bytes, above the ", max_bytes, "-byte limit for an input file"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadInputFile(const std::string& path, int64_t max_bytes) {
  if (absl::Status s = CheckInputFile(path, max_bytes); !s.ok()) return s;
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  // Read at most max_bytes + 1 even if the file grew after the stat, in chunks: a buffer of
  // max_bytes zeroed up front cost every one-shot command 16 MiB of page faults (~10 ms).
  std::string out;
  char chunk[64 << 10];
  while (in && static_cast<int64_t>(out.size()) <= max_bytes) {
    const int64_t want = std::min<int64_t>(sizeof chunk, max_bytes + 1 - static_cast<int64_t>(out.size()));
    in.read(chunk, static_cast<std::streamsize>(want));
    out.append(chunk, static_cast<size_t>(in.gcount()));
  }
  if (static_cast<int64_t>(out.size()) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": above the ", max_bytes, "-byte limit for an input file"));
  }
  return out;
}

namespace {

// The fields of a message type that can hold a NaN or an infinity, in field-number order (the
// order of Reflection::ListFields): double and float fields, and message fields (not maps) whose
// type has such fields at any depth. Built once per type and thread: a request's JobSpec then
// costs a read of each floating-point field and a presence check of each such sub-message, not
// a ListFields of every message.
const std::vector<const pb::FieldDescriptor*>& FloatingFields(const pb::Descriptor* d) {
  using FD = pb::FieldDescriptor;
  thread_local std::unordered_map<const pb::Descriptor*, std::vector<const FD*>> plans;
  thread_local std::unordered_map<const pb::Descriptor*, int> has_floating;  // 0: being decided, 1: no, 2: yes
  if (auto it = plans.find(d); it != plans.end()) return it->second;
  // Whether a type has floating-point fields at any depth; a type met again while it is being
  // decided (a recursive message) counts as having them, which only costs a presence check.
  std::function<bool(const pb::Descriptor*)> has = [&](const pb::Descriptor* t) {
    if (auto it = has_floating.find(t); it != has_floating.end()) return it->second != 1;
    has_floating[t] = 0;
    bool any = false;
    for (int i = 0; i < t->field_count() && !any; ++i) {
      const FD* f = t->field(i);
      if (f->cpp_type() == FD::CPPTYPE_DOUBLE || f->cpp_type() == FD::CPPTYPE_FLOAT) any = true;
      if (f->cpp_type() == FD::CPPTYPE_MESSAGE && !f->is_map() && has(f->message_type())) any = true;
    }
    has_floating[t] = any ? 2 : 1;
    return any;
  };
  std::vector<const FD*> fields;
  for (int i = 0; i < d->field_count(); ++i) {
    const FD* f = d->field(i);
    if (f->cpp_type() == FD::CPPTYPE_DOUBLE || f->cpp_type() == FD::CPPTYPE_FLOAT ||
        (f->cpp_type() == FD::CPPTYPE_MESSAGE && !f->is_map() && has(f->message_type()))) {
      fields.push_back(f);
    }
  }
  std::sort(fields.begin(), fields.end(), [](const FD* x, const FD* y) { return x->number() < y->number(); });
  return plans.emplace(d, std::move(fields)).first->second;
}

// The first NaN or infinite double/float field of `msg` (depth first, fields in number order):
// true with its value in `bad` and its path in `trail` (outermost first; index -1 for a singular
// field). No string is built unless one is found: every request passes here.
bool FindNonFinite(const pb::Message& msg, std::vector<std::pair<const pb::FieldDescriptor*, int>>& trail,
                   double& bad) {
  using FD = pb::FieldDescriptor;
  const pb::Reflection* r = msg.GetReflection();
  for (const FD* f : FloatingFields(msg.GetDescriptor())) {
    const bool repeated = f->is_repeated();
    int n = 1;
    if (repeated) {
      n = r->FieldSize(msg, f);
    } else if (f->cpp_type() == FD::CPPTYPE_MESSAGE && !r->HasField(msg, f)) {
      continue;
    }
    for (int i = 0; i < n; ++i) {
      switch (f->cpp_type()) {
        case FD::CPPTYPE_DOUBLE: {
          const double x = repeated ? r->GetRepeatedDouble(msg, f, i) : r->GetDouble(msg, f);
          if (!std::isfinite(x)) {
            trail.emplace_back(f, repeated ? i : -1);
            bad = x;
            return true;
          }
          break;
        }
        case FD::CPPTYPE_FLOAT: {
          const double x = repeated ? r->GetRepeatedFloat(msg, f, i) : r->GetFloat(msg, f);
          if (!std::isfinite(x)) {
            trail.emplace_back(f, repeated ? i : -1);
            bad = x;
            return true;
          }
          break;
        }
        default: {  // a message (FloatingFields holds no other kind)
          const pb::Message& sub = repeated ? r->GetRepeatedMessage(msg, f, i) : r->GetMessage(msg, f);
          trail.emplace_back(f, repeated ? i : -1);
          if (FindNonFinite(sub, trail, bad)) return true;
          trail.pop_back();
          break;
        }
      }
    }
  }
  return false;
}

}  // namespace

absl::Status CheckFiniteNumbers(const pb::Message& msg, const std::string& path) {
  std::vector<std::pair<const pb::FieldDescriptor*, int>> trail;
  double bad = 0;
  if (!FindNonFinite(msg, trail, bad)) return absl::OkStatus();
  std::string p = path;
  for (const auto& [f, i] : trail) {
    p = p.empty() ? f->name() : absl::StrCat(p, ".", f->name());
    if (i >= 0) absl::StrAppend(&p, "[", i, "]");
  }
  return absl::InvalidArgumentError(absl::StrCat(p, ": ", std::isnan(bad) ? "NaN" : "infinity",
                                                 " is not a number stepcast accepts; give a finite value"));
}

absl::StatusOr<SpecFormat> FormatFromPath(absl::string_view path) {
  const std::string p = absl::AsciiStrToLower(path);
  if (absl::EndsWith(p, ".yaml") || absl::EndsWith(p, ".yml")) return SpecFormat::kYaml;
  if (absl::EndsWith(p, ".json")) return SpecFormat::kJson;
  for (const char* ext : {".textproto", ".txtpb", ".pbtxt", ".txt"}) {
    if (absl::EndsWith(p, ext)) return SpecFormat::kTextProto;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": unknown file type; use .yaml, .yml, .json or .textproto"));
}

void JsonString(absl::string_view s, std::string& out) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

namespace {

absl::Status FieldError(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
}

std::string Join(const std::string& path, absl::string_view name) {
  return path.empty() ? std::string(name) : absl::StrCat(path, ".", name);
}

// "D_TYPE_UNSPECIFIED" -> "D_TYPE_".
std::string EnumPrefix(const pb::EnumDescriptor* e) {
  std::string zero = e->value(0)->name();
  const std::string suffix = "UNSPECIFIED";
  if (absl::EndsWith(zero, suffix)) zero.resize(zero.size() - suffix.size());
  return zero;
}

std::string ShortEnumNames(const pb::EnumDescriptor* e) {
  const std::string prefix = EnumPrefix(e);
  std::vector<std::string> names;
  for (int i = 1; i < e->value_count(); ++i) {
    names.push_back(absl::AsciiStrToLower(e->value(i)->name().substr(prefix.size())));
  }
  return absl::StrJoin(names, ", ");
}

// The names of a oneof's fields, "preset, shape, hf_config".
std::string OneofFieldNames(const pb::OneofDescriptor* o) {
  std::vector<std::string> names;
  for (int i = 0; i < o->field_count(); ++i) names.push_back(o->field(i)->name());
  return absl::StrJoin(names, ", ");
}

absl::Status WalkMessage(const YAML::Node& node, const pb::Descriptor* d, const std::string& path,
                         std::string& out);

// Set while ParseMessage walks a JSON document (duplicate keys are an error there).
thread_local bool tl_reject_duplicate_keys = false;

absl::Status WalkScalar(const YAML::Node& node, const pb::FieldDescriptor* f,
                        const std::string& path, std::string& out) {
  using FD = pb::FieldDescriptor;
  if (f->cpp_type() == FD::CPPTYPE_MESSAGE) return WalkMessage(node, f->message_type(), path, out);
  if (!node.IsScalar()) return FieldError(path, "expected a single value, got a list or a map");
  const std::string v = node.Scalar();
  switch (f->cpp_type()) {
    case FD::CPPTYPE_STRING: JsonString(v, out); return absl::OkStatus();
    case FD::CPPTYPE_BOOL: {
      const std::string l = absl::AsciiStrToLower(v);
      if (l == "true" || l == "yes" || l == "on") { out += "true"; return absl::OkStatus(); }
      if (l == "false" || l == "no" || l == "off") { out += "false"; return absl::OkStatus(); }
      return FieldError(path, absl::StrCat("'", v, "' is not a boolean (true/false)"));
    }
    case FD::CPPTYPE_INT32:
    case FD::CPPTYPE_INT64:
    case FD::CPPTYPE_UINT32:
    case FD::CPPTYPE_UINT64: {
      // Digits are read exactly over the field's whole range (a CUPTI timestamp in ns is ~1.8e18,
      // past a double's 2^53); other spellings ("1e6", "4.0") through a double, up to 9e15.
      const bool is_signed = f->cpp_type() == FD::CPPTYPE_INT32 || f->cpp_type() == FD::CPPTYPE_INT64;
      const bool is_32 = f->cpp_type() == FD::CPPTYPE_INT32 || f->cpp_type() == FD::CPPTYPE_UINT32;
      if (is_signed) {
        int64_t i = 0;
        if (absl::SimpleAtoi(v, &i)) {
          if (is_32 && (i < INT32_MIN || i > INT32_MAX)) {
            return FieldError(path, absl::StrCat("'", v, "' is out of range for a 32-bit integer"));
          }
          out += std::to_string(i);
          return absl::OkStatus();
        }
      } else {
        uint64_t u = 0;
        if (absl::SimpleAtoi(v, &u)) {
          if (is_32 && u > UINT32_MAX) {
            return FieldError(path, absl::StrCat("'", v, "' is out of range for a 32-bit integer"));
          }
          out += std::to_string(u);
          return absl::OkStatus();
        }
      }
      errno = 0;
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || errno != 0 || !std::isfinite(x) || x != std::floor(x) ||
          std::fabs(x) > 9.0e15) {
        return FieldError(path, absl::StrCat("'", v, "' is not an integer"));
      }
      out += absl::StrFormat("%.0f", x);
      return absl::OkStatus();
    }
    case FD::CPPTYPE_DOUBLE:
    case FD::CPPTYPE_FLOAT: {
      errno = 0;
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || errno != 0 || !std::isfinite(x)) {
        return FieldError(path, absl::StrCat("'", v, "' is not a number"));
      }
      out += absl::StrFormat("%.17g", x);
      return absl::OkStatus();
    }
    case FD::CPPTYPE_ENUM: {
      const pb::EnumDescriptor* e = f->enum_type();
      std::string name = absl::AsciiStrToUpper(v);
      for (char& c : name) {
        if (c == '-' || c == ' ') c = '_';
      }
      const pb::EnumValueDescriptor* ev = e->FindValueByName(name);
      if (ev == nullptr) ev = e->FindValueByName(EnumPrefix(e) + name);
      if (ev == nullptr || ev->number() == 0) {
        return FieldError(path, absl::StrCat("'", v, "' is not one of: ", ShortEnumNames(e)));
      }
      JsonString(ev->name(), out);
      return absl::OkStatus();
    }
    default: return FieldError(path, "unsupported field type");
  }
}

absl::Status WalkMessage(const YAML::Node& node, const pb::Descriptor* d, const std::string& path,
                         std::string& out) {
  if (!node || node.IsNull()) {
    out += "{}";
    return absl::OkStatus();
  }
  if (node.IsScalar()) {
    // Shorthand: `model: llama3-8b` for `model: {preset: llama3-8b}`.
    const pb::FieldDescriptor* preset = d->FindFieldByName("preset");
    if (preset != nullptr && preset->type() == pb::FieldDescriptor::TYPE_STRING) {
      out += "{\"preset\":";
      JsonString(node.Scalar(), out);
      out += "}";
      return absl::OkStatus();
    }
    return FieldError(path.empty() ? "(top level)" : path,
                      absl::StrCat("expected a map of fields, got '", node.Scalar(), "'"));
  }
  if (!node.IsMap()) {
    return FieldError(path.empty() ? "(top level)" : path, "expected a map of fields, got a list");
  }
  out.push_back('{');
  bool first = true;
  std::unordered_set<const pb::FieldDescriptor*> seen;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    const std::string fpath = Join(path, key);
    // YAML aliases are expanded here: a few KB of nested aliases would otherwise expand to GBs
    // (the "billion laughs" alias bomb, reliability review M10).
    if (out.size() > kMaxExpandedSpecBytes) {
      return FieldError(fpath, absl::StrCat("the document expands to more than ", kMaxExpandedSpecBytes,
                                            " bytes (YAML aliases?); refusing it"));
    }
    const pb::FieldDescriptor* f = d->FindFieldByName(key);
    if (f == nullptr) f = d->FindFieldByCamelcaseName(key);
    if (f == nullptr) {
      std::vector<std::string> known;
      for (int i = 0; i < d->field_count(); ++i) known.push_back(d->field(i)->name());
      return FieldError(fpath, absl::StrCat("unknown field; known fields: ", absl::StrJoin(known, ", ")));
    }
    // A key given twice in JSON: the last would win silently (reliability review M8). (YAML
    // documents keep yaml-cpp's last-wins: the tests override a base document that way.)
    if (!seen.insert(f).second && tl_reject_duplicate_keys) {
      return FieldError(fpath, "given twice; give each field once");
    }
    // Two members of one oneof (model: {preset: ..., hf_config: ...}): protobuf's JSON reader
    // would say only "oneof field 'source' is already set".
    if (const pb::OneofDescriptor* o = f->real_containing_oneof(); o != nullptr) {
      for (const pb::FieldDescriptor* other : seen) {
        if (other != f && other->real_containing_oneof() == o) {
          return FieldError(fpath, absl::StrCat("'", other->name(), "' and '", f->name(),
                                                "' are alternatives (one of: ", OneofFieldNames(o), "); give one"));
        }
      }
    }
    if (!first) out.push_back(',');
    first = false;
    JsonString(f->name(), out);
    out.push_back(':');
    if (f->is_map()) {
      // proto3 map<K, V>: a map in YAML and JSON alike ({"nccl:all_reduce": 0.1}); its keys are
      // strings in protobuf's JSON, its values walked as the entry's value field.
      const YAML::Node& m = kv.second;
      if (m.IsNull()) {
        out += "{}";
        continue;
      }
      if (!m.IsMap()) return FieldError(fpath, "expected a map of keys to values");
      const pb::FieldDescriptor* value = f->message_type()->map_value();
      out.push_back('{');
      bool first_entry = true;
      std::unordered_set<std::string> keys;
      for (const auto& entry : m) {
        if (!entry.first.IsScalar()) return FieldError(fpath, "a map key must be a single value");
        const std::string k = entry.first.Scalar();
        if (!keys.insert(k).second && tl_reject_duplicate_keys) {
          return FieldError(absl::StrCat(fpath, "[", k, "]"), "given twice; give each key once");
        }
        if (!first_entry) out.push_back(',');
        first_entry = false;
        JsonString(k, out);
        out.push_back(':');
        if (absl::Status st = WalkScalar(entry.second, value, absl::StrCat(fpath, "[", k, "]"), out); !st.ok()) {
          return st;
        }
      }
      out.push_back('}');
    } else if (f->is_repeated()) {
      const YAML::Node& seq = kv.second;
      if (!seq.IsSequence()) return FieldError(fpath, "expected a list");
      out.push_back('[');
      for (size_t i = 0; i < seq.size(); ++i) {
        if (i) out.push_back(',');
        if (out.size() > kMaxExpandedSpecBytes) {
          return FieldError(fpath, absl::StrCat("the document expands to more than ", kMaxExpandedSpecBytes,
                                                " bytes (YAML aliases?); refusing it"));
        }
        if (absl::Status s = WalkScalar(seq[i], f, absl::StrCat(fpath, "[", i, "]"), out); !s.ok()) return s;
      }
      out.push_back(']');
    } else {
      if (absl::Status s = WalkScalar(kv.second, f, fpath, out); !s.ok()) return s;
    }
  }
  out.push_back('}');
  return absl::OkStatus();
}

class TextErrors : public pb::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

absl::StatusOr<std::string> ReadFile(const std::string& path) { return ReadInputFile(path); }

}  // namespace

namespace {

// 1-based line and column (in bytes) of offset `at` in `text`.
struct TextPosition {
  int line = 1, column = 1;
};
TextPosition PositionOf(absl::string_view text, size_t at) {
  TextPosition p;
  for (size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

// Offset of the first byte that does not start or continue a well-formed UTF-8 sequence
// (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF), or npos. (protobuf 3.21 has one
// only as internal API, UTF8SpnStructurallyValid; abseil 20220623 has none.)
size_t FirstInvalidUtf8(absl::string_view s) {
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = u[i];
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (u[i + 1] < lo || u[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if (u[i + k] < 0x80 || u[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return absl::string_view::npos;
}

}  // namespace

absl::Status ParseMessage(absl::string_view text, SpecFormat format, absl::string_view origin,
                          pb::Message* msg) {
  if (format == SpecFormat::kTextProto) {
    pb::TextFormat::Parser parser;
    TextErrors errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(std::string(text), msg)) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": ", errors.first()));
    }
    // Text proto spells nan and inf, which the YAML walker never sees.
    if (absl::Status s = CheckFiniteNumbers(*msg, ""); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": ", s.message()));
    }
    return absl::OkStatus();
  }
  // Text checks before the YAML parser, whose messages for these name neither the cause nor the
  // place (reliability review L3: "unknown escape character", "Encountered non UTF-8 code
  // points" followed by internal JSON).
  if (const size_t nul = text.find('\0'); nul != absl::string_view::npos) {
    const TextPosition at = PositionOf(text, nul);
    return absl::InvalidArgumentError(absl::StrCat(origin, ": line ", at.line, ":", at.column,
                                                   ": a NUL byte; a job file is UTF-8 text (a binary or UTF-16 file?)"));
  }
  if (const size_t bad = FirstInvalidUtf8(text); bad != absl::string_view::npos) {
    const TextPosition at = PositionOf(text, bad);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: line %d:%d: byte 0x%02X is not valid UTF-8; save the file as UTF-8", origin, at.line, at.column,
        static_cast<unsigned char>(text[bad])));
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
    // A second document (after "---", or text after a JSON object's end, which yaml-cpp reads as
    // one) would otherwise be dropped in silence.
    if (const int line = SecondYamlDocumentLine(std::string(text), root); line > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": line ", line,
          format == SpecFormat::kJson ? ": text after the end of the JSON object"
                                      : ": a second YAML document; a file holds one (drop the '---' and what follows, "
                                        "or merge the two)"));
    }
  } catch (const YAML::DeepRecursion& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": line ", e.mark.line + 1, ":", e.mark.column + 1,
                                                   ": nested ", e.depth(),
                                                   " levels deep or more (the YAML parser's limit); a job is a few levels deep"));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": line ", e.mark.line + 1, ":",
                                                   e.mark.column + 1, ": ", e.msg));
  }
  std::string json;
  tl_reject_duplicate_keys = format == SpecFormat::kJson;
  absl::Status walked = WalkMessage(root, msg->GetDescriptor(), "", json);
  tl_reject_duplicate_keys = false;
  if (absl::Status s = walked; !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", s.message()));
  }
  pb::util::JsonParseOptions opts;
  if (auto s = pb::util::JsonStringToMessage(json, msg, opts); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", s.message().as_string()));
  }
  return absl::OkStatus();
}

namespace {
// The mark of a document's first node, if it has one that is not null (yaml-cpp event parser).
class FirstContent : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> mark;
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { Seen(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { Seen(m); }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Seen(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Seen(m);
  }
  void OnMapEnd() override {}

 private:
  void Seen(const YAML::Mark& m) {
    if (!mark) mark = m;
  }
};

// Whether a line of `text` starts with a YAML document marker ("---" or "...", then a blank or the
// line's end).
bool DocumentMarkerLine(const std::string& text) {
  for (size_t at = 0; at < text.size();) {
    if ((text.compare(at, 3, "---") == 0 || text.compare(at, 3, "...") == 0) &&
        (at + 3 == text.size() || absl::ascii_isspace(static_cast<unsigned char>(text[at + 3])))) {
      return true;
    }
    const size_t nl = text.find('\n', at);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return false;
}
}  // namespace

int SecondYamlDocumentLine(const std::string& text, const YAML::Node& first) {
  // A block collection ends its document only at a marker line: nothing to read again without one.
  if ((first.IsMap() || first.IsSequence()) && first.Style() != YAML::EmitterStyle::Flow && !DocumentMarkerLine(text)) {
    return 0;
  }
  std::istringstream in(text);
  YAML::Parser parser(in);
  try {
    FirstContent first;
    if (!parser.HandleNextDocument(first)) return 0;
    FirstContent second;
    if (!parser.HandleNextDocument(second)) return 0;
    return second.mark ? second.mark->line + 1 : 0;
  } catch (const YAML::Exception& e) {
    return e.mark.line + 1;  // what follows the first document does not parse: content all the same
  }
}

absl::Status ParseMessageFile(const std::string& path, pb::Message* msg) {
  absl::StatusOr<SpecFormat> fmt = FormatFromPath(path);
  if (!fmt.ok()) return fmt.status();
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseMessage(*text, *fmt, path, msg);
}

namespace {

DType FromProto(v1::DType d, DType unspecified) {
  switch (d) {
    case v1::D_TYPE_FP32: return DType::kFP32;
    case v1::D_TYPE_TF32: return DType::kTF32;
    case v1::D_TYPE_BF16: return DType::kBF16;
    case v1::D_TYPE_FP16: return DType::kFP16;
    case v1::D_TYPE_FP8: return DType::kFP8;
    case v1::D_TYPE_INT8: return DType::kINT8;
    default: return unspecified;
  }
}
v1::DType ToProto(DType d) {
  switch (d) {
    case DType::kFP32: return v1::D_TYPE_FP32;
    case DType::kTF32: return v1::D_TYPE_TF32;
    case DType::kBF16: return v1::D_TYPE_BF16;
    case DType::kFP16: return v1::D_TYPE_FP16;
    case DType::kFP8: return v1::D_TYPE_FP8;
    case DType::kINT8: return v1::D_TYPE_INT8;
  }
  return v1::D_TYPE_UNSPECIFIED;
}
Collective FromProto(v1::Collective c) {
  switch (c) {
    case v1::COLLECTIVE_ALL_GATHER: return Collective::kAllGather;
    case v1::COLLECTIVE_REDUCE_SCATTER: return Collective::kReduceScatter;
    case v1::COLLECTIVE_ALL_TO_ALL: return Collective::kAllToAll;
    case v1::COLLECTIVE_SEND_RECV: return Collective::kSendRecv;
    default: return Collective::kAllReduce;
  }
}
v1::Collective ToProto(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return v1::COLLECTIVE_ALL_REDUCE;
    case Collective::kAllGather: return v1::COLLECTIVE_ALL_GATHER;
    case Collective::kReduceScatter: return v1::COLLECTIVE_REDUCE_SCATTER;
    case Collective::kAllToAll: return v1::COLLECTIVE_ALL_TO_ALL;
    case Collective::kSendRecv: return v1::COLLECTIVE_SEND_RECV;
  }
  return v1::COLLECTIVE_UNSPECIFIED;
}

}  // namespace

v1::DType DTypeToProto(DType d) { return ToProto(d); }
DType DTypeFromProto(v1::DType d) { return FromProto(d, DType::kBF16); }
v1::Collective CollectiveToProto(Collective c) { return ToProto(c); }
Collective CollectiveFromProto(v1::Collective c) { return FromProto(c); }

absl::StatusOr<ModelShape> ModelShapeFromProto(const v1::ModelShape& m, const std::string& prefix) {
  ModelShape s;
  s.name = m.name();
  s.layers = m.layers();
  s.hidden_size = m.hidden_size();
  s.attention_heads = m.attention_heads();
  s.kv_heads = m.kv_heads();
  s.head_dim = m.head_dim();
  s.ffn_hidden_size = m.ffn_hidden_size();
  switch (m.ffn_type()) {
    case v1::FFN_TYPE_SWIGLU: s.ffn_type = FfnType::kSwiGlu; break;
    case v1::FFN_TYPE_GEGLU: s.ffn_type = FfnType::kGeGlu; break;
    case v1::FFN_TYPE_SQUARED_RELU: s.ffn_type = FfnType::kSquaredRelu; break;
    default: s.ffn_type = FfnType::kGelu;
  }
  if (m.ffn_type() == v1::FFN_TYPE_UNSPECIFIED) {
    return FieldError(prefix + ".ffn_type", "required (gelu or swiglu)");
  }
  s.vocab_size = m.vocab_size();
  s.tied_embeddings = m.tied_embeddings();
  s.linear_bias = m.linear_bias();
  s.learned_position_embeddings = m.learned_position_embeddings();
  s.norm_type = m.norm_type() == v1::NORM_TYPE_RMSNORM ? NormType::kRmsNorm : NormType::kLayerNorm;
  s.moe.routed_experts = m.moe().routed_experts();
  s.moe.top_k = m.moe().top_k();
  s.moe.expert_ffn_hidden_size = m.moe().expert_ffn_hidden_size();
  s.moe.shared_experts = m.moe().shared_experts();
  s.moe.shared_expert_ffn_hidden_size = m.moe().shared_expert_ffn_hidden_size();
  s.moe.layer_freq = m.moe().layer_freq() == 0 ? 1 : m.moe().layer_freq();
  s.moe.first_dense_layers = m.moe().first_dense_layers();
  s.moe.routed_groups = m.moe().routed_groups();
  s.moe.max_routed_groups = m.moe().max_routed_groups();
  s.moe.latent_size = m.moe().latent_size();
  s.mla.q_lora_rank = m.mla().q_lora_rank();
  s.mla.kv_lora_rank = m.mla().kv_lora_rank();
  s.mla.qk_nope_head_dim = m.mla().qk_nope_head_dim();
  s.mla.qk_rope_head_dim = m.mla().qk_rope_head_dim();
  s.mla.v_head_dim = m.mla().v_head_dim();
  s.source = m.source();
  if (absl::Status st = ArchitectureFieldsFromProto(m, prefix, &s); !st.ok()) return st;
  if (absl::Status st = ValidateModelShape(s); !st.ok()) {
    std::string msg(st.message());
    if (absl::StartsWith(msg, "model.shape")) msg = prefix + msg.substr(std::string("model.shape").size());
    return absl::InvalidArgumentError(msg);
  }
  return s;
}

absl::StatusOr<RateProfile> RateProfileFromProto(const v1::RateProfile& p, const std::string& prefix) {
  RateProfile r;
  r.name = p.name();
  r.hardware = p.hardware();
  for (int i = 0; i < p.gemm_size(); ++i) {
    const auto& g = p.gemm(i);
    if (g.dtype() == v1::D_TYPE_UNSPECIFIED) {
      return FieldError(absl::StrCat(prefix, ".gemm[", i, "].dtype"), "required");
    }
    r.gemm.push_back({FromProto(g.dtype(), DType::kBF16), g.m(), g.n(), g.k(), g.flops_per_s(), g.source()});
  }
  r.attention_flops_per_s = p.attention_flops_per_s();
  r.attention_source = p.attention_source();
  r.hbm_bandwidth_bytes_per_s = p.hbm_bandwidth_bytes_per_s();
  r.hbm_source = p.hbm_source();
  r.fp8_split_accumulation_fraction = p.fp8_split_accumulation_fraction();
  r.fp8_split_accumulation_source = p.fp8_split_accumulation_source();
  if (!(r.fp8_split_accumulation_fraction >= 0 && r.fp8_split_accumulation_fraction <= 1)) {
    return FieldError(prefix + ".fp8_split_accumulation_fraction", "must be in (0, 1], or 0 for not known");
  }
  r.compute_rate_low_fraction = p.compute_rate_low_fraction();
  r.compute_rate_low_source = p.compute_rate_low_source();
  r.ssd_flops_per_s = p.ssd_flops_per_s();
  r.ssd_source = p.ssd_source();
  if (!(r.ssd_flops_per_s >= 0 && r.ssd_flops_per_s < 1e18)) {
    return FieldError(prefix + ".ssd_flops_per_s", "must be a rate in FLOP/s >= 0 (0: the model's default)");
  }
  if (r.ssd_flops_per_s > 0 && r.ssd_source.empty()) {
    return FieldError(prefix + ".ssd_source", "required with ssd_flops_per_s (where the rate was measured)");
  }
  r.host_launch_call_s = p.host_launch_call_s();
  r.host_gemm_call_s = p.host_gemm_call_s();
  r.host_calls_source = p.host_calls_source();
  // A host call above 10 ms is not a call's cost but a stall (a synchronisation, a full queue).
  for (const auto& [field, v] : {std::pair{".host_launch_call_s", r.host_launch_call_s},
                                 std::pair{".host_gemm_call_s", r.host_gemm_call_s}}) {
    if (!(v >= 0 && v <= 1e-2)) {
      return FieldError(prefix + field, "must be seconds per call in [0, 0.01] (0: the framework preset's figure)");
    }
  }
  if ((r.host_launch_call_s > 0 || r.host_gemm_call_s > 0) && r.host_calls_source.empty()) {
    return FieldError(prefix + ".host_calls_source",
                      "required with host_launch_call_s or host_gemm_call_s (where they were measured)");
  }
  if (!(r.compute_rate_low_fraction == 0 ||
        (r.compute_rate_low_fraction >= 0.1 && r.compute_rate_low_fraction <= 1))) {
    return FieldError(prefix + ".compute_rate_low_fraction",
                      "must be in [0.1, 1] (a part at under a tenth of the given rates is another part: give its own), "
                      "or 0 for rates that are the part's own");
  }
  if (r.compute_rate_low_fraction > 0 && r.compute_rate_low_source.empty()) {
    return FieldError(prefix + ".compute_rate_low_source", "required with compute_rate_low_fraction (where the bound comes from)");
  }
  for (int i = 0; i < p.collectives_size(); ++i) {
    const auto& c = p.collectives(i);
    const std::string f = absl::StrCat(prefix, ".collectives[", i, "]");
    if (c.collective() == v1::COLLECTIVE_UNSPECIFIED) return FieldError(f + ".collective", "required");
    if (c.scope() == v1::SCOPE_UNSPECIFIED) return FieldError(f + ".scope", "required (intra_node or inter_node)");
    CollectiveRate cr;
    cr.collective = FromProto(c.collective());
    cr.scope = c.scope() == v1::SCOPE_INTER_NODE ? Scope::kInterNode : Scope::kIntraNode;
    cr.group_size = c.group_size();
    cr.ranks_per_node = c.ranks_per_node();
    cr.alpha_s = c.alpha_s();
    cr.busbw_bytes_per_s = c.busbw_bytes_per_s();
    for (const auto& pt : c.points()) cr.points.push_back({pt.size_bytes(), pt.time_s()});
    cr.source = c.source();
    r.collectives.push_back(std::move(cr));
  }
  for (const auto& n : p.notes()) r.notes.push_back(n);
  static const char* const kMechanisms[] = {"tp_comm", "dp_grad_reduce", "dp_param_gather", "fsdp_param_gather",
                                            "pp_p2p", "cp_ring", "ep_all_to_all"};
  for (int i = 0; i < p.overlaps_size(); ++i) {
    const auto& o = p.overlaps(i);
    const std::string f = absl::StrCat(prefix, ".overlaps[", i, "]");
    if (std::find(std::begin(kMechanisms), std::end(kMechanisms), o.mechanism()) == std::end(kMechanisms)) {
      return FieldError(f + ".mechanism", absl::StrCat("'", o.mechanism(), "' is not one of: ",
                                                         absl::StrJoin(kMechanisms, ", ")));
    }
    if (!(o.efficiency() >= 0 && o.efficiency() <= 1)) {
      return FieldError(f + ".efficiency", absl::StrCat(o.efficiency(), " must be in [0, 1]"));
    }
    r.overlaps.push_back({o.mechanism(), o.efficiency(), o.source()});
  }
  for (int i = 0; i < p.contention_size(); ++i) {
    const auto& c = p.contention(i);
    const std::string f = absl::StrCat(prefix, ".contention[", i, "]");
    if (c.compute() != "gemm" && c.compute() != "attention") {
      return FieldError(f + ".compute", absl::StrCat("'", c.compute(), "' is not one of: gemm, attention"));
    }
    if (c.communication() != "nccl" && c.communication() != "deepep" && c.communication() != "any") {
      return FieldError(f + ".communication",
                        absl::StrCat("'", c.communication(), "' is not one of: nccl, deepep, any"));
    }
    // A slowdown of 4 (5x longer) is beyond any measurement we know of: a typo, not a GPU.
    if (!(c.slowdown() >= 0 && c.slowdown() <= 4)) {
      return FieldError(f + ".slowdown", absl::StrCat(c.slowdown(), " must be in [0, 4]"));
    }
    if (c.samples() < 0) return FieldError(f + ".samples", "must be >= 0");
    r.contention.push_back({c.compute(), c.communication(), c.slowdown(), c.samples(), c.source()});
  }
  if (absl::Status s = ProfileSchemaFromProto(p, prefix, r); !s.ok()) return s;
  if (absl::Status s = ValidateRateProfile(r, prefix); !s.ok()) return s;
  return r;
}

v1::RateProfile RateProfileToProto(const RateProfile& r) {
  v1::RateProfile p;
  p.set_name(r.name);
  p.set_hardware(r.hardware);
  for (const auto& g : r.gemm) {
    auto* x = p.add_gemm();
    x->set_dtype(ToProto(g.dtype));
    x->set_m(g.m); x->set_n(g.n); x->set_k(g.k);
    x->set_flops_per_s(g.flops_per_s);
    x->set_source(g.source);
  }
  p.set_attention_flops_per_s(r.attention_flops_per_s);
  p.set_attention_source(r.attention_source);
  p.set_hbm_bandwidth_bytes_per_s(r.hbm_bandwidth_bytes_per_s);
  p.set_hbm_source(r.hbm_source);
  p.set_fp8_split_accumulation_fraction(r.fp8_split_accumulation_fraction);
  p.set_fp8_split_accumulation_source(r.fp8_split_accumulation_source);
  p.set_compute_rate_low_fraction(r.compute_rate_low_fraction);
  if (r.ssd_flops_per_s > 0) {
    p.set_ssd_flops_per_s(r.ssd_flops_per_s);
    p.set_ssd_source(r.ssd_source);
  }
  if (r.host_launch_call_s > 0 || r.host_gemm_call_s > 0) {
    p.set_host_launch_call_s(r.host_launch_call_s);
    p.set_host_gemm_call_s(r.host_gemm_call_s);
    p.set_host_calls_source(r.host_calls_source);
  }
  p.set_compute_rate_low_source(r.compute_rate_low_source);
  for (const auto& c : r.collectives) {
    auto* x = p.add_collectives();
    x->set_collective(ToProto(c.collective));
    x->set_scope(c.scope == Scope::kInterNode ? v1::SCOPE_INTER_NODE : v1::SCOPE_INTRA_NODE);
    x->set_group_size(c.group_size);
    x->set_ranks_per_node(c.ranks_per_node);
    x->set_alpha_s(c.alpha_s);
    x->set_busbw_bytes_per_s(c.busbw_bytes_per_s);
    for (const auto& pt : c.points) {
      auto* q = x->add_points();
      q->set_size_bytes(pt.size_bytes);
      q->set_time_s(pt.time_s);
    }
    x->set_source(c.source);
  }
  for (const auto& n : r.notes) p.add_notes(n);
  for (const auto& o : r.overlaps) {
    auto* x = p.add_overlaps();
    x->set_mechanism(o.mechanism);
    x->set_efficiency(o.efficiency);
    x->set_source(o.source);
  }
  for (const auto& c : r.contention) {
    auto* x = p.add_contention();
    x->set_compute(c.compute);
    x->set_communication(c.communication);
    x->set_slowdown(c.slowdown);
    x->set_samples(c.samples);
    x->set_source(c.source);
  }
  ProfileSchemaToProto(r, p);
  return p;
}

v1::ModelShape ModelShapeToProto(const ModelShape& s) {
  v1::ModelShape m;
  m.set_name(s.name);
  m.set_layers(s.layers);
  m.set_hidden_size(s.hidden_size);
  m.set_attention_heads(s.attention_heads);
  m.set_kv_heads(s.kv_heads);
  m.set_head_dim(s.head_dim);
  m.set_ffn_hidden_size(s.ffn_hidden_size);
  switch (s.ffn_type) {
    case FfnType::kSwiGlu: m.set_ffn_type(v1::FFN_TYPE_SWIGLU); break;
    case FfnType::kGeGlu: m.set_ffn_type(v1::FFN_TYPE_GEGLU); break;
    case FfnType::kSquaredRelu: m.set_ffn_type(v1::FFN_TYPE_SQUARED_RELU); break;
    case FfnType::kGelu: m.set_ffn_type(v1::FFN_TYPE_GELU); break;
  }
  m.set_vocab_size(s.vocab_size);
  m.set_tied_embeddings(s.tied_embeddings);
  m.set_linear_bias(s.linear_bias);
  m.set_learned_position_embeddings(s.learned_position_embeddings);
  m.set_norm_type(s.norm_type == NormType::kRmsNorm ? v1::NORM_TYPE_RMSNORM : v1::NORM_TYPE_LAYERNORM);
  auto* moe = m.mutable_moe();
  moe->set_routed_experts(s.moe.routed_experts);
  moe->set_top_k(s.moe.top_k);
  moe->set_expert_ffn_hidden_size(s.moe.expert_ffn_hidden_size);
  moe->set_shared_experts(s.moe.shared_experts);
  moe->set_shared_expert_ffn_hidden_size(s.moe.shared_expert_ffn_hidden_size);
  moe->set_layer_freq(s.moe.layer_freq);
  moe->set_first_dense_layers(s.moe.first_dense_layers);
  moe->set_routed_groups(s.moe.routed_groups);
  moe->set_max_routed_groups(s.moe.max_routed_groups);
  moe->set_latent_size(s.moe.latent_size);
  auto* mla = m.mutable_mla();
  mla->set_q_lora_rank(s.mla.q_lora_rank);
  mla->set_kv_lora_rank(s.mla.kv_lora_rank);
  mla->set_qk_nope_head_dim(s.mla.qk_nope_head_dim);
  mla->set_qk_rope_head_dim(s.mla.qk_rope_head_dim);
  mla->set_v_head_dim(s.mla.v_head_dim);
  ArchitectureFieldsToProto(s, &m);
  m.set_source(s.source);
  return m;
}

absl::Status InlineHfConfig(v1::JobSpec& spec, const std::string& base_dir) {
  if (spec.model().source_case() != v1::ModelSpec::kHfConfig) return absl::OkStatus();
  std::filesystem::path p(spec.model().hf_config());
  if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
  if (absl::Status s = CheckInputFile(p.string()); !s.ok()) return FieldError("model.hf_config", std::string(s.message()));
  absl::StatusOr<ModelShape> m = LoadHfConfig(p.string());
  if (!m.ok()) return FieldError("model.hf_config", std::string(m.status().message()));
  *spec.mutable_model()->mutable_shape() = ModelShapeToProto(*m);
  return absl::OkStatus();
}

absl::StatusOr<Hardware> HardwareFromProto(const v1::HardwareSpec& h, const std::string& prefix) {
  Hardware hw;
  hw.name = h.name();
  for (int i = 0; i < h.peak_size(); ++i) {
    const auto& pk = h.peak(i);
    const std::string f = absl::StrCat(prefix, ".peak[", i, "]");
    if (!(pk.flops_per_s() > 0)) return FieldError(f + ".flops_per_s", "must be > 0");
    switch (pk.dtype()) {
      case v1::D_TYPE_BF16: hw.peak_bf16_flops_per_s = pk.flops_per_s(); break;
      case v1::D_TYPE_FP16: hw.peak_fp16_flops_per_s = pk.flops_per_s(); break;
      case v1::D_TYPE_FP8: hw.peak_fp8_flops_per_s = pk.flops_per_s(); break;
      case v1::D_TYPE_TF32: hw.peak_tf32_flops_per_s = pk.flops_per_s(); break;
      case v1::D_TYPE_FP32: hw.peak_fp32_flops_per_s = pk.flops_per_s(); break;
      default: return FieldError(f + ".dtype", "must be bf16, fp16, fp8, tf32 or fp32");
    }
  }
  hw.hbm_capacity_bytes = h.hbm_capacity_bytes();
  hw.hbm_bandwidth_bytes_per_s = h.hbm_bandwidth_bytes_per_s();
  hw.intra_node_bandwidth_bytes_per_s = h.intra_node_bandwidth_bytes_per_s();
  hw.intra_node_latency_s = h.intra_node_latency_s();
  hw.inter_node_bandwidth_bytes_per_s = h.inter_node_bandwidth_bytes_per_s();
  hw.inter_node_latency_s = h.inter_node_latency_s();
  hw.gpus_per_node = h.gpus_per_node();
  hw.sm_count = h.sm_count();
  if (hw.sm_count < 0) return FieldError(prefix + ".sm_count", "must be >= 0");
  hw.architecture = h.architecture();
  if (h.host_overhead_ratio() < 0 || !std::isfinite(h.host_overhead_ratio())) {
    return FieldError(prefix + ".host_overhead_ratio", "must be a finite number >= 0 (0: 1, an x86 DGX host)");
  }
  hw.host_overhead_ratio = h.host_overhead_ratio() > 0 ? h.host_overhead_ratio() : 1.0;
  hw.power_w = h.power_w();
  hw.price_per_gpu_hour_usd = h.price_per_gpu_hour_usd();
  for (const auto& s : h.sources()) hw.sources.push_back(s);
  if (absl::Status s = ValidateHardware(hw, prefix); !s.ok()) return s;
  if (h.has_reference_profile()) {
    absl::StatusOr<RateProfile> p = RateProfileFromProto(h.reference_profile(), prefix + ".reference_profile");
    if (!p.ok()) return p.status();
    hw.reference_profile = *std::move(p);
    if (hw.reference_profile.hardware.empty()) hw.reference_profile.hardware = hw.name;
  }
  return hw;
}

namespace {

// Applies a hardware variant (JobSpec.hardware.overrides) to a preset and its reference profile.
absl::Status ApplyHardwareOverrides(const v1::HardwareOverrides& o, Hardware& hw, RateProfile& profile) {
  const std::string p = "hardware.overrides";
  for (auto [v, name] : {std::pair{o.hbm_capacity_bytes(), "hbm_capacity_bytes"},
                         {o.hbm_bandwidth_bytes_per_s(), "hbm_bandwidth_bytes_per_s"},
                         {o.power_w(), "power_w"},
                         {o.intra_node_bandwidth_bytes_per_s(), "intra_node_bandwidth_bytes_per_s"},
                         {o.nic_bandwidth_bytes_per_s(), "nic_bandwidth_bytes_per_s"},
                         {o.compute_rate_scale(), "compute_rate_scale"}}) {
    if (!(v >= 0 && std::isfinite(v))) return FieldError(absl::StrCat(p, ".", name), "must be a finite number >= 0");
  }
  if (o.nics_per_node() < 0) return FieldError(p + ".nics_per_node", "must be >= 0");
  if (o.gpus_per_node() < 0) return FieldError(p + ".gpus_per_node", "must be >= 0");
  if ((o.nics_per_node() > 0) != (o.nic_bandwidth_bytes_per_s() > 0)) {
    return FieldError(p + ".nics_per_node", "give nics_per_node and nic_bandwidth_bytes_per_s together");
  }
  if (o.compute_rate_scale() > 4) return FieldError(p + ".compute_rate_scale", "must be <= 4");
  if (o.hbm_capacity_bytes() > 0) hw.hbm_capacity_bytes = o.hbm_capacity_bytes();
  if (o.hbm_bandwidth_bytes_per_s() > 0) {
    // The usable fraction measured on the preset carries over to the variant.
    if (hw.hbm_bandwidth_bytes_per_s > 0) {
      profile.hbm_bandwidth_bytes_per_s *= o.hbm_bandwidth_bytes_per_s() / hw.hbm_bandwidth_bytes_per_s;
      profile.hbm_source += " | scaled to the variant's datasheet HBM bandwidth";
    }
    hw.hbm_bandwidth_bytes_per_s = o.hbm_bandwidth_bytes_per_s();
  }
  if (o.power_w() > 0) hw.power_w = o.power_w();
  if (o.gpus_per_node() > 0) hw.gpus_per_node = o.gpus_per_node();
  auto scale_collectives = [&](Scope scope, double k, const char* why) {
    for (CollectiveRate& c : profile.collectives) {
      if (c.scope != scope) continue;
      c.busbw_bytes_per_s *= k;
      for (CollectivePoint& pt : c.points) pt.time_s /= k;  // bandwidth-bound sizes; small sizes pessimistic
      c.source += why;
    }
  };
  if (o.intra_node_bandwidth_bytes_per_s() > 0) {
    if (hw.intra_node_bandwidth_bytes_per_s > 0) {
      scale_collectives(Scope::kIntraNode, o.intra_node_bandwidth_bytes_per_s() / hw.intra_node_bandwidth_bytes_per_s,
                        " | scaled to the variant's NVLink bandwidth");
    }
    hw.intra_node_bandwidth_bytes_per_s = o.intra_node_bandwidth_bytes_per_s();
  }
  if (o.nics_per_node() > 0) {
    const double per_gpu = o.nics_per_node() * o.nic_bandwidth_bytes_per_s() / hw.gpus_per_node;
    if (hw.inter_node_bandwidth_bytes_per_s > 0) {
      scale_collectives(Scope::kInterNode, per_gpu / hw.inter_node_bandwidth_bytes_per_s,
                        " | scaled to the variant's NICs per GPU");
    }
    hw.inter_node_bandwidth_bytes_per_s = per_gpu;
  }
  if (o.compute_rate_scale() > 0) {
    for (GemmRatePoint& g : profile.gemm) g.flops_per_s *= o.compute_rate_scale();
    profile.attention_flops_per_s *= o.compute_rate_scale();
    profile.notes.push_back(absl::StrCat("GEMM and attention rates x", o.compute_rate_scale(),
                                         " (hardware.overrides.compute_rate_scale)"));
    // The job states its part's rate: the preset's bound on it no longer applies.
    profile.compute_rate_low_fraction = 0;
    profile.compute_rate_low_source.clear();
  }
  if (!o.name_suffix().empty()) hw.name = absl::StrCat(hw.name, " ", o.name_suffix());
  return ValidateHardware(hw, "hardware");
}

DType DTypeOrDie(const v1::DType d) { return FromProto(d, DType::kBF16); }

// Stores `m` resolved (defaults filled) as the job's model, so the model's hot path does not
// resolve it again.
void SetJobModel(const ModelShape& m, Job& job) {
  job.model = m.Resolved();
  job.model.name = m.name;
  job.model.source = m.source;
}

// The job's model from spec.model: a catalog preset, an inline shape (ModelShapeFromProto), or a
// Hugging Face config.json (LoadHfConfig; a relative path is read from `base_dir`).
absl::Status ResolveJobModel(const v1::JobSpec& spec, const Catalog& catalog, const std::string& base_dir, Job& job) {
  switch (spec.model().source_case()) {
    case v1::ModelSpec::kPreset: {
      absl::StatusOr<const ModelShape*> m = catalog.LookupModel(spec.model().preset());
      if (!m.ok()) return FieldError("model.preset", std::string(m.status().message()));
      SetJobModel(**m, job);
      break;
    }
    case v1::ModelSpec::kShape: {
      absl::StatusOr<ModelShape> m = ModelShapeFromProto(spec.model().shape(), "model.shape");
      if (!m.ok()) return m.status();
      SetJobModel(*m, job);
      break;
    }
    case v1::ModelSpec::kHfConfig: {
      std::filesystem::path p(spec.model().hf_config());
      if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
      if (absl::Status s = CheckInputFile(p.string()); !s.ok()) {
        return FieldError("model.hf_config", std::string(s.message()));
      }
      absl::StatusOr<ModelShape> m = LoadHfConfig(p.string());
      if (!m.ok()) return FieldError("model.hf_config", std::string(m.status().message()));
      SetJobModel(*m, job);
      break;
    }
    case v1::ModelSpec::SOURCE_NOT_SET:
      return FieldError("model", "required: a preset name, an inline shape, or hf_config");
  }
  return absl::OkStatus();
}

// The job's hardware from spec.hardware (a catalog preset or an inline spec), its rate profile
// (`profile` when given, else the hardware's reference profile) and the variant's overrides
// (ApplyHardwareOverrides).
absl::Status ResolveJobHardware(const v1::JobSpec& spec, const Catalog& catalog, const RateProfile* profile,
                                Job& job) {
  switch (spec.hardware().source_case()) {
    case v1::HardwareRef::kPreset: {
      absl::StatusOr<const Hardware*> h = catalog.LookupHardware(spec.hardware().preset());
      if (!h.ok()) return FieldError("hardware.preset", std::string(h.status().message()));
      job.hardware = **h;
      break;
    }
    case v1::HardwareRef::kSpec: {
      absl::StatusOr<Hardware> h = HardwareFromProto(spec.hardware().spec(), "hardware.spec");
      if (!h.ok()) return h.status();
      job.hardware = *std::move(h);
      break;
    }
    case v1::HardwareRef::SOURCE_NOT_SET:
      return FieldError("hardware", "required: a preset name or an inline spec");
  }
  if (profile != nullptr) {
    job.profile = *profile;
  } else {
    // Moved, not copied: a job reads its rates from job.profile only (the catalog keeps the
    // preset's reference profile; a copy of its curves was ~6% of a Predict RPC's server CPU).
    job.profile = std::move(job.hardware.reference_profile);
    job.hardware.reference_profile = RateProfile{};
    if (job.profile.gemm.empty()) {
      return FieldError("hardware", absl::StrCat(job.hardware.name,
                                                 " has no reference profile; pass a measured one with --profile"));
    }
  }
  if (spec.hardware().has_overrides()) {
    if (absl::Status s = ApplyHardwareOverrides(spec.hardware().overrides(), job.hardware, job.profile); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Fills what `spec` leaves unset from the framework `fw`: the unfused attention path for fp32/tf32
// GEMMs, the framework's recipe for this model (and GPU, precision; a recipe's sharding semantics
// replace the framework's), then the framework's own defaults; each recorded in `assumed`.
// Sources: Transformer Engine dot_product_attention/utils.py get_attention_backend "Filter: Data
// type" and flash-attn's README "Datatype fp16 and bf16" (fused kernels take bf16/fp16 only);
// the recipes and defaults are the framework presets' (presets/frameworks/, each cited there).
absl::Status ApplyFrameworkDefaults(const ResolvedFramework& fw, v1::JobSpec& spec, Job& job,
                                    std::vector<AssumedInput>& assumed) {
  // fp32 or tf32 GEMMs mean fp32 activations, so fp32 QKV, and every fused attention kernel of the
  // presets takes bf16/fp16 only (Transformer Engine dot_product_attention/utils.py
  // get_attention_backend "Filter: Data type"; flash-attn's README "Datatype fp16 and bf16"): such
  // a job gets the unfused path unless it says otherwise, before any framework default of "true".
  if (const v1::DType g = spec.training().precision().gemm();
      (g == v1::D_TYPE_FP32 || g == v1::D_TYPE_TF32) && job.framework.attention.fused) {
    static const CompiledDefault* const kUnfused = new CompiledDefault("training.flash_attention", "false");
    const auto source = [&] {
      return absl::StrCat("the framework's attention kernel (", job.framework.attention.kernel,
                          ") takes bf16/fp16 only; fp32 GEMMs: unfused");
    };
    if (absl::Status s = kUnfused->ApplyWith(spec, source, &assumed); !s.ok()) return s;
  }
  // The default kernel's head-dimension limits on this GPU generation (FrameworkSpec.
  // attention_limits, e.g. Transformer Engine <= 2.4 has no Blackwell kernel that trains with
  // head dimensions above 128, so MLA's 192 runs UnfusedDotProductAttention): such a job gets the
  // unfused path unless it states training.flash_attention or another kernel.
  if (job.framework.attention.fused && spec.training().attention_kernel().empty() && fw.spec.attention_limits_size() > 0) {
    const int64_t dqk = job.model.QkHeadDim(), dv = job.model.VHeadDim();
    for (const v1::AttentionKernelLimit& lim : fw.spec.attention_limits()) {
      const bool here = std::any_of(lim.architectures().begin(), lim.architectures().end(), [&](const std::string& a) {
        return absl::EqualsIgnoreCase(a, job.hardware.architecture);
      });
      if (!here || (dqk <= lim.max_head_dim() && dv <= lim.max_head_dim())) continue;
      if (lim.only_unequal_head_dims() && dqk == dv) continue;
      static const CompiledDefault* const kUnfusedByLimit = new CompiledDefault("training.flash_attention", "false");
      const auto source = [&] {
        return absl::StrCat("the framework's attention kernel (", job.framework.attention.kernel, ") has no ",
                            job.hardware.architecture, " kernel that trains with head dimensions ", dqk, " / ", dv,
                            " (above ", lim.max_head_dim(), "): unfused: ", lim.source());
      };
      if (absl::Status s = kUnfusedByLimit->ApplyWith(spec, source, &assumed); !s.ok()) return s;
      break;
    }
  }
  // Defaults: the framework's recipe for this model (and GPU, precision), then the framework's
  // own defaults, then stepcast's fallbacks; each recorded in job.assumed.
  {
    const std::string gemm = spec.training().precision().gemm() == v1::D_TYPE_UNSPECIFIED
                                 ? ""
                                 : DTypeName(DTypeOrDie(spec.training().precision().gemm()));
    std::string model_name = job.model.name;
    if (spec.model().source_case() == v1::ModelSpec::kPreset) model_name += " " + spec.model().preset();
    const std::string hw_preset =
        spec.hardware().source_case() == v1::HardwareRef::kPreset ? absl::AsciiStrToLower(spec.hardware().preset()) : "";
    // A recipe's sharding semantics (framework.proto Recipe.sharding) replace the framework's:
    // converted when the catalog compiled the recipe.
    const RecipeSharding* recipe_sharding = nullptr;
    if (absl::Status s = fw.defaults.ApplyRecipes(spec, model_name, job.hardware.architecture, gemm, &assumed,
                                                  hw_preset, &recipe_sharding);
        !s.ok()) {
      return s;
    }
    if (recipe_sharding != nullptr && recipe_sharding->replaces) {
      if (!recipe_sharding->core.ok()) return recipe_sharding->core.status();
      job.framework.sharding = *recipe_sharding->core;
    }
  }
  return fw.defaults.ApplyDefaults(spec, &assumed);
}

// The attention kernel spec.training.attention_kernel (or a default) selects among the
// framework's (its preset's alternative_attention, or "unfused"); an unknown name is an error
// listing the known ones.
absl::Status SelectAttentionKernel(const ResolvedFramework& fw, const v1::JobSpec& spec, Job& job) {
  const std::string& kernel = spec.training().attention_kernel();
  if (kernel.empty() || kernel == job.framework.attention.kernel) return absl::OkStatus();
  bool found = false;
  for (int i = 0; i < fw.spec.alternative_attention_size() && !found; ++i) {
    if (fw.spec.alternative_attention(i).kernel() != kernel) continue;
    const absl::StatusOr<AttentionKernel>& a = fw.alternative_attention[i];
    if (!a.ok()) return a.status();
    job.framework.attention = *a;
    found = true;
  }
  if (!found && kernel == "unfused") {
    job.framework.attention = AttentionKernel{.kernel = "unfused", .fused = false, .rates = {}};
    found = true;
  }
  if (!found) {
    std::vector<std::string> known = {job.framework.attention.kernel};
    for (const v1::AttentionKernel& k : fw.spec.alternative_attention()) known.push_back(k.kernel());
    return FieldError("training.attention_kernel",
                      absl::StrCat("'", kernel, "' is not a kernel of framework ", job.framework.name,
                                   "; known: ", absl::StrJoin(known, ", "), ", unfused"));
  }
  return absl::OkStatus();
}

// stepcast's own fallbacks for what neither the job nor its framework sets (each recorded in
// `assumed` with the reason); the flash-attention and CUDA-graph values follow the framework's
// kernel and launch model, the MoE ones apply to MoE models only (Megatron-Core's
// --moe-token-dispatcher-type and --overlap-moe-expert-parallel-comm defaults).
absl::Status ApplyStepcastFallbacks(v1::JobSpec& spec, const Job& job, std::vector<AssumedInput>& assumed) {
  const std::string& fw_name = job.framework.name;
  // stepcast's fallbacks, compiled once; the flash-attention and CUDA-graph values follow the
  // framework (compiled both ways).
  struct Fallback {
    CompiledDefault value;
    const char* why;
  };
  static const std::vector<Fallback>* const kFallbacks = new std::vector<Fallback>{
      {{"training.micro_batch_size", "1"}, "one sequence per micro-batch"},
      {{"training.precision.gemm", "bf16"}, "bf16 mixed precision"},
      {{"training.optimizer", "adamw"}, "AdamW (Adam with decoupled weight decay)"},
      {{"training.recompute", "none"}, "no activation recomputation"},
      {{"training.sharding", "none"}, "no optimizer/gradient/weight sharding"},
      {{"training.overlap_dp_comm", "false"}, "no DP communication overlap"},
      {{"training.overlap_tp_comm", "false"}, "no TP communication overlap"},
      {{"training.dropout", "false"}, "no dropout"},
      {{"training.fp8_param_gather", "false"}, "weights kept in the params dtype"},
      {{"training.flash_attention", "false"}, nullptr},  // 9, 10: by the framework's kernel
      {{"training.flash_attention", "true"}, nullptr},
      {{"training.cuda_graphs", "false"}, "the framework preset's launch model"},  // 11, 12
      {{"training.cuda_graphs", "true"}, "the framework preset's launch model"},
      {{"parallelism.sequence_parallel", "false"}, "no sequence parallelism"},
      // 14, 15: MoE models only
      {{"training.moe_dispatcher", "alltoall"},
       "NCCL all-to-all of the permuted tokens (Megatron-Core --moe-token-dispatcher-type default alltoall, "
       "torchtitan's all-to-all)"},
      {{"training.overlap_ep_comm", "false"},
       "the all-to-all not overlapped with another micro-batch (Megatron-Core --overlap-moe-expert-parallel-comm "
       "defaults off)"},
      // 16: MoE models only
      {{"training.moe_router_fusion", "false"},
       "the router's unfused PyTorch ops (Megatron-Core --moe-router-fusion, TransformerConfig moe_router_fusion, "
       "defaults off)"},
  };
  const std::vector<Fallback>& f = *kFallbacks;
  const auto apply = [&](const Fallback& fb) {
    const auto source = [&] {
      if (fb.why != nullptr) return absl::StrCat("stepcast fallback (", fw_name, " documents none): ", fb.why);
      const std::string& kernel =
          job.framework.attention.kernel.empty() ? "its attention kernel" : job.framework.attention.kernel;
      return absl::StrCat("stepcast fallback (", fw_name, " documents none): the framework's attention kernel (",
                          kernel, ")");
    };
    return fb.value.ApplyWith(spec, source, &assumed);
  };
  for (const Fallback* fb : {&f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8],
                             &f[job.framework.attention.fused ? 10 : 9], &f[job.framework.launch.cuda_graphs ? 12 : 11],
                             &f[13]}) {
    if (absl::Status s = apply(*fb); !s.ok()) return s;
  }
  if (job.model.moe.enabled()) {
    for (const Fallback* fb : {&f[14], &f[15], &f[16]}) {
      if (absl::Status s = apply(*fb); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// The pipeline schedule: parallelism.pp_schedule, else (PP > 1) interleaved 1F1B with virtual
// stages and the framework's default schedule without (recorded in `assumed`).
absl::Status ReadPipelineSchedule(const v1::ParallelismSpec& par, const std::string& default_schedule,
                                  const std::string& fw_name, Parallelism& p, std::vector<AssumedInput>& assumed) {
  std::string sched = par.pp_schedule();
  if (sched.empty() && p.pp > 1) {
    sched = p.vpp > 1 ? "interleaved-1f1b" : default_schedule;
    if (p.vpp == 1 && sched == "interleaved-1f1b") sched = "1f1b";
    assumed.push_back({"parallelism.pp_schedule", sched,
                       p.vpp > 1 ? "virtual stages given: interleaved 1F1B"
                                 : absl::StrCat("framework ", fw_name, " default schedule")});
  }
  if (sched.empty() || sched == "1f1b") {
    p.schedule = p.vpp > 1 ? PipelineSchedule::kInterleaved1F1B : PipelineSchedule::k1F1B;
  } else if (sched == "interleaved-1f1b" || sched == "interleaved_1f1b" || sched == "interleaved") {
    p.schedule = PipelineSchedule::kInterleaved1F1B;
  } else if (sched == "gpipe") {
    p.schedule = PipelineSchedule::kGPipe;
  } else if (sched == "zero-bubble" || sched == "zb" || sched == "zbv" || sched == "zero_bubble") {
    p.schedule = PipelineSchedule::kZeroBubble;
  } else if (sched == "dualpipe") {
    p.schedule = PipelineSchedule::kDualPipe;
  } else {
    return FieldError("parallelism.pp_schedule",
                      absl::StrCat("'", sched, "' is not one of: 1f1b, interleaved-1f1b, gpipe, zero-bubble, dualpipe"));
  }
  return absl::OkStatus();
}

// The parallel layout from spec.parallelism; 0 means "default" for every degree (1; ETP: the TP
// size, Megatron-Core's default for an unset --expert-tensor-parallel-size).
absl::Status ReadParallelism(const v1::JobSpec& spec, Job& job, std::vector<AssumedInput>& assumed) {
  const auto& par = spec.parallelism();
  Parallelism& p = job.parallelism;
  for (auto [v, name] : {std::pair{par.tp(), "tp"}, {par.pp(), "pp"}, {par.dp(), "dp"}, {par.cp(), "cp"},
                         {par.ep(), "ep"}, {par.vpp(), "vpp"}, {par.etp(), "etp"}, {par.dp_replicate(), "dp_replicate"}}) {
    if (v < 0) return FieldError(absl::StrCat("parallelism.", name), absl::StrCat(v, " must be >= 1 (0: default)"));
    if (v > (int64_t{1} << 24)) return FieldError(absl::StrCat("parallelism.", name), absl::StrCat(v, " is too large"));
  }
  p.tp = par.tp() == 0 ? 1 : par.tp();
  p.pp = par.pp() == 0 ? 1 : par.pp();
  p.cp = par.cp() == 0 ? 1 : par.cp();
  p.ep = par.ep() == 0 ? 1 : par.ep();
  p.vpp = par.vpp() == 0 ? 1 : par.vpp();
  p.etp = par.etp();
  p.dp_replicate = par.dp_replicate() == 0 ? 1 : par.dp_replicate();
  p.sequence_parallel = par.sequence_parallel();
  for (auto [v, name] : {std::pair{par.first_stage_layers(), "first_stage_layers"},
                         {par.last_stage_layers(), "last_stage_layers"}}) {
    if (v < 0 || v > (int64_t{1} << 20)) {
      return FieldError(absl::StrCat("parallelism.", name), absl::StrCat(v, " must be in [0, 2^20] (0: an even split)"));
    }
  }
  p.first_stage_layers = par.first_stage_layers();
  p.last_stage_layers = par.last_stage_layers();
  if (p.pp > 1 && par.vpp() == 0) {
    assumed.push_back({"parallelism.vpp", "1", "stepcast fallback: no virtual pipeline stages unless given"});
  }
  if (p.ep > 1 && par.etp() == 0) {
    assumed.push_back({"parallelism.etp", absl::StrCat(p.tp),
                       "Megatron-Core default: --expert-tensor-parallel-size unset means the TP size"});
  }
  return ReadPipelineSchedule(par, job.framework.default_schedule, job.framework.name, p, assumed);
}

// The cluster from spec.cluster, and the data-parallel size: parallelism.dp when given, else
// cluster.gpu_count / (tp x pp x cp).
absl::Status ReadCluster(const v1::JobSpec& spec, Job& job) {
  const auto& par = spec.parallelism();
  Parallelism& p = job.parallelism;
  const auto& cl = spec.cluster();
  job.cluster.name = cl.name();
  job.cluster.gpus_per_node = cl.gpus_per_node();
  job.cluster.price_per_gpu_hour_usd = cl.price_per_gpu_hour_usd() > 0 ? cl.price_per_gpu_hour_usd() : -1;
  if (!(cl.price_per_gpu_hour_usd() >= 0)) {
    return FieldError("cluster.price_per_gpu_hour_usd", "must be >= 0");
  }
  if (cl.gpu_count() < 0 || cl.gpu_count() > (int64_t{1} << 24)) {
    return FieldError("cluster.gpu_count", absl::StrCat(cl.gpu_count(), " must be in [1, 2^24]"));
  }
  // Each degree at most the GPU count's bound before the products tp*pp*dp*cp below (they
  // overflowed int64 for tp = 2^63-1: reliability review M7, core/job.h).
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"parallelism.tp", p.tp}, {"parallelism.pp", p.pp},
                                {"parallelism.cp", p.cp}, {"parallelism.dp", par.dp()}}) {
    if (v > (int64_t{1} << 24)) return FieldError(name, absl::StrCat(v, " must be at most 2^24"));
  }
  if (par.dp() != 0) {
    p.dp = par.dp();
    job.cluster.gpu_count = cl.gpu_count() != 0 ? cl.gpu_count() : p.gpu_count();
  } else {
    if (cl.gpu_count() <= 0) {
      return FieldError("cluster.gpu_count", "required (> 0) unless parallelism.dp is given");
    }
    const int64_t model_parallel = p.tp * p.pp * p.cp;
    if (cl.gpu_count() % model_parallel != 0) {
      return FieldError("cluster.gpu_count", absl::StrCat(cl.gpu_count(), " is not a multiple of tp*pp*cp = ",
                                                          model_parallel));
    }
    p.dp = cl.gpu_count() / model_parallel;
    job.cluster.gpu_count = cl.gpu_count();
  }
  return absl::OkStatus();
}

// The batch (global_batch_size in sequences or global_batch_tokens, micro-batch) and the
// precision of each tensor class; an unset dtype falls back as stepcast's documented cascade
// (params in the GEMMs' 16-bit type, fp32 gradients, master weights and Adam moments), recorded
// in `assumed`.
absl::Status ReadBatchAndPrecision(const v1::TrainingSpec& tr, TrainingConfig& t, std::vector<AssumedInput>& assumed) {
  t.seq_length = tr.seq_length();
  t.global_batch_size = tr.global_batch_size();
  if (tr.global_batch_tokens() != 0) {
    if (tr.global_batch_size() != 0) {
      return FieldError("training.global_batch_tokens", "give global_batch_size (sequences) or global_batch_tokens, not both");
    }
    if (tr.seq_length() <= 0 || tr.global_batch_tokens() < 0 || tr.global_batch_tokens() % tr.seq_length() != 0) {
      return FieldError("training.global_batch_tokens",
                        absl::StrCat(tr.global_batch_tokens(), " must be a positive multiple of seq_length ", tr.seq_length()));
    }
    t.global_batch_size = tr.global_batch_tokens() / tr.seq_length();
  }
  t.micro_batch_size = tr.micro_batch_size();
  const auto& pr = tr.precision();
  t.precision.gemm = DTypeOrDie(pr.gemm());
  auto cascade = [&](const char* path, v1::DType given, DType fallback_value, const std::string& why) {
    if (given != v1::D_TYPE_UNSPECIFIED) return DTypeOrDie(given);
    assumed.push_back({path, DTypeName(fallback_value), absl::StrCat("stepcast fallback: ", why)});
    return fallback_value;
  };
  t.precision.params = cascade("training.precision.params", pr.params(),
                               t.precision.gemm == DType::kFP16 ? DType::kFP16 : DType::kBF16,
                               "working weights in the 16-bit type of the GEMMs");
  t.precision.grads = cascade("training.precision.grads", pr.grads(),
                              t.precision.params == DType::kFP16 ? DType::kFP16 : DType::kFP32,
                              "fp32 main gradients (fp16 with fp16 weights)");
  t.precision.master_weights = cascade("training.precision.master_weights", pr.master_weights(), DType::kFP32,
                                       "fp32 master weights");
  t.precision.optimizer_states = cascade("training.precision.optimizer_states", pr.optimizer_states(),
                                         DType::kFP32, "fp32 Adam moments");
  t.precision.grad_reduce = cascade("training.precision.grad_reduce", pr.grad_reduce(), t.precision.grads,
                                    "gradients reduced in their own dtype");
  t.precision.master_weight_remainders = pr.master_weight_remainders();
  // The FP8 scaling recipe: given, else (fp8 GEMMs) the framework's default already applied to
  // the spec, else per-tensor current scaling, assumed.
  const std::string& recipe = pr.fp8_recipe();
  if (!recipe.empty() && t.precision.gemm != DType::kFP8) {
    return FieldError("training.precision.fp8_recipe",
                      absl::StrCat("'", recipe, "' is set but training.precision.gemm is ",
                                   DTypeName(t.precision.gemm), ", not fp8"));
  }
  if (!recipe.empty()) {
    if (recipe == "blockwise") {
      return FieldError("training.precision.fp8_recipe",
                        "'blockwise' (128x128 / 1x128 block scaling) is not modelled: no measured rate of its GEMMs");
    }
    if (!Fp8RecipeFromName(recipe, &t.precision.fp8_recipe)) {
      return FieldError("training.precision.fp8_recipe",
                        absl::StrCat("'", recipe, "' is not one of: tensorwise, delayed, mxfp8, rowwise"));
    }
  } else if (t.precision.gemm == DType::kFP8) {
    t.precision.fp8_recipe = Fp8Recipe::kTensorwise;
    assumed.push_back({"training.precision.fp8_recipe", "tensorwise",
                       "stepcast fallback: per-tensor current scaling (Transformer Engine Float8CurrentScaling, "
                       "torchao Float8 tensorwise)"});
  }
  return absl::OkStatus();
}

// The rest of spec.training: optimizer, recompute (and its modules: the framework's selective
// set when none is given), sharding, overlaps, run length, MTP layers, MoE dispatcher.
absl::Status ReadTrainingSettings(const v1::TrainingSpec& tr, Job& job, std::vector<AssumedInput>& assumed) {
  TrainingConfig& t = job.training;
  switch (tr.optimizer()) {
    case v1::OPTIMIZER_ADAM: t.optimizer = Optimizer::kAdam; break;
    case v1::OPTIMIZER_SGD: t.optimizer = Optimizer::kSgd; break;
    case v1::OPTIMIZER_ADAMW_8BIT: t.optimizer = Optimizer::kAdamW8bit; break;
    case v1::OPTIMIZER_MUON: t.optimizer = Optimizer::kMuon; break;
    default: t.optimizer = Optimizer::kAdamW;
  }
  switch (tr.recompute()) {
    case v1::RECOMPUTE_SELECTIVE: t.recompute = Recompute::kSelective; break;
    case v1::RECOMPUTE_FULL: t.recompute = Recompute::kFull; break;
    default: t.recompute = Recompute::kNone;
  }
  t.flash_attention = tr.flash_attention();
  switch (tr.sharding()) {
    case v1::SHARDING_ZERO1: t.sharding = Sharding::kZero1; break;
    case v1::SHARDING_ZERO2: t.sharding = Sharding::kZero2; break;
    case v1::SHARDING_ZERO3: t.sharding = Sharding::kZero3; break;
    default: t.sharding = Sharding::kNone;
  }
  t.overlap_dp_comm = tr.overlap_dp_comm();
  t.overlap_tp_comm = tr.overlap_tp_comm();
  t.dataset_tokens = tr.dataset_tokens();
  t.train_iters = tr.train_iters();
  t.dropout = tr.dropout();
  static const char* const kModules[] = {"core_attn", "mlp", "moe_act", "layernorm", "mla_up_proj",
                                         "moe", "shared_experts", "mlp_up", "activation_functions",
                                         "every_second_mm"};
  for (const std::string& mod : tr.recompute_modules()) {
    if (std::find(std::begin(kModules), std::end(kModules), mod) == std::end(kModules)) {
      return FieldError("training.recompute_modules",
                        absl::StrCat("'", mod, "' is not one of: ", absl::StrJoin(kModules, ", ")));
    }
    t.recompute_modules.push_back(mod);
  }
  if (t.recompute == Recompute::kSelective && t.recompute_modules.empty()) {
    t.recompute_modules = job.framework.selective_recompute_modules;
    assumed.push_back({"training.recompute_modules", absl::StrJoin(t.recompute_modules, ","),
                       absl::StrCat("framework ", job.framework.name, ": what its selective recompute recomputes")});
  }
  t.recompute_num_layers = tr.recompute_num_layers();
  t.fp8_param_gather = tr.fp8_param_gather();
  t.cuda_graphs = tr.cuda_graphs();
  using Scope = TrainingConfig::CudaGraphScope;
  static constexpr std::pair<const char*, bool Scope::*> kScopes[] = {
      {"attn", &Scope::attn},         {"mlp", &Scope::mlp},
      {"moe", &Scope::moe},           {"moe_router", &Scope::moe_router},
      {"moe_preprocess", &Scope::moe_preprocess}, {"mamba", &Scope::mamba}};
  for (const std::string& scope : tr.cuda_graph_scope()) {
    if (scope == "full" || scope == "full_iteration") continue;
    const auto* it = std::find_if(std::begin(kScopes), std::end(kScopes), [&](const auto& k) { return scope == k.first; });
    if (it == std::end(kScopes)) {
      return FieldError("training.cuda_graph_scope",
                        absl::StrCat("'", scope, "' is not one of: attn, mlp, moe, moe_router, moe_preprocess, mamba, "
                                     "full, full_iteration"));
    }
    t.cuda_graph_scope.*(it->second) = true;
  }
  if (tr.cuda_graph_scope_size() > 0 && !t.cuda_graphs) {
    return FieldError("training.cuda_graph_scope", "needs training.cuda_graphs true (the scope says what the graphs capture)");
  }
  if (t.cuda_graph_scope.moe_preprocess && !t.cuda_graph_scope.moe_router) {
    return FieldError("training.cuda_graph_scope",
                      "moe_preprocess needs moe_router (Megatron-Core arguments.py: 'Must be used together with \"moe_router\"')");
  }
  if (t.cuda_graph_scope.moe && (t.cuda_graph_scope.moe_router || t.cuda_graph_scope.moe_preprocess)) {
    return FieldError("training.cuda_graph_scope", "moe captures the whole MoE block: not with moe_router / moe_preprocess");
  }
  const auto named = [&](const char* scope) {
    return std::find(tr.cuda_graph_scope().begin(), tr.cuda_graph_scope().end(), scope) != tr.cuda_graph_scope().end();
  };
  if (t.cuda_graph_scope.Partial() && (named("full") || named("full_iteration"))) {
    return FieldError("training.cuda_graph_scope", "full / full_iteration capture everything: not with other scopes");
  }
  t.activation_offload_fraction = tr.activation_offload_fraction();
  t.overlap_ep_comm = tr.overlap_ep_comm();
  t.moe_router_fusion = tr.moe_router_fusion();
  if (tr.has_mtp_layers()) {
    if (tr.mtp_layers() < 0 || tr.mtp_layers() > 16) {
      return FieldError("training.mtp_layers", absl::StrCat(tr.mtp_layers(), " must be in [0, 16]"));
    }
    t.mtp_layers = tr.mtp_layers();
  }
  const double cap = tr.moe_expert_capacity_factor();
  if (!(cap == 0 || (cap >= 1 && cap <= 64))) {
    // Megatron-Core pads to ceil(tokens x k / E x factor): a factor under 1 drops tokens even
    // when routing is balanced, which the model does not describe.
    return FieldError("training.moe_expert_capacity_factor",
                      absl::StrCat(cap, " must be 0 (none) or in [1, 64] (below 1 drops balanced tokens: not modelled)"));
  }
  if (tr.moe_pad_expert_input_to_capacity() && cap == 0) {
    return FieldError("training.moe_pad_expert_input_to_capacity",
                      "needs training.moe_expert_capacity_factor (Megatron-Core asserts it: token_dispatcher.py)");
  }
  for (const std::string& mod : tr.offload_modules()) {
    if (mod == "moe_act") {
      t.offload_moe_act_input = true;
    } else if (mod == "expert_fc1") {
      t.offload_expert_fc1_input = true;
    } else {
      return FieldError("training.offload_modules",
                        absl::StrCat("'", mod.substr(0, 64), "' is not modelled (moe_act, expert_fc1)"));
    }
  }
  t.moe_expert_capacity_factor = cap;
  t.moe_pad_expert_input_to_capacity = tr.moe_pad_expert_input_to_capacity();
  if (const std::string& d = tr.moe_dispatcher(); d == "alltoall" || d.empty()) {
    t.moe_dispatcher = MoeDispatcher::kAllToAll;
  } else if (d == "deepep") {
    t.moe_dispatcher = MoeDispatcher::kDeepEP;
  } else if (d == "deepep-fp8") {
    t.moe_dispatcher = MoeDispatcher::kDeepEPFp8;
  } else if (d == "hybridep") {
    t.moe_dispatcher = MoeDispatcher::kHybridEP;
  } else {
    return FieldError("training.moe_dispatcher", absl::StrCat("'", d, "' is not one of: alltoall, deepep, deepep-fp8, hybridep"));
  }
  return absl::OkStatus();
}

// The job's container release (FrameworkRef.release, "YY.MM") and what depends on it: the
// expert layout folds from MoeModel.folded_from_release on (Megatron-Core core_r0.10's MoE
// Parallel Folding, megatron/core/parallel_state.py: the expert RankGenerator over ETP x EP x EDP
// of its own, so an EP group's ranks are ETP apart instead of TP x CP). An MoE job (any EP: a
// layout search tries EP > 1 from it) that does not state its release gets the preset's
// last_release, listed as assumed. Errors: a release that is not YY.MM names framework.release.
absl::Status ApplyFrameworkRelease(const ResolvedFramework& fw, const v1::JobSpec& spec, Job& job,
                                   std::vector<AssumedInput>& assumed) {
  const std::string& stated = spec.framework().release();
  int release = 0;
  if (!stated.empty()) {
    release = ParseRelease(stated);
    if (release == 0) {
      return FieldError("framework.release", absl::StrCat("'", stated.substr(0, 24), stated.size() > 24 ? "..." : "",
                                                          "' is not a container release YY.MM (e.g. 25.04)"));
    }
  }
  // Every MoE job, whatever its own EP: the layout search tries EP > 1 from it.
  if (fw.folded_from_release == 0 || !job.framework.expert_parallel_after_cp || job.model.moe.routed_experts <= 1) {
    return absl::OkStatus();
  }
  if (release == 0) {
    release = fw.last_release;
    if (release == 0) return absl::OkStatus();
    assumed.push_back({"framework.release", fw.spec.last_release(),
                       absl::StrCat("the ", fw.spec.name(), " preset's last release (", fw.spec.version(),
                                    "); it decides the expert layout: folded from ", fw.spec.moe().folded_from_release(),
                                    " on (", fw.spec.moe().source(), ")")});
  }
  if (release >= fw.folded_from_release) job.framework.expert_parallel_after_cp = false;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Job> JobFromSpec(const v1::JobSpec& spec_in, const Catalog& catalog,
                                const std::string& base_dir, const RateProfile* profile) {
  // Every route (binary requests included) rejects NaN and infinity before any arithmetic.
  if (absl::Status s = CheckFiniteNumbers(spec_in, ""); !s.ok()) return s;
  Job job;
  v1::JobSpec spec = spec_in;
  job.name = spec.name();
  std::vector<AssumedInput> assumed;  // becomes job.assumed

  // The framework, then the defaults of every input the spec leaves unset: the framework's
  // documented defaults first, stepcast's fallbacks after; each recorded in job.assumed. A preset
  // was resolved, converted and its defaults compiled when the catalog loaded: looked up here.
  absl::StatusOr<JobFramework> fw = LookupJobFramework(spec, catalog, &assumed);
  if (!fw.ok()) return fw.status();
  job.framework = (*fw)->core;
  if (absl::Status s = ResolveJobModel(spec, catalog, base_dir, job); !s.ok()) return s;
  if (absl::Status s = ResolveJobHardware(spec, catalog, profile, job); !s.ok()) return s;
  if (absl::Status s = ApplyFrameworkDefaults(**fw, spec, job, assumed); !s.ok()) return s;
  if (absl::Status s = SelectAttentionKernel(**fw, spec, job); !s.ok()) return s;
  if (absl::Status s = ApplyStepcastFallbacks(spec, job, assumed); !s.ok()) return s;

  if (absl::Status s = ReadParallelism(spec, job, assumed); !s.ok()) return s;
  if (absl::Status s = ReadCluster(spec, job); !s.ok()) return s;
  if (absl::Status s = ReadBatchAndPrecision(spec.training(), job.training, assumed); !s.ok()) return s;
  if (absl::Status s = ReadTrainingSettings(spec.training(), job, assumed); !s.ok()) return s;
  if (absl::Status s = ApplyFrameworkRelease(**fw, spec, job, assumed); !s.ok()) return s;
  // hardware.overrides.compute_rate_scale multiplies every GEMM and attention rate: the profile's
  // (ApplyHardwareOverrides) and the selected attention kernel's table, which a framework's rates
  // by architecture put in place of the profile's attention rate.
  if (const double k = spec.hardware().overrides().compute_rate_scale(); k > 0) job.framework.attention.ScaleRates(k);

  job.assumed = std::make_shared<const std::vector<AssumedInput>>(std::move(assumed));
  job.intervals = BuiltinIntervalTable();  // presets/intervals.yaml (proto/interval_table.h)
  if (absl::Status s = ValidateJob(job); !s.ok()) return s;
  return job;
}

absl::StatusOr<Job> LoadJob(const std::string& path, const Catalog& catalog, const RateProfile* profile) {
  v1::JobSpec spec;
  if (absl::Status s = ParseMessageFile(path, &spec); !s.ok()) return s;
  const std::string dir = std::filesystem::path(path).parent_path().string();
  absl::StatusOr<Job> job = JobFromSpec(spec, catalog, dir, profile);
  if (!job.ok()) {
    return absl::Status(job.status().code(), absl::StrCat(path, ": ", job.status().message()));
  }
  if (job->name.empty()) job->name = std::filesystem::path(path).stem().string();
  return job;
}

absl::StatusOr<RateProfile> LoadRateProfile(const std::string& path) {
  v1::RateProfile p;
  if (absl::Status s = ParseMessageFile(path, &p); !s.ok()) {
    // A newer stepcast's profile: say so rather than "unknown field" (profile_schema.h).
    if (absl::StatusOr<std::string> text = ReadFile(path); text.ok()) {
      if (std::optional<absl::Status> newer = NewerProfileVersionError(*text, path)) return *newer;
    }
    return s;
  }
  absl::StatusOr<RateProfile> r = RateProfileFromProto(p, "profile");
  if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", r.status().message()));
  if (r->name.empty()) r->name = std::filesystem::path(path).stem().string();
  return r;
}

v1::Prediction PredictionToProto(const Prediction& p) {
  v1::Prediction out;
  PredictionToProto(p, &out);
  return out;
}

void PredictionToProto(const Prediction& p, v1::Prediction* out_ptr) {
  v1::Prediction& out = *out_ptr;
  out.set_job_name(p.job_name);
  out.set_model_name(p.model_name);
  out.set_hardware_name(p.hardware_name);
  out.set_profile_name(p.profile_name);
  out.set_gpu_count(p.gpu_count);
  out.set_step_time_s(p.step_time_s);
  out.set_tokens_per_step(p.tokens_per_step);
  out.set_tokens_per_s(p.tokens_per_s);
  out.set_tokens_per_s_per_gpu(p.tokens_per_s_per_gpu);
  out.set_model_flops_per_step(p.model_flops_per_step);
  out.set_hardware_flops_per_step(p.hardware_flops_per_step);
  out.set_peak_flops_per_s_per_gpu(p.peak_flops_per_s_per_gpu);
  out.set_mfu(p.mfu);
  out.set_hfu(p.hfu);
  auto* b = out.mutable_breakdown();
  b->set_gemm_s(p.breakdown.gemm_s);
  b->set_attention_s(p.breakdown.attention_s);
  b->set_elementwise_s(p.breakdown.elementwise_s);
  b->set_recompute_s(p.breakdown.recompute_s);
  b->set_tp_comm_s(p.breakdown.tp_comm_s);
  b->set_cp_comm_s(p.breakdown.cp_comm_s);
  b->set_ep_comm_s(p.breakdown.ep_comm_s);
  b->set_pp_comm_s(p.breakdown.pp_comm_s);
  b->set_dp_comm_s(p.breakdown.dp_comm_s);
  b->set_pipeline_bubble_s(p.breakdown.pipeline_bubble_s);
  b->set_optimizer_s(p.breakdown.optimizer_s);
  b->set_launch_overhead_s(p.breakdown.launch_overhead_s);
  auto* bn = out.mutable_bottleneck();
  bn->set_kind(static_cast<v1::BottleneckKind>(static_cast<int>(p.bottleneck.kind)));
  bn->set_share(p.bottleneck.share);
  bn->set_arithmetic_intensity_flops_per_byte(p.bottleneck.arithmetic_intensity_flops_per_byte);
  bn->set_machine_balance_flops_per_byte(p.bottleneck.machine_balance_flops_per_byte);
  bn->set_reason(p.bottleneck.reason);
  auto* m = out.mutable_memory();
  m->set_weights_bytes(p.memory.weights_bytes);
  m->set_gradients_bytes(p.memory.gradients_bytes);
  m->set_optimizer_states_bytes(p.memory.optimizer_states_bytes);
  m->set_activations_bytes(p.memory.activations_bytes);
  m->set_communication_buffers_bytes(p.memory.communication_buffers_bytes);
  m->set_cuda_context_bytes(p.memory.cuda_context_bytes);
  m->set_workspace_bytes(p.memory.workspace_bytes);
  m->set_total_bytes(p.memory.total_bytes);
  m->set_capacity_bytes(p.memory.capacity_bytes);
  m->set_fits(p.memory.fits);
  m->set_headroom_bytes(p.memory.headroom_bytes);
  m->set_tight(p.memory.tight);
  m->set_stage(p.memory.stage);
  for (const auto& it : p.memory.items) {
    auto* x = m->add_items();
    x->set_name(it.name);
    x->set_bytes(it.bytes);
  }
  auto* c = out.mutable_cost();
  c->set_per_hour_usd(p.cost.per_hour_usd);
  c->set_per_step_usd(p.cost.per_step_usd);
  c->set_per_run_usd(p.cost.per_run_usd);
  c->set_per_hbm_tb_per_s_hour_usd(p.cost.per_hbm_tb_per_s_hour_usd);
  c->set_energy_per_step_j(p.cost.energy_per_step_j);
  c->set_energy_per_run_kwh(p.cost.energy_per_run_kwh);
  c->set_steps_per_run(p.cost.steps_per_run);
  c->set_time_to_train_s(p.cost.time_to_train_s);
  auto* pc = out.mutable_parameters();
  pc->set_total(p.parameters.total);
  pc->set_active(p.parameters.active);
  pc->set_embedding(p.parameters.embedding);
  pc->set_non_embedding(p.parameters.non_embedding);
  pc->set_active_without_input_embedding(p.parameters.active_without_input_embedding);
  pc->set_mtp(p.parameters.mtp);
  out.set_micro_batches_per_step(p.micro_batches_per_step);
  for (const auto& w : p.warnings) out.add_warnings(w);
  out.set_framework(p.framework_name);
  // By reference: `cond ? *vec : vector{}` would be a prvalue, a copy of every entry's strings.
  if (p.assumed_inputs) {
    out.mutable_assumed_inputs()->Reserve(static_cast<int>(p.assumed_inputs->size()));
    for (const auto& a : *p.assumed_inputs) {
      auto* x = out.add_assumed_inputs();
      x->set_field(a.field);
      x->set_value(a.value);
      x->set_source(a.source);
    }
  }
  if (p.interval.available) StepTimeIntervalToProto(p.interval, out.mutable_step_time_interval());
  MemoryIntervalToProto(p.memory_interval, p.memory.capacity_bytes, out.mutable_memory_interval());
}

std::string ToJson(const pb::Message& msg) {
  pb::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  std::string out;
  (void)pb::util::MessageToJsonString(msg, &out, opts);
  return out;
}

absl::StatusOr<std::string> JobSpecToJson(const v1::JobSpec& spec) {
  pb::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.preserve_proto_field_names = true;
  std::string out;
  if (!pb::util::MessageToJsonString(spec, &out, opts).ok()) {
    return absl::InternalError("the job spec does not print as JSON");
  }
  return out;
}

}  // namespace stepcast
