#include "cli/store_cmds.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "cli/cli.h"
#include "plugin/store.h"

namespace stepcast::cli {

CLI::App* AddStoreCommand(CLI::App& app, StoreMigrateArgs& args) {
  auto* store = app.add_subcommand("store", "run store administration");
  store->require_subcommand(1);
  auto* migrate = store->add_subcommand("migrate", "copy a run store into another (SQLite into PostgreSQL)");
  migrate->add_option("--from", args.from, "source store: PATH, sqlite:PATH or postgresql://...")->required();
  migrate->add_option("--to", args.to, "destination store: postgresql://..., PATH or sqlite:PATH")->required();
  migrate->add_option("--store-connections", args.connections, "PostgreSQL connection pool size")
      ->capture_default_str();
  return store;
}

namespace {

struct Counts {
  int64_t copied = 0, present = 0, conflicts = 0;
};

// Adds one Copy* result to `c`; a conflict is printed and counted, any other error returned.
absl::Status Tally(const absl::StatusOr<bool>& r, Counts& c) {
  if (r.ok()) {
    ++(*r ? c.copied : c.present);
    return absl::OkStatus();
  }
  if (r.status().code() == absl::StatusCode::kAlreadyExists) {
    ++c.conflicts;
    std::cerr << "stepcast store migrate: skipped: " << r.status().message() << "\n";
    return absl::OkStatus();
  }
  return r.status();
}

}  // namespace

int StoreMigrate(const StoreMigrateArgs& args) {
  if (args.from == args.to) {
    return FailWithStatus(absl::InvalidArgumentError("--to: must name another store than --from"));
  }
  StoreOptions options;
  options.connections = args.connections;
  absl::StatusOr<std::unique_ptr<RunStore>> from = RunStore::Open(args.from, options);
  if (!from.ok()) return FailWithStatus(absl::Status(from.status().code(), absl::StrCat("--from: ", from.status().message())));
  absl::StatusOr<std::unique_ptr<RunStore>> to = RunStore::Open(args.to, options);
  if (!to.ok()) return FailWithStatus(absl::Status(to.status().code(), absl::StrCat("--to: ", to.status().message())));
  RunStore& src = **from;
  RunStore& dst = **to;
  Counts profiles, predictions, runs, requests;
  // Runs before their request ids: a request id then always names a run that is there.
  absl::Status st = src.ForEachProfile([&](const RunStore::ProfileRow& row) { return Tally(dst.CopyProfile(row), profiles); });
  if (st.ok()) {
    st = src.ForEachPrediction(
        [&](const RunStore::PredictionRow& row) { return Tally(dst.CopyPrediction(row), predictions); });
  }
  if (st.ok()) st = src.ForEachRun([&](const v1::Run& run) { return Tally(dst.CopyRun(run), runs); });
  if (st.ok()) {
    st = src.ForEachRunRequest([&](const std::string& request_id, const std::string& run_id) {
      return Tally(dst.CopyRunRequest(request_id, run_id), requests);
    });
  }
  std::cout << "stepcast store migrate: " << src.description() << " -> " << dst.description() << "\n";
  for (const auto& [name, c] : {std::pair<const char*, const Counts&>{"profile versions", profiles},
                                {"predictions", predictions},
                                {"runs", runs},
                                {"report request ids", requests}}) {
    std::cout << "  " << name << ": " << c.copied << " copied, " << c.present << " already there";
    if (c.conflicts > 0) std::cout << ", " << c.conflicts << " conflicting (skipped)";
    std::cout << "\n";
  }
  if (!st.ok()) return FailWithStatus(st);
  const int64_t conflicts = profiles.conflicts + predictions.conflicts + runs.conflicts + requests.conflicts;
  if (conflicts > 0) {
    std::cerr << "stepcast store migrate: " << conflicts
              << " rows conflict with what the destination holds (listed above); nothing of theirs was changed\n";
    return 1;
  }
  return 0;
}

}  // namespace stepcast::cli
