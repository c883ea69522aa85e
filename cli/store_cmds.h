// File: cli/store_cmds.h
//
// `stepcast store migrate --from SPEC --to SPEC`: copies a run store into another (typically an
// existing SQLite store into PostgreSQL, for several `stepcast serve` replicas).
#ifndef STEPCAST_CLI_STORE_CMDS_H_
#define STEPCAST_CLI_STORE_CMDS_H_

#include <string>

#include "CLI/CLI.hpp"

namespace stepcast::cli {

struct StoreMigrateArgs {
  std::string from, to;  // store specs (plugin/store.h): PATH, sqlite:PATH, postgresql://...
  int connections = 4;
};

// Registers `store migrate` on `app`; the returned subcommand is true once parsed.
CLI::App* AddStoreCommand(CLI::App& app, StoreMigrateArgs& args);

// Copies every profile version, prediction, run and ReportRun request id of `from` into `to`,
// keys and times kept (RunStore::Copy*). Idempotent: a row already in `to` with the same content
// is counted "already there" and not copied again, so a re-run after an interruption copies the
// rest. A key that `to` holds with other content (a profile version stored there differently) is
// reported and skipped; the command then exits 1. Prints one count line per table. Exit codes:
// 0 all copied or already there; 1 a conflict or a store error; 2 invalid arguments.
int StoreMigrate(const StoreMigrateArgs& args);

}  // namespace stepcast::cli

#endif  // STEPCAST_CLI_STORE_CMDS_H_
