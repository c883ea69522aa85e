// Helpers shared by the tests: the built-in catalog and a job built from presets.
#ifndef STEPCAST_TESTS_TEST_UTIL_H_
#define STEPCAST_TESTS_TEST_UTIL_H_

#include "gtest/gtest.h"
#include "proto/catalog.h"
#include "proto/codec.h"

namespace stepcast::testing {

inline const Catalog& BuiltinCatalog() {
  static const Catalog* c = [] {
    absl::StatusOr<Catalog> cat = Catalog::Builtin();
    if (!cat.ok()) {
      ADD_FAILURE() << cat.status();
      return new Catalog();
    }
    return new Catalog(*std::move(cat));
  }();
  return *c;
}

// A job from YAML text (presets resolved through the built-in catalog).
inline absl::StatusOr<Job> JobFromYaml(const std::string& yaml) {
  v1::JobSpec spec;
  if (absl::Status s = ParseMessage(yaml, SpecFormat::kYaml, "test.yaml", &spec); !s.ok()) return s;
  return JobFromSpec(spec, BuiltinCatalog(), "", nullptr);
}

// Llama 3 8B on 8 H100 with the distributed optimizer and Muon (the Muon memory and step-time
// tests' job).
inline constexpr char kLlama3_8bMuonOn8H100[] = R"(
model: llama3-8b
hardware: h100-sxm
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 8, sharding: zero1, optimizer: muon})";

}  // namespace stepcast::testing

#endif  // STEPCAST_TESTS_TEST_UTIL_H_
