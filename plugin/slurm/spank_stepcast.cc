// stepcast SPANK plugin: pre-flight at srun.
//
//   srun --stepcast=enforce [--stepcast-job=FILE] [--stepcast-gpus=N] [--stepcast-hardware=PRESET] CMD...
//
// In srun (local context), after option processing (slurm_spank_init_post_opt: on Slurm 22.05
// only a failure there, not in local_user_init, stops srun), it builds the job from
// --stepcast-job or from the command line (srun's own argv from /proc/self/cmdline; the
// Megatron-LM arguments after the training script, or a torchtitan --job.config_file), takes the
// GPU count and type from the allocation (nodes x GPUs per node, the GRES type through gres_map)
// unless given, calls Preflight with a short deadline and prints a compact verdict. enforce: a
// FAIL makes srun exit non-zero before any task starts. warn:
// prints, never blocks. The service unreachable: warns and lets the job run (fail open). It
// exports STEPCAST_PREDICTION_ID and STEPCAST_SERVER to the tasks for the run probe. In remote
// contexts (slurmstepd) it does nothing and never fails (that would drain the node).
//
// plugstack.conf arguments (all optional):
//   server=HOST:PORT  mode=off|warn|enforce (default for jobs without --stepcast)
//   deadline_ms=3000  hardware=PRESET  gpus_per_node=N  gres_map=h100:h100-sxm,a100:a100-80gb
//   profile=NAME  min_mfu=X  max_memory_fraction=X  max_cost_per_hour=USD  max_cost_per_run=USD
//   max_step_time=S  tls_ca=FILE
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

extern "C" {
#include <slurm/spank.h>
}

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "plugin/client.h"
#include "plugin/policy.h"
#include "proto/codec.h"
#include "proto/launch_args.h"

extern "C" {
extern const char plugin_name[] = "stepcast";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
}

