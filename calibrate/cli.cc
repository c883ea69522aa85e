// The command line of stepcast-calibrate (calibrate/cli.h): measure the usable rates of the actual GPUs and write a rate profile, or
// build one from the benchmark logs a cluster already has.
//
//   stepcast-calibrate [--quick] [--out profile.json] [--name CLUSTER] [--gpus 0,1,...]
//   mpirun -np 16 stepcast-calibrate --mpi ...             # one rank per GPU, across nodes
//   stepcast-calibrate import LOG... --hardware h100-sxm [--out profile.json]
//
// Measuring: calibrate/flow.h (the parts, the exit codes). Importing: calibrate/import.h (the
// formats). Without a GPU, driver or a CUDA build, measuring exits 2 saying so; `import` is plain
// C++ and runs anywhere.
#include <cstdio>
#include <functional>
#include <fstream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "calibrate/cli.h"

#include "cli/html.h"
#include "calibrate/communicator.h"
#include "calibrate/flow.h"
#include "calibrate/gpu_system.h"
#include "calibrate/import.h"
#include "proto/catalog.h"
#include "proto/codec.h"


namespace stepcast::calibrate {
namespace {

struct ImportArgs {
  std::vector<std::string> logs;
  std::string hardware, out = "stepcast-profile.json", name, base, collective, html;
  int64_t ranks = 0, ranks_per_node = 0;
  bool allow_other_gpu = false;
};

int RunImport(const ImportArgs& a) {
  absl::StatusOr<Catalog> catalog = Catalog::Builtin();
  if (!catalog.ok()) {
    std::fprintf(stderr, "stepcast-calibrate import: %s\n", std::string(catalog.status().message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<Hardware> hw = catalog->FindHardware(a.hardware);
  if (!hw.ok()) {
    std::fprintf(stderr, "stepcast-calibrate import: --hardware: %s\n", std::string(hw.status().message()).c_str());
    return kExitUsage;
  }
  RateProfile base = hw->reference_profile;
  const bool reference = a.base.empty();
  if (!reference) {
    absl::StatusOr<RateProfile> b = LoadRateProfile(a.base);
    if (!b.ok()) {
      std::fprintf(stderr, "stepcast-calibrate import: --base: %s\n", std::string(b.status().message()).c_str());
      return kExitUsage;
    }
    base = *b;
  }
  ImportOptions o;
  o.hardware = a.hardware;
  o.name = a.name.empty() && !reference ? base.name : a.name;
  o.collective = a.collective;
  o.ranks = a.ranks;
  o.ranks_per_node = a.ranks_per_node;
  o.allow_other_gpu = a.allow_other_gpu;
  o.base_name = reference ? "" : absl::StrCat(base.name, " (", a.base, ")");
  absl::StatusOr<ImportResult> r = ImportLogFiles(a.logs, *hw, base, reference, o);
  if (!r.ok()) {
    std::fprintf(stderr, "stepcast-calibrate import: %s\n", std::string(r.status().message()).c_str());
    return kExitUsage;
  }
  std::ofstream f(a.out, std::ios::trunc);
  f << ToJson(r->profile);
  f.close();
  if (!f) {
    std::fprintf(stderr, "stepcast-calibrate import: cannot write %s\n", a.out.c_str());
    return kExitWriteFailed;
  }
  if (!a.html.empty()) {
    v1::CalibrationRun run;
    *run.mutable_profile() = r->profile;
    if (absl::Status s = html::WritePage(a.html, html::CalibrationPage(run, &*hw)); !s.ok()) {
      std::fprintf(stderr, "stepcast-calibrate import: --html: %s\n", std::string(s.message()).c_str());
      return kExitWriteFailed;
    }
  }
  for (const auto& line : r->summary) std::printf("%s\n", line.c_str());
  std::printf("\nprofile %s (%s over %s; stepcast predict --profile %s JOB)\n", a.out.c_str(), r->profile.name().c_str(),
              reference ? ("the " + a.hardware + " reference profile").c_str() : a.base.c_str(), a.out.c_str());
  return kExitOk;
}

}  // namespace

int CalibrateMain(int argc, char** argv, const std::function<std::unique_ptr<GpuSystem>()>& make_gpus) {
  CLI::App app{"stepcast-calibrate: measure GEMM, HBM and collective rates and write a rate profile "
               "(or `import` the logs of nccl-tests, mamf-finder, BabelStream, nvbandwidth, TraceLens)"};
  MeasureOptions m;
  app.add_option("--out", m.out, "rate profile to write (stepcast.v1.RateProfile JSON)")->capture_default_str();
  app.add_option("--run-out", m.run_out, "full run to write (CalibrationRun JSON; default <out>.run.json)");
  app.add_option("--name", m.name, "cluster name of the profile (default: host)");
  app.add_flag("--quick", m.quick, "reduced sweep");
  app.add_option("--gpus", m.gpus, "GPUs to measure, CUDA indices (default: all visible)");
  app.add_flag("--mpi", m.mpi, "one rank per GPU under mpirun/srun: collectives across ranks and nodes");
  app.add_option("--backend", m.backend, "collectives over nccl, or mpi (host memory; kept in the run only)")
      ->check(CLI::IsMember({"nccl", "mpi"}));
  app.add_flag("--skip-gemm", m.skip_gemm, "no GEMM sweep (and no contention sweep)");
  app.add_flag("--skip-hbm", m.skip_hbm, "no HBM kernels");
  app.add_flag("--skip-collectives", m.skip_collectives, "no collective sweep");
  app.add_flag("--skip-contention", m.skip_contention, "no contention sweep (GEMMs beside a communication-shaped kernel; --skip-gemm skips it too)");
  app.add_flag("--skip-host", m.skip_host, "no host-call pass (the host's time per kernel launch and per cuBLASLt GEMM call; --skip-gemm skips it too)");
  app.add_option("--max-collective-bytes", m.max_collective_bytes, "largest collective (default 4 GiB, --quick 256 MiB)");
  app.add_option("--warmup-s", m.warmup_s, "sustained warm-up before the sweeps (default 30 s, --quick 5 s)");
  app.add_option("--timeout-s", m.timeout_s, "a collective not done after this long is aborted (exit 4); ranks wait 2x for each other, "
                 "then end the job (exit 6)")
      ->capture_default_str();
  app.add_option("--hardware", m.hardware, "hardware preset to compare with (default: from the GPU name)");
  app.add_option("--inject-failure", m.inject, "test hook: RANK:collective|hang[:BYTES], RANK:gemm|hbm|contention|list")
      ->group("");
  app.add_option("--nvml-library", m.nvml_library, "NVML library to load")->group("");
  ImportArgs ia;
  CLI::App* imp = app.add_subcommand("import", "build or update a rate profile from benchmark logs");
  imp->add_option("logs", ia.logs, "nccl-tests, mamf-finder, BabelStream, nvbandwidth logs, TraceLens GEMM.csv")
      ->required();
  imp->add_option("--hardware", ia.hardware, "hardware preset whose reference profile the logs update")->required();
  imp->add_option("--out", ia.out, "rate profile to write")->capture_default_str();
  imp->add_option("--name", ia.name, "the profile's name (default <hardware>-imported)");
  imp->add_option("--base", ia.base, "update this profile instead of the preset's reference profile");
  imp->add_option("--collective", ia.collective, "nccl-tests binary of logs that do not name it (all_reduce, ...)");
  imp->add_option("--ranks", ia.ranks, "ranks of nccl-tests logs that do not list them");
  imp->add_option("--ranks-per-node", ia.ranks_per_node, "ranks per node of nccl-tests logs without rank lines");
  imp->add_option("--html", ia.html, "also write a static HTML page of the imported rates (docs/PAGES.md)");
  imp->add_flag("--allow-other-gpu", ia.allow_other_gpu,
                "import logs whose GPU is not --hardware's (refused otherwise; noted in the profile)");
  std::string html_path;
  app.add_option("--html", html_path, "also write a static HTML page of the run (rank 0; docs/PAGES.md)");
  CLI11_PARSE(app, argc, argv);
  if (*imp) return RunImport(ia);

  std::vector<std::string> args(argv, argv + argc);
  m.command_line = absl::StrJoin(args, " ");
  absl::StatusOr<Catalog> catalog = Catalog::Builtin();
  if (!catalog.ok()) {
    std::fprintf(stderr, "stepcast-calibrate: %s\n", std::string(catalog.status().message()).c_str());
    return kExitUsage;
  }
  std::unique_ptr<Communicator> comm;
  if (m.mpi || m.backend == "mpi") {
    // A rank whose collective timed out (after --timeout-s) still joins the agreement: the MPI
    // calls wait twice as long before they end the job (calibrate/flow.h).
    absl::StatusOr<std::unique_ptr<Communicator>> c = LoadMpiCommunicator(&argc, &argv, 2 * m.timeout_s);
    if (!c.ok()) {
      std::fprintf(stderr, "stepcast-calibrate: %s\n", std::string(c.status().message()).c_str());
      return kExitUsage;
    }
    comm = *std::move(c);
  } else {
    comm = MakeSingleProcessCommunicator();
  }
  std::unique_ptr<GpuSystem> gpus = make_gpus();
  const int rc = RunMeasure(m, *gpus, *comm, *catalog);
  if (!html_path.empty() && comm->rank() == 0) {
    // The page is drawn from the run file RunMeasure wrote (also after a partial run).
    const std::string run_path = m.run_out.empty() ? m.out + ".run.json" : m.run_out;
    v1::CalibrationRun run;
    if (absl::Status s = ParseMessageFile(run_path, &run); !s.ok()) {
      std::fprintf(stderr, "stepcast-calibrate: --html: no run to draw (%s)\n", std::string(s.message()).c_str());
      return rc == kExitOk ? kExitWriteFailed : rc;
    }
    absl::StatusOr<Hardware> hw = catalog->FindHardware(m.hardware.empty() ? run.profile().hardware() : m.hardware);
    if (absl::Status s = html::WritePage(html_path, html::CalibrationPage(run, hw.ok() ? &*hw : nullptr)); !s.ok()) {
      std::fprintf(stderr, "stepcast-calibrate: --html: %s\n", std::string(s.message()).c_str());
      return rc == kExitOk ? kExitWriteFailed : rc;
    }
  }
  return rc;
}

}  // namespace stepcast::calibrate
