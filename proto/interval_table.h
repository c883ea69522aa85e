// File: proto/interval_table.h
//
// The residual table of the prediction intervals (core/interval.h) at the edges: the file
// presets/intervals.yaml (stepcast.v1.IntervalTableSpec) read and written, the built-in table
// compiled into the binary, the intervals as stepcast.v1 messages, and the measured peak-memory
// runs (tests/data/validation/memory_runs.yaml, stepcast.v1.MeasuredMemoryRuns).
#ifndef STEPCAST_PROTO_INTERVAL_TABLE_H_
#define STEPCAST_PROTO_INTERVAL_TABLE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/interval.h"
#include "stepcast/v1/interval.pb.h"
#include "stepcast/v1/prediction.pb.h"

namespace stepcast {

// The file's name among the embedded presets (presets/intervals.yaml).
inline constexpr char kIntervalTablePreset[] = "intervals.yaml";

// Regime <-> message.
v1::RegimeSpec RegimeToProto(const Regime& r);
// InvalidArgument naming `path`.<field> for an unset era, scale or precision.
absl::StatusOr<Regime> RegimeFromProto(const v1::RegimeSpec& r, const std::string& path);

// The table from its file's message: every residual checked (ids present, times finite and > 0;
// errors name "step_time[i].<field>" / "memory[i].<field>"), then IntervalTable::Build.
absl::StatusOr<IntervalTable> IntervalTableFromSpec(const v1::IntervalTableSpec& spec);
// And from the file's text (YAML); errors prefixed with `origin`.
absl::StatusOr<IntervalTable> ParseIntervalTable(const std::string& text, const std::string& origin);

// The message of a table's residuals (as Build kept them), with the command that wrote it.
v1::IntervalTableSpec IntervalTableToSpec(const IntervalTable& table, const std::string& generated_by);
// The file's text: a header saying what the file is and how to regenerate it, then one residual
// per line (flow style), numbers with 8 significant digits.
std::string IntervalTableYaml(const v1::IntervalTableSpec& spec);

// The table compiled into the binary (presets/intervals.yaml), parsed at the first call; null when
// the build has none. A malformed built-in file is a build defect: tests/interval_test.cc loads
// it with LoadBuiltinIntervalTable and fails on the error.
std::shared_ptr<const IntervalTable> BuiltinIntervalTable();
absl::StatusOr<std::shared_ptr<const IntervalTable>> LoadBuiltinIntervalTable();

// The intervals of a prediction as messages. The out-parameter forms write into an empty
// message in place (on its arena, if it has one: the service's Predict response).
v1::StepTimeInterval StepTimeIntervalToProto(const StepTimeInterval& i);
void StepTimeIntervalToProto(const StepTimeInterval& i, v1::StepTimeInterval* out);
v1::MemoryInterval MemoryIntervalToProto(const MemoryInterval& m, double capacity_bytes);
void MemoryIntervalToProto(const MemoryInterval& m, double capacity_bytes, v1::MemoryInterval* out);
v1::MemoryVerdict MemoryVerdictToProto(MemoryVerdict v);

// Reads tests/data/validation/memory_runs.yaml (or another file of that schema). Errors name the
// file and the field.
absl::StatusOr<v1::MeasuredMemoryRuns> LoadMeasuredMemoryRuns(const std::string& path);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_INTERVAL_TABLE_H_