namespace {

enum class Mode { kOff, kWarn, kEnforce };

struct Config {
  std::string server = "127.0.0.1:50051";
  Mode mode = Mode::kOff;
  bool mode_from_option = false;
  int deadline_ms = 3000;
  std::string hardware, profile, tls_ca, job_file;
  int64_t gpus_per_node = 0, gpus = 0;
  std::map<std::string, std::string> gres_map;
  stepcast::v1::PreflightPolicy policy;
};
Config g;

bool ParseMode(const std::string& s, Mode* m) {
  if (s == "off") *m = Mode::kOff;
  else if (s == "warn") *m = Mode::kWarn;
  else if (s == "enforce") *m = Mode::kEnforce;
  else return false;
  return true;
}

extern "C" int OptMode(int, const char* optarg, int remote) {
  Mode m;
  if (!ParseMode(optarg ? optarg : "", &m)) {
    if (!remote) slurm_error("stepcast: --stepcast=%s: must be off, warn or enforce", optarg ? optarg : "");
    return remote ? 0 : -1;
  }
  g.mode = m;
  g.mode_from_option = true;
  return 0;
}
extern "C" int OptJob(int, const char* optarg, int remote) {
  g.job_file = optarg ? optarg : "";
  return 0;
}
extern "C" int OptGpus(int, const char* optarg, int remote) {
  if (!absl::SimpleAtoi(optarg ? optarg : "", &g.gpus) || g.gpus <= 0) {
    if (!remote) slurm_error("stepcast: --stepcast-gpus=%s: must be a positive integer", optarg ? optarg : "");
    return remote ? 0 : -1;
  }
  return 0;
}
extern "C" int OptHardware(int, const char* optarg, int) {
  g.hardware = optarg ? optarg : "";
  return 0;
}

struct spank_option kOptions[] = {
    {const_cast<char*>("stepcast"), const_cast<char*>("off|warn|enforce"),
     const_cast<char*>("Pre-flight this job with the stepcast service"), 1, 0, OptMode},
    {const_cast<char*>("stepcast-job"), const_cast<char*>("FILE"),
     const_cast<char*>("stepcast job file (default: the Megatron-LM/torchtitan command line)"), 1, 0, OptJob},
    {const_cast<char*>("stepcast-gpus"), const_cast<char*>("N"),
     const_cast<char*>("GPUs of the job (default: nodes x GPUs per node of the allocation)"), 1, 0, OptGpus},
    {const_cast<char*>("stepcast-hardware"), const_cast<char*>("PRESET"),
     const_cast<char*>("stepcast hardware preset (default: from the GRES type)"), 1, 0, OptHardware},
    SPANK_OPTIONS_TABLE_END};

void ParseArgs(int ac, char** av) {
  for (int i = 0; i < ac; ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(av[i], absl::MaxSplits('=', 1));
    const std::string& k = kv.first;
    const std::string& v = kv.second;
    double d = 0;
    if (k == "server") g.server = v;
    else if (k == "mode") { if (!ParseMode(v, &g.mode)) slurm_error("stepcast: plugstack mode=%s is not off, warn or enforce", v.c_str()); }
    else if (k == "deadline_ms") (void)absl::SimpleAtoi(v, &g.deadline_ms);
    else if (k == "hardware") g.hardware = v;
    else if (k == "profile") g.profile = v;
    else if (k == "tls_ca") g.tls_ca = v;
    else if (k == "gpus_per_node") (void)absl::SimpleAtoi(v, &g.gpus_per_node);
    else if (k == "gres_map") {
      for (absl::string_view pair : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        std::pair<std::string, std::string> m = absl::StrSplit(pair, absl::MaxSplits(':', 1));
        g.gres_map[absl::AsciiStrToLower(m.first)] = m.second;
      }
    } else if (k == "min_mfu" && absl::SimpleAtod(v, &d)) g.policy.set_min_mfu(d);
    else if (k == "max_memory_fraction" && absl::SimpleAtod(v, &d)) g.policy.set_max_memory_fraction(d);
    else if (k == "max_cost_per_hour" && absl::SimpleAtod(v, &d)) g.policy.set_max_cost_per_hour_usd(d);
    else if (k == "max_cost_per_run" && absl::SimpleAtod(v, &d)) g.policy.set_max_cost_per_run_usd(d);
    else if (k == "max_step_time" && absl::SimpleAtod(v, &d)) g.policy.set_max_step_time_s(d);
    else slurm_error("stepcast: unknown plugstack argument '%s' (ignored)", av[i]);
  }
}

// GPUs per node and their type from the allocation: "gres:gpu:h100:8", "gres/gpu:h100=8",
// "gpu:8" in SLURM_TRES_PER_NODE / SLURM_GPUS_PER_NODE / SLURM_JOB_GPUS.
void GpusFromAllocation(int64_t* per_node, std::string* type) {
  for (const char* var : {"SLURM_GPUS_PER_NODE", "SLURM_TRES_PER_NODE", "SLURM_GPUS_ON_NODE"}) {
    const char* v = getenv(var);
    if (v == nullptr || *v == '\0') continue;
    std::string s = v;
    for (char& c : s) if (c == '/' || c == '=') c = ':';
    std::vector<std::string> parts = absl::StrSplit(s, ':', absl::SkipEmpty());
    int64_t n = 0;
    if (!parts.empty() && absl::SimpleAtoi(parts.back(), &n) && n > 0) {
      *per_node = n;
      // The part before the count that is not "gres"/"gpu" is the type.
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        if (parts[i] != "gres" && parts[i] != "gpu") *type = absl::AsciiStrToLower(parts[i]);
      }
      return;
    }
  }
}

void Log(const std::string& s) { slurm_spank_log("%s", s.c_str()); }

// srun's own command line.
std::vector<std::string> OwnCommandLine() {
  std::vector<std::string> out;
  std::FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (f == nullptr) return out;
  std::string cur;
  int c;
  while ((c = std::fgetc(f)) != EOF) {
    if (c == '\0') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(c));
    }
  }
  std::fclose(f);
  return out;
}

// Nodes of the job: the allocation's (inside sbatch/salloc), else srun's -N/--nodes, else 1.
int64_t NodeCount(const std::vector<std::string>& cmd) {
  for (const char* var : {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}) {
    int64_t n = 0;
    if (const char* v = getenv(var); v != nullptr && absl::SimpleAtoi(v, &n) && n > 0) return n;
  }
  for (size_t i = 0; i < cmd.size(); ++i) {
    std::string v;
    if ((cmd[i] == "-N" || cmd[i] == "--nodes") && i + 1 < cmd.size()) v = cmd[i + 1];
    else if (absl::StartsWith(cmd[i], "--nodes=")) v = cmd[i].substr(8);
    else if (absl::StartsWith(cmd[i], "-N") && cmd[i].size() > 2) v = cmd[i].substr(2);
    else continue;
    int64_t n = 0;
    if (absl::SimpleAtoi(v.substr(0, v.find('-')), &n) && n > 0) return n;  // "2" or "2-4"
  }
  return 1;
}

}  // namespace

