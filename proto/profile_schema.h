// File: proto/profile_schema.h
//
// The rate profile's schema version and provenance (hardware.proto RateProfile fields 50-79):
// format_version, the ProfileProvenance block and the per-rate origins (measured / imported /
// reference), between the proto and core/hardware.h RateProfile. Called by RateProfileFromProto /
// RateProfileToProto and LoadRateProfile (proto/codec.h), so every reader checks the version:
// the CLI, the service's PutProfile and stored profiles, the presets' reference profiles.
#ifndef STEPCAST_PROTO_PROFILE_SCHEMA_H_
#define STEPCAST_PROTO_PROFILE_SCHEMA_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/hardware.h"
#include "stepcast/v1/hardware.pb.h"

namespace stepcast {

// Reads format_version, provenance and the origins of `p` into `r` (whose rates are already read).
// Errors, naming "<prefix>.<field>": a format_version below 0 or above kRateProfileFormatVersion
// ("written by a newer stepcast": both versions named); gemm_origins / collective_origins (or a
// collective's points) whose count is neither 0 nor the count of the rates they describe.
absl::Status ProfileSchemaFromProto(const v1::RateProfile& p, const std::string& prefix, RateProfile& r);

// Writes them; format_version is always kRateProfileFormatVersion (the schema this code writes).
// Origin lists are written only when at least one origin is known (a profile without any stays as
// compact as before); an unknown origin is written RATE_ORIGIN_UNKNOWN (never the enum's 0, which
// the JSON reader refuses).
void ProfileSchemaToProto(const RateProfile& r, v1::RateProfile& p);

// For a profile document (YAML / JSON) that did not parse: when its top-level format_version is
// newer than kRateProfileFormatVersion, the error to give instead of the parser's (a newer
// stepcast's profile has fields this one does not know; "unknown field" would hide the cause).
// nullopt otherwise (text proto, no version, or a version this stepcast reads).
std::optional<absl::Status> NewerProfileVersionError(absl::string_view text, absl::string_view origin);

// The version error itself: "<field>: <v> is newer than ...".
absl::Status ProfileVersionError(const std::string& field, int64_t version);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_PROFILE_SCHEMA_H_
