// File: proto/codec.h
//
// The codec between files/messages and core types.
//   * Spec files in YAML, JSON or text proto are read into stepcast.v1 messages. YAML and JSON go
//     through one walker that follows the message descriptor, so every error names the field
//     path ("training.seq_length: 'abc' is not an integer"); enum values may be written short
//     ("bf16" for D_TYPE_BF16, "selective" for RECOMPUTE_SELECTIVE), and a message with a
//     `preset` oneof may be written as just the preset name (`model: llama3-8b`).
//   * Messages are converted to core types with defaults resolved (see docs/JOB_SPEC.md) and
//     validated by core's ValidateJob.
//   * Predictions are converted to stepcast.v1.Prediction and printed as JSON.
#ifndef STEPCAST_PROTO_CODEC_H_
#define STEPCAST_PROTO_CODEC_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "core/hardware.h"
#include "core/job.h"
#include "core/predict.h"
#include "google/protobuf/message.h"
#include "yaml-cpp/yaml.h"
#include "stepcast/v1/hardware.pb.h"
#include "stepcast/v1/job.pb.h"
#include "stepcast/v1/prediction.pb.h"

namespace stepcast {

class Catalog;

enum class SpecFormat { kYaml, kJson, kTextProto };
// From the file name's extension: .yaml/.yml, .json, .textproto/.txtpb/.pbtxt/.txt.
absl::StatusOr<SpecFormat> FormatFromPath(absl::string_view path);

// Parses `text` into `msg`. `origin` (a file name) prefixes errors.
absl::Status ParseMessage(absl::string_view text, SpecFormat format, absl::string_view origin,
                          google::protobuf::Message* msg);
// Reads and parses a file; format from the extension.
absl::Status ParseMessageFile(const std::string& path, google::protobuf::Message* msg);

// The line (1-based) where a second, non-empty YAML document starts after the first in `text`
// ("---" and more, or text after a JSON value, which yaml-cpp reads as another document); 0 when
// there is none. `first` is YAML::Load's node of the same text. A block collection ends its
// document only at a "---" / "..." line, so without one nothing is parsed again (the presets:
// the catalog's load stays one parse); otherwise at most two documents are read with yaml-cpp's
// event parser (its LoadAll loops forever on some inputs, e.g. ","). A parse error in the second
// document counts as content there.
int SecondYamlDocumentLine(const std::string& text, const YAML::Node& first);

// Message -> core conversions. `prefix` is the field path of the message in the job file.
absl::StatusOr<ModelShape> ModelShapeFromProto(const v1::ModelShape& m, const std::string& prefix);
absl::StatusOr<RateProfile> RateProfileFromProto(const v1::RateProfile& p, const std::string& prefix);
absl::StatusOr<Hardware> HardwareFromProto(const v1::HardwareSpec& h, const std::string& prefix);
v1::RateProfile RateProfileToProto(const RateProfile& p);
// The proto enum of a core dtype (kBF16 -> D_TYPE_BF16).
v1::DType DTypeToProto(DType d);
// And back; D_TYPE_UNSPECIFIED reads as BF16.
DType DTypeFromProto(v1::DType d);
// Collective enums both ways (kAllReduce <-> COLLECTIVE_ALL_REDUCE; UNSPECIFIED reads as all-reduce).
v1::Collective CollectiveToProto(Collective c);
Collective CollectiveFromProto(v1::Collective c);
v1::ModelShape ModelShapeToProto(const ModelShape& m);

// Limits on input files (reliability review M10): a job file, HF config or profile above 16 MiB
// is refused (the largest real config.json is a few KB), and so is the JSON that a YAML document
// expands to (aliases) above 16 MiB.
inline constexpr int64_t kMaxInputFileBytes = 16 << 20;
inline constexpr size_t kMaxExpandedSpecBytes = 16 << 20;
// OK when `path` is a regular file of at most `max_bytes` (checked with stat, so a FIFO never
// blocks and /dev/zero is never read). NotFound / InvalidArgument naming the path.
absl::Status CheckInputFile(const std::string& path, int64_t max_bytes = kMaxInputFileBytes);
// CheckInputFile, then the whole file (never more than max_bytes, even if it grows meanwhile).
absl::StatusOr<std::string> ReadInputFile(const std::string& path, int64_t max_bytes = kMaxInputFileBytes);
// InvalidArgument naming the first NaN or infinite double/float field of `msg` (recursively,
// "path.field[i]"); text proto and binary requests can carry them, YAML and JSON cannot.
absl::Status CheckFiniteNumbers(const google::protobuf::Message& msg, const std::string& path);

// Client side: replaces a spec's model.hf_config by the inline shape read from that file
// (relative to base_dir), so a service never opens paths named by its clients.
absl::Status InlineHfConfig(v1::JobSpec& spec, const std::string& base_dir);

// Builds a core Job from a spec: resolves presets through `catalog`, reads a Hugging Face
// config (relative paths against `base_dir`), fills defaults, validates. `profile` replaces the
// hardware's reference profile when non-null. Parses nothing for a spec that names presets: the
// framework (resolved, its defaults and recipes compiled), model and hardware are looked up in
// the catalog, and stepcast's fallbacks are compiled once (about 15 us per request with
// Predict and PredictionToProto, docs/PERFORMANCE.md). Thread-safe.
absl::StatusOr<Job> JobFromSpec(const v1::JobSpec& spec, const Catalog& catalog,
                                const std::string& base_dir, const RateProfile* profile);
// Reads a job file and builds the Job.
absl::StatusOr<Job> LoadJob(const std::string& path, const Catalog& catalog, const RateProfile* profile);
// Reads a rate profile file (RateProfile message, YAML/JSON/text proto).
absl::StatusOr<RateProfile> LoadRateProfile(const std::string& path);

// A prediction as its message. The out-parameter form fills an empty message in place, so a
// response on a protobuf arena (the service's Predict, docs/PERFORMANCE.md) is built there
// instead of built on the heap and copied.
v1::Prediction PredictionToProto(const Prediction& p);
void PredictionToProto(const Prediction& p, v1::Prediction* out);
// JSON with the proto field names (snake_case) and every field printed.
std::string ToJson(const google::protobuf::Message& msg);
// Appends `s` to `out` as a JSON string literal: quoted, with quotes, backslashes and control
// characters escaped (bytes >= 0x20 are copied, so UTF-8 passes through).
void JsonString(absl::string_view s, std::string& out);
// A job spec as a job file: JSON with the proto field names and only the fields that are set (no
// UNSPECIFIED enums, no zeros), so `stepcast predict FILE` reads it back as the same job. What
// `stepcast import` and `stepcast validate --explain ROW --json` print. Internal if it cannot print.
absl::StatusOr<std::string> JobSpecToJson(const v1::JobSpec& spec);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_CODEC_H_