extern "C" int slurm_spank_init(spank_t sp, int ac, char** av) {
  for (struct spank_option* o = kOptions; o->name != nullptr; ++o) {
    if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
      slurm_error("stepcast: cannot register --%s", o->name);
    }
  }
  if (spank_context() == S_CTX_LOCAL) ParseArgs(ac, av);
  return 0;
}

extern "C" int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  if (spank_context() != S_CTX_LOCAL || g.mode == Mode::kOff) return 0;
  const bool enforce = g.mode == Mode::kEnforce;
  const char* mode_name = enforce ? "enforce" : "warn";

  // The job.
  stepcast::v1::JobSpec spec;
  std::string why;
  // The launcher the job was written for, and the flags it used: suggestions are printed in
  // its arguments, removing only what it gave (proto/launch_args.h LauncherArgsForChange).
  std::string launcher;
  std::vector<std::string> used_flags;
  if (!g.job_file.empty()) {
    absl::Status s = stepcast::ParseMessageFile(g.job_file, &spec);
    if (s.ok()) s = stepcast::InlineHfConfig(spec, ".");
    if (!s.ok()) why = std::string(s.message());
  } else {
    const std::vector<std::string> cmd = OwnCommandLine();
    if (cmd.empty()) {
      why = "cannot read the job's command line";
    } else {
      absl::StatusOr<stepcast::ImportedJob> imported = stepcast::JobFromCommand(cmd, ".");
      if (!imported.ok()) {
        why = std::string(imported.status().message());
      } else {
        launcher = imported->source;
        used_flags = imported->flags;
        for (const auto& a : imported->ignored) {
          if (absl::StartsWith(a, "--")) Log(absl::StrCat("stepcast: ignored (not modelled): ", a));
        }
        int64_t per_node = g.gpus_per_node;
        std::string gres_type;
        GpusFromAllocation(&per_node, &gres_type);
        const int64_t gpus = g.gpus > 0 ? g.gpus : NodeCount(cmd) * per_node;
        std::string hardware = g.hardware;
        if (hardware.empty() && !gres_type.empty()) {
          auto it = g.gres_map.find(gres_type);
          hardware = it != g.gres_map.end() ? it->second : gres_type;
        }
        absl::StatusOr<stepcast::v1::JobSpec> finalized = imported->Finalize(gpus, hardware, per_node);
        if (!finalized.ok()) {
          why = absl::StrCat(finalized.status().message(),
                             " (set --stepcast-gpus / --stepcast-hardware, or gpus_per_node= / hardware= in plugstack.conf)");
        } else {
          spec = *std::move(finalized);
        }
      }
    }
  }
  if (!why.empty()) {
    Log(absl::StrCat("stepcast: no pre-flight (", why, "); the job runs unchecked"));
    return 0;
  }
  if (launcher.empty()) launcher = stepcast::LauncherOfFramework(spec.framework().preset());

  // The verdict.
  stepcast::ClientOptions copt;
  copt.address = g.server;
  copt.deadline_ms = g.deadline_ms;
  copt.tls_ca_file = g.tls_ca;
  absl::StatusOr<stepcast::Client> client = stepcast::Client::Connect(copt);
  stepcast::v1::PreflightRequest req;
  *req.mutable_job() = spec;
  *req.mutable_policy() = g.policy;
  req.mutable_profile()->set_name(g.profile);
  stepcast::v1::PreflightResponse resp;
  grpc::Status st = grpc::Status(grpc::UNAVAILABLE, client.ok() ? "" : std::string(client.status().message()));
  if (client.ok()) {
    auto ctx = client->Context();
    st = client->stub().Preflight(ctx.get(), req, &resp);
  }
  if (!st.ok()) {
    if (st.error_code() == grpc::INVALID_ARGUMENT || st.error_code() == grpc::NOT_FOUND) {
      const absl::Status in_flags =
          stepcast::InLauncherTerms(launcher, absl::InvalidArgumentError(stepcast::DescribeGrpcError(st)));
      Log(absl::StrCat("stepcast: the job cannot be predicted: ", in_flags.message(), "; the job runs unchecked"));
    } else {
      Log(absl::StrCat("stepcast: WARNING: service ", g.server, " unreachable (", stepcast::DescribeGrpcError(st),
                       "); the job runs without a pre-flight check"));
    }
    return 0;
  }
  // A server that answers PASS for a NaN prediction is overruled: FAIL (plugin/policy.h).
  if (absl::Status fin = stepcast::CheckPredictionFinite(resp.prediction()); !fin.ok()) {
    resp.set_verdict(stepcast::v1::VERDICT_FAIL);
    stepcast::v1::PreflightReason* r = resp.add_reasons();
    r->set_rule("non_finite");
    r->set_message(std::string(fin.message()));
  }
  const auto& p = resp.prediction();
  const double gib = 1024.0 * 1024 * 1024;
  const char* verdict = resp.verdict() == stepcast::v1::VERDICT_PASS   ? "PASS"
                        : resp.verdict() == stepcast::v1::VERDICT_WARN ? "WARN"
                                                                       : "FAIL";
  // The step time with its interval, and the memory verdict of the memory interval (TIGHT: the
  // capacity lies inside it); docs/VALIDATION.md "Intervals".
  const std::string interval =
      p.has_step_time_interval()
          ? absl::StrFormat(" (%.0f%%: %.2f-%.2f s)", 100 * p.step_time_interval().coverage(),
                            p.step_time_interval().low_s(), p.step_time_interval().high_s())
          : "";
  const char* memory_verdict = p.memory_interval().verdict() == stepcast::v1::MEMORY_VERDICT_TIGHT ? "TIGHT"
                               : p.memory_interval().verdict() == stepcast::v1::MEMORY_VERDICT_DOES_NOT_FIT
                                   ? "DOES NOT FIT"
                               : p.memory_interval().verdict() == stepcast::v1::MEMORY_VERDICT_FITS ? "fits"
                               : p.memory().fits()                                                   ? "fits"
                                                                                                     : "DOES NOT FIT";
  Log(absl::StrFormat("stepcast: %s (%s) %s on %d x %s: step %.2f s%s, MFU %.1f%%, memory %.1f/%.1f GiB %s, "
                      "bottleneck %s; prediction %s",
                      verdict, mode_name, p.model_name(), p.gpu_count(), p.hardware_name(), p.step_time_s(), interval,
                      100 * p.mfu(), p.memory().total_bytes() / gib, p.memory().capacity_bytes() / gib, memory_verdict,
                      stepcast::BottleneckKindShortName(p.bottleneck().kind()),
                      resp.prediction_id()));
  for (const auto& n : p.step_time_interval().notes()) Log(absl::StrCat("stepcast:   interval: ", n));
  for (const auto& r : resp.reasons()) Log(absl::StrCat("stepcast:   ", r.rule(), ": ", r.message()));
  if (resp.has_suggestion()) {
    // A layout that fits, or is >= 10% faster, on the same GPUs (docs/SEARCH.md).
    const auto& sg = resp.suggestion();
    Log(absl::StrCat("stepcast: suggestion: ", sg.message()));
    for (const auto& c : sg.suggested().changes()) {
      const std::string args = stepcast::LauncherArgsForChange(launcher, used_flags, spec.training().seq_length(),
                                                               c.field(), c.before(), c.after());
      Log(absl::StrCat("stepcast:   ", c.field(), ": ", c.before(), " -> ", c.after(),
                       args.empty() ? "" : absl::StrCat("  (", args, ")")));
    }
  }
  setenv("STEPCAST_PREDICTION_ID", resp.prediction_id().c_str(), 1);
  setenv("STEPCAST_SERVER", g.server.c_str(), 1);
  if (resp.verdict() == stepcast::v1::VERDICT_FAIL && enforce) {
    Log("stepcast: refusing to start the job (--stepcast=enforce); use --stepcast=warn to run it anyway");
    return -1;
  }
  return 0;
}
