// The launch-line dispatcher and what the importers share (proto/launch_args.h,
// proto/launch_common.h).
#include "proto/launch_args.h"

#include <cstring>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_cat.h"
#include "proto/launch_data.h"

namespace stepcast {

const char* LaunchDataFile(const std::string& path) {
  for (const EmbeddedLaunchFile& f : EmbeddedLaunchData()) {
    if (path == f.path) return f.text;
  }
  return nullptr;
}

namespace {

std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool IsAssignment(const std::string& w) {
  if (w.empty() || !(absl::ascii_isalpha(static_cast<unsigned char>(w[0])) || w[0] == '_')) return false;
  for (size_t i = 1; i < w.size(); ++i) {
    if (w[i] == '=') return true;
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(w[i])) || w[i] == '_')) return false;
  }
  return false;
}

// A positive integer count ("8"); 0 for anything else ("gpu", "1:4", "2-4", "$N").
int64_t CountOf(const std::string& v) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(v, &n) || n <= 0 || n > kMaxLaunchSize) return 0;
  return n;
}

// "--opt=value", "--opt value" or "-o value" for an option in `names`: the value, else nullopt.
struct OptionScan {
  const std::vector<std::string>& argv;
  size_t& i;
  // When argv[i] is one of `names` (with "=value" or a following value): sets *value, advances
  // i past the value, and returns true.
  bool Take(std::initializer_list<const char*> names, std::string* value) {
    const std::string& a = argv[i];
    for (const char* n : names) {
      const std::string name(n);
      if (a == name && i + 1 < argv.size()) {
        *value = argv[++i];
        return true;
      }
      if (absl::StartsWith(a, name + "=")) {
        *value = a.substr(name.size() + 1);
        return true;
      }
      // Short options glued to their value: "-N2".
      if (name.size() == 2 && name[0] == '-' && name[1] != '-' && a.size() > 2 && absl::StartsWith(a, name) &&
          a[2] != '-' && a[2] != '=') {
        *value = a.substr(2);
        return true;
      }
    }
    return false;
  }
};

// Whether `w` could be the program a launcher starts (not one of its option values): a script,
// or a known launcher / interpreter.
bool LooksLikeProgram(const std::string& w) {
  const std::string b = Basename(w);
  return absl::EndsWith(b, ".py") || absl::EndsWith(b, ".sh") || b == "python" || b == "python3" ||
         absl::StartsWith(b, "python3.") || b == "torchrun" || b == "bash" || b == "sh" || b == "srun" ||
         b == "deepspeed" || b == "mpirun" || b == "mpiexec" || b == "env" || b == "nsys" || b == "numactl";
}

// Skips one launcher option at argv[i]: the option alone ("--x=v", or one of `switches`), or
// with its value (one of `values`; an option in neither takes the next word as its value unless
// that word looks like a program). Returns the index after it.
size_t SkipOne(const std::vector<std::string>& argv, size_t i, const std::set<std::string>& values,
               const std::set<std::string>& switches) {
  const std::string& a = argv[i];
  if (a.find('=') != std::string::npos || switches.count(a)) return i + 1;
  if (values.count(a)) return i + 2;
  if (i + 1 < argv.size() && !argv[i + 1].empty() && argv[i + 1][0] != '-' && !LooksLikeProgram(argv[i + 1])) {
    return i + 2;
  }
  return i + 1;
}

// Skips a launcher's options from argv[i] (i at its first option) up to its program ("--" ends
// them). Returns the index of the program.
size_t SkipOptions(const std::vector<std::string>& argv, size_t i, const std::set<std::string>& values,
                   const std::set<std::string>& switches) {
  while (i < argv.size()) {
    const std::string& a = argv[i];
    if (a == "--") return i + 1;
    if (a.size() < 2 || a[0] != '-') return i;
    i = SkipOne(argv, i, values, switches);
  }
  return i;
}

// ParseLauncherPrefix's walk over the launchers in front of the program: the GPU count each
// launcher states, and where the program is found.
struct PrefixScan {
  PrefixScan(const std::vector<std::string>& a, LauncherPrefix& o) : argv(a), out(o) {}
  const std::vector<std::string>& argv;
  LauncherPrefix& out;
  int64_t torchrun_gpus = 0, srun_gpus = 0, other_gpus = 0;
  std::string torchrun_from, srun_from, other_from;
  bool srun_direct = false;  // srun starts the program itself (one task per GPU)
  std::string last_launcher;

  size_t n() const { return argv.size(); }
  // The program is argv[program], its arguments start at argv[args].
  void Finish(size_t program, size_t args, bool module) {
    out.program_index = program;
    out.args_index = args;
    out.program = program < n() ? argv[program] : "";
    out.module = module;
  }
};

bool IsPython(const std::string& base) {
  return base == "python" || base == "python3" || absl::StartsWith(base, "python3.");
}

// torchrun (or python -m torch.distributed.run/launch) at argv[i]: its options as
// torch/distributed/run.py get_args_parser defines them; GPUs = --nproc-per-node x --nnodes.
// Ends the walk at the program (a script, or -m module).
void ScanTorchrun(PrefixScan& s, size_t i, const std::string& base) {
  // torchrun's options (torch/distributed/run.py get_args_parser): those taking a value.
  static const std::set<std::string> kTorchrunValues = {
      "--nnodes", "--nproc-per-node", "--nproc_per_node", "--node-rank", "--node_rank", "--master-addr",
      "--master_addr", "--master-port", "--master_port", "--rdzv-backend", "--rdzv_backend", "--rdzv-endpoint",
      "--rdzv_endpoint", "--rdzv-id", "--rdzv_id", "--rdzv-conf", "--rdzv_conf", "--max-restarts", "--max_restarts",
      "--monitor-interval", "--monitor_interval", "--start-method", "--start_method", "--role", "--log-dir",
      "--log_dir", "-r", "--redirects", "-t", "--tee", "--local-ranks-filter", "--local_ranks_filter",
      "--local-addr", "--local_addr", "--logs-specs", "--logs_specs", "--event-log-handler", "--numa-binding"};
  static const std::set<std::string> kTorchrunSwitches = {"--standalone", "--no-python", "--no_python",
                                                         "--run-path", "--run_path", "--virtual-local-rank"};
  const std::vector<std::string>& argv = s.argv;
  const size_t n = s.n();
  size_t j = base == "torchrun" ? i + 1 : i + 3;
  int64_t nproc = 1, nnodes = 1;
  bool known = true;
  std::vector<std::string> from = {"torchrun"};
  bool module = false;
  while (j < n) {
    OptionScan scan{argv, j};
    std::string v;
    if (scan.Take({"--nproc-per-node", "--nproc_per_node"}, &v)) {
      nproc = CountOf(v);
      known = known && nproc > 0;
      from.push_back(absl::StrCat("--nproc_per_node ", v));
      ++j;
    } else if (scan.Take({"--nnodes"}, &v)) {
      nnodes = CountOf(v);
      known = known && nnodes > 0;
      from.push_back(absl::StrCat("--nnodes ", v));
      ++j;
    } else if (argv[j] == "-m" || argv[j] == "--module") {
      module = true;
      ++j;
    } else if (argv[j].size() > 1 && argv[j][0] == '-') {
      j = SkipOne(argv, j, kTorchrunValues, kTorchrunSwitches);
    } else {
      break;
    }
  }
  if (known) {
    s.torchrun_gpus = nproc * nnodes;
    s.torchrun_from = absl::StrJoin(from, " ");
  }
  s.last_launcher = "torchrun";
  if (j < n) s.Finish(j, j + 1, module);
}

// python at argv[i]: its options (-X and -W take a value), then "-m module" or a script; "-c"
// leaves the program unknown. Ends the walk.
void ScanPython(PrefixScan& s, size_t i) {
  const std::vector<std::string>& argv = s.argv;
  const size_t n = s.n();
  size_t j = i + 1;
  while (j < n && argv[j].size() > 1 && argv[j][0] == '-' && argv[j] != "-m" && argv[j] != "-c") {
    j += (argv[j] == "-X" || argv[j] == "-W") ? 2 : 1;
  }
  if (j < n && argv[j] == "-m" && j + 1 < n) s.Finish(j + 1, j + 2, true);
  else if (j < n && argv[j] != "-c") s.Finish(j, j + 1, false);
}

// srun at argv[i]: its options (srun(1); those in kSrunSwitches take no value); GPUs =
// --ntasks, else nodes x --ntasks-per-node, else nodes x --gpus-per-node, else --gpus. Returns
// the index after its options (the walk goes on: srun may start another launcher).
size_t ScanSrun(PrefixScan& s, size_t i) {
  // srun(1) options without a value (the rest take one).
  static const std::set<std::string> kSrunSwitches = {
      "-l", "--label", "-u", "--unbuffered", "-v", "--verbose", "-Q", "--quiet", "-K", "--kill-on-bad-exit",
      "-E", "--preserve-env", "-X", "--disable-status", "-Z", "--no-allocate", "-O", "--overcommit", "-s",
      "--oversubscribe", "-H", "--hold", "--exclusive", "--overlap", "--pty", "--multi-prog", "--contiguous",
      "--container-remap-root", "--no-container-remap-root", "--container-writable", "--container-readonly",
      "--no-container-mount-home", "--container-mount-home", "--no-container-entrypoint", "--container-entrypoint",
      "--no-kill", "-k", "--test-only", "--spread-job", "--use-min-nodes", "--whole", "--exact", "--reboot"};
  const std::vector<std::string>& argv = s.argv;
  const size_t n = s.n();
  size_t j = i + 1;
  int64_t nodes = 0, ntasks = 0, per_node = 0, gpus_per_node = 0, gpus = 0;
  std::vector<std::string> from = {"srun"};
  while (j < n && argv[j].size() > 1 && argv[j][0] == '-') {
    OptionScan scan{argv, j};
    std::string v;
    auto count_after_type = [](const std::string& x) { return CountOf(x.substr(x.rfind(':') + 1)); };
    if (scan.Take({"-N", "--nodes"}, &v)) {
      nodes = CountOf(v), from.push_back(absl::StrCat("-N ", v));
    } else if (scan.Take({"-n", "--ntasks"}, &v)) {
      ntasks = CountOf(v), from.push_back(absl::StrCat("--ntasks ", v));
    } else if (scan.Take({"--ntasks-per-node"}, &v)) {
      per_node = CountOf(v), from.push_back(absl::StrCat("--ntasks-per-node ", v));
    } else if (scan.Take({"--gpus-per-node"}, &v)) {
      gpus_per_node = count_after_type(v), from.push_back(absl::StrCat("--gpus-per-node ", v));
    } else if (scan.Take({"-G", "--gpus"}, &v)) {
      gpus = count_after_type(v), from.push_back(absl::StrCat("--gpus ", v));
    } else if (argv[j].find('=') != std::string::npos || kSrunSwitches.count(argv[j])) {
      // one word
    } else if (argv[j].size() == 2 || absl::StartsWith(argv[j], "--")) {
      if (j + 1 < n && argv[j + 1][0] != '-' && !LooksLikeProgram(argv[j + 1])) ++j;
    }
    ++j;
  }
  const int64_t n_nodes = nodes > 0 ? nodes : 1;
  s.srun_gpus = ntasks > 0 ? ntasks : per_node > 0 ? n_nodes * per_node : gpus_per_node > 0 ? n_nodes * gpus_per_node : gpus;
  s.srun_from = absl::StrJoin(from, " ");
  s.last_launcher = "srun";
  s.srun_direct = true;
  return j;
}

// deepspeed at argv[i]: GPUs = --num_gpus x --num_nodes. Ends the walk at the program.
void ScanDeepspeed(PrefixScan& s, size_t i) {
  const std::vector<std::string>& argv = s.argv;
  const size_t n = s.n();
  size_t j = i + 1;
  int64_t g = 0, nn = 1;
  std::vector<std::string> from = {"deepspeed"};
  while (j < n && argv[j].size() > 1 && argv[j][0] == '-') {
    OptionScan scan{argv, j};
    std::string v;
    if (scan.Take({"--num_gpus", "--num-gpus"}, &v)) g = CountOf(v), from.push_back(absl::StrCat("--num_gpus ", v));
    else if (scan.Take({"--num_nodes", "--num-nodes"}, &v)) nn = CountOf(v), from.push_back(absl::StrCat("--num_nodes ", v));
    else if (argv[j].find('=') == std::string::npos && j + 1 < n && argv[j + 1][0] != '-' && !LooksLikeProgram(argv[j + 1])) ++j;
    ++j;
  }
  if (g > 0 && nn > 0) s.other_gpus = g * nn, s.other_from = absl::StrJoin(from, " ");
  if (j < n) s.Finish(j, j + 1, false);
}

// mpirun / mpiexec at argv[i]: GPUs = -np. Returns the index after its options.
size_t ScanMpirun(PrefixScan& s, size_t i, const std::string& base) {
  const std::vector<std::string>& argv = s.argv;
  const size_t n = s.n();
  size_t j = i + 1;
  while (j < n && argv[j].size() > 1 && argv[j][0] == '-') {
    OptionScan scan{argv, j};
    std::string v;
    if (scan.Take({"-np", "-n", "--np"}, &v)) {
      s.other_gpus = CountOf(v), s.other_from = absl::StrCat(base, " -np ", v);
    } else if (argv[j].find('=') == std::string::npos && j + 1 < n && argv[j + 1][0] != '-' &&
               !LooksLikeProgram(argv[j + 1])) {
      ++j;
    }
    ++j;
  }
  s.last_launcher = "mpirun";
  s.srun_direct = false;
  return j;
}

// A wrapper that starts the rest of the line (nsys profile, numactl, time, nohup, stdbuf, uv run,
// accelerate launch, nice, taskset and its CPU mask, ncu): returns the index after its options.
size_t SkipWrapper(PrefixScan& s, size_t i, const std::string& base) {
  const std::vector<std::string>& argv = s.argv;
  const size_t n = s.n();
  size_t j = i + 1;
  // Subcommands: nsys profile, uv run, accelerate launch.
  if (j < n && (argv[j] == "profile" || argv[j] == "run" || argv[j] == "launch")) ++j;
  j = SkipOptions(argv, j, {}, {});
  if (base == "taskset" && j < n && argv[j][0] != '-') ++j;  // the CPU mask
  s.srun_direct = false;
  return j;
}

// A program that is neither a script nor a module (a wrapper we do not know): falls back on the
// first "*.py" (or "*.sh") or "-m module" after it.
void FallBackOnScript(PrefixScan& s, bool shell_scripts) {
  const std::vector<std::string>& argv = s.argv;
  const size_t n = s.n();
  const std::string prog = Basename(s.out.program);
  const bool script = absl::EndsWith(prog, ".py") || (shell_scripts && absl::EndsWith(prog, ".sh")) || s.out.module;
  if (script) return;
  // Also when no program was found (bash -c "..." pretrain_gpt.py ...: the string's $0 args).
  for (size_t k = s.out.program_index < n ? s.out.program_index : 0; k < n; ++k) {
    if (absl::EndsWith(argv[k], ".py") || (shell_scripts && absl::EndsWith(argv[k], ".sh"))) {
      s.Finish(k, k + 1, false);
      break;
    }
    if (argv[k] == "-m" && k + 1 < n) {
      s.Finish(k + 1, k + 2, true);
      break;
    }
  }
}

}  // namespace

MegatronMoeDispatcher ReadMegatronMoeDispatcher(const std::string& type_in, const std::string& backend_in) {
  const std::string type = absl::AsciiStrToLower(type_in), backend = absl::AsciiStrToLower(backend_in);
  const bool no_backend = backend.empty() || backend == "none";
  MegatronMoeDispatcher out;
  if (type == "alltoall") {
    out.dispatcher = "alltoall";
  } else if (type == "flex") {
    if (!no_backend && backend != "deepep" && backend != "hybridep") {
      out.bad = "backend";
      out.why = absl::StrCat("'", backend, "' is not deepep or hybridep");
      return out;
    }
    out.dispatcher = backend == "hybridep" ? "hybridep" : "deepep";
  } else if (!type.empty() && type != "none" && type != "allgather") {
    out.bad = "type";
    out.why = absl::StrCat("'", type, "' is not allgather, alltoall or flex");
  }
  return out;
}

LauncherPrefix ParseLauncherPrefix(const std::vector<std::string>& argv, bool shell_scripts) {
  LauncherPrefix out;
  out.program_index = argv.size();
  PrefixScan s(argv, out);
  size_t i = 0;
  const size_t n = argv.size();
  bool done = false;
  while (i < n && !done) {
    const std::string& tok = argv[i];
    const std::string base = Basename(tok);
    if (IsAssignment(tok)) {
      ++i;
    } else if (base == "env") {
      i = SkipOptions(argv, i + 1, {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}, {"-i", "--ignore-environment", "-0"});
    } else if (base == "torchrun" || (IsPython(base) && i + 2 < n && argv[i + 1] == "-m" &&
                                       (argv[i + 2] == "torch.distributed.run" || argv[i + 2] == "torch.distributed.launch"))) {
      ScanTorchrun(s, i, base);
      done = true;
    } else if (IsPython(base)) {
      ScanPython(s, i);
      done = true;
    } else if (base == "srun") {
      i = ScanSrun(s, i);
    } else if (base == "deepspeed") {
      ScanDeepspeed(s, i);
      done = true;
    } else if (base == "mpirun" || base == "mpiexec") {
      i = ScanMpirun(s, i, base);
    } else if (base == "bash" || base == "sh" || base == "zsh") {
      size_t j = i + 1;
      while (j < n && argv[j].size() > 1 && argv[j][0] == '-' && argv[j] != "-c") j += (argv[j] == "-o" ? 2 : 1);
      if (j < n && argv[j] != "-c") s.Finish(j, j + 1, false);
      done = true;
    } else if (base == "nsys" || base == "numactl" || base == "time" || base == "nohup" || base == "stdbuf" ||
               base == "uv" || base == "accelerate" || base == "nice" || base == "taskset" || base == "ncu") {
      i = SkipWrapper(s, i, base);
    } else if (tok.size() > 1 && tok[0] == '-') {
      // The line starts with options: no program (the whole line is the program's arguments).
      done = true;
    } else {
      s.Finish(i, i + 1, false);
      done = true;
    }
  }
  FallBackOnScript(s, shell_scripts);
  if (out.program_index >= n) out.args_index = 0;
  if (s.torchrun_gpus > 0) {
    out.gpus = s.torchrun_gpus, out.gpus_from = s.torchrun_from;
  } else if (s.srun_gpus > 0 && s.srun_direct) {
    out.gpus = s.srun_gpus, out.gpus_from = s.srun_from;
  } else if (s.other_gpus > 0) {
    out.gpus = s.other_gpus, out.gpus_from = s.other_from;
  } else if (s.srun_gpus > 0) {
    out.gpus = s.srun_gpus, out.gpus_from = s.srun_from;
  }
  return out;
}

size_t ProgramArgsStart(const std::vector<std::string>& argv, bool shell_scripts) {
  return ParseLauncherPrefix(argv, shell_scripts).args_index;
}

absl::StatusOr<std::vector<std::string>> SplitShellWords(const std::string& command) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;
  auto flush = [&] {
    if (have) out.push_back(cur);
    cur.clear();
    have = false;
  };
  size_t i = 0;
  const size_t n = command.size();
  while (i < n) {
    const char c = command[i];
    if (c == ' ' || c == '\t') {
      flush();
      ++i;
    } else if (c == '\n') {
      flush();
      out.push_back(";");
      ++i;
    } else if (c == '\\') {
      if (i + 1 < n && command[i + 1] == '\n') {
        i += 2;  // a line continuation
      } else {
        if (i + 1 < n) cur += command[i + 1];
        have = true;
        i += 2;
      }
    } else if (c == '\'') {
      const size_t j = command.find('\'', i + 1);
      if (j == std::string::npos) return absl::InvalidArgumentError("unterminated ' in the shell command");
      cur += command.substr(i + 1, j - i - 1);
      have = true;
      i = j + 1;
    } else if (c == '"') {
      have = true;
      ++i;
      while (i < n && command[i] != '"') {
        if (command[i] == '\\' && i + 1 < n && std::string("\"\\$`\n").find(command[i + 1]) != std::string::npos) {
          if (command[i + 1] != '\n') cur += command[i + 1];
          i += 2;
        } else {
          cur += command[i++];
        }
      }
      if (i >= n) return absl::InvalidArgumentError("unterminated \" in the shell command");
      ++i;
    } else if (c == '#' && !have) {
      while (i < n && command[i] != '\n') ++i;
    } else if (c == ';' || c == '&' || c == '|') {
      flush();
      std::string op(1, c);
      if (i + 1 < n && (command[i + 1] == '&' || command[i + 1] == '|') && c != ';') op += command[++i];
      out.push_back(op);
      ++i;
    } else {
      cur += c;
      have = true;
      ++i;
    }
  }
  flush();
  return out;
}

absl::StatusOr<std::vector<std::string>> CommandInsideShellC(
    const std::vector<std::string>& argv, bool (*is_training)(const std::vector<std::string>&)) {
  // Skip the launchers in front (srun ... bash -c "...").
  size_t i = 0;
  for (; i < argv.size(); ++i) {
    const std::string b = Basename(argv[i]);
    if (b == "bash" || b == "sh" || b == "zsh") break;
  }
  if (i >= argv.size()) return std::vector<std::string>{};
  size_t j = i + 1;
  while (j < argv.size() && argv[j].size() > 1 && argv[j][0] == '-' && argv[j] != "-c") ++j;
  if (j + 1 >= argv.size() || argv[j] != "-c") return std::vector<std::string>{};
  absl::StatusOr<std::vector<std::string>> words = SplitShellWords(argv[j + 1]);
  if (!words.ok()) return words.status();
  std::vector<std::string> cmd;
  auto check = [&]() -> bool {
    // Leading VAR=value words are the command's environment.
    size_t k = 0;
    while (k < cmd.size() && IsAssignment(cmd[k])) ++k;
    std::vector<std::string> c(cmd.begin() + static_cast<std::ptrdiff_t>(k), cmd.end());
    if (!c.empty() && is_training(c)) {
      cmd = std::move(c);
      return true;
    }
    cmd.clear();
    return false;
  };
  for (const std::string& w : *words) {
    if (w == ";" || w == "&&" || w == "||" || w == "|" || w == "&") {
      if (check()) return cmd;
    } else {
      cmd.push_back(w);
    }
  }
  if (check()) return cmd;
  return std::vector<std::string>{};
}

absl::StatusOr<v1::JobSpec> ImportedJob::Finalize(int64_t gpu_count, const std::string& hardware,
                                                  int64_t gpus_per_node) const {
  if (gpu_count <= 0 && launcher_gpus > 0) gpu_count = launcher_gpus;
  if (gpu_count <= 0) {
    return absl::InvalidArgumentError(
        "cluster.gpu_count: the GPU count is required (> 0); the command does not say it (torchrun "
        "--nproc_per_node x --nnodes, srun -N x --ntasks-per-node)");
  }
  if (hardware.empty()) return absl::InvalidArgumentError("hardware: a hardware preset is required");
  v1::JobSpec spec = this->spec;
  spec.mutable_cluster()->set_gpu_count(gpu_count);
  if (gpus_per_node > 0) spec.mutable_cluster()->set_gpus_per_node(gpus_per_node);
  spec.mutable_hardware()->set_preset(hardware);
  if (source == "megatron") {
    if (absl::Status st = CheckMegatronAllocation(spec, gpu_count); !st.ok()) return st;
  }
  if (local_batch_size > 0 && spec.training().global_batch_size() == 0) {
    const auto& p = spec.parallelism();
    const int64_t model_parallel = std::max<int64_t>(1, p.tp()) * std::max<int64_t>(1, p.pp()) * std::max<int64_t>(1, p.cp());
    const int64_t dp = std::max<int64_t>(1, p.dp() > 0 ? p.dp() : gpu_count / model_parallel);
    if (local_batch_size > std::numeric_limits<int64_t>::max() / dp) {
      return absl::InvalidArgumentError(absl::StrCat("training.local_batch_size: ", local_batch_size, " x ", dp,
                                                     " data-parallel ranks overflows the global batch"));
    }
    spec.mutable_training()->set_global_batch_size(local_batch_size * dp);
  }
  return spec;
}

namespace {

// A Megatron-LM launch: its arguments name --num-layers, or its program is one of Megatron-LM's
// pretrain_*.py scripts (which JobFromMegatronArgs reads or refuses by name), or it names a
// hybrid Mamba layer pattern.
bool IsMegatronCommand(const std::vector<std::string>& argv) {
  const LauncherPrefix launch = ParseLauncherPrefix(argv, /*shell_scripts=*/false);
  if (absl::StartsWith(Basename(launch.program), "pretrain_") && absl::EndsWith(launch.program, ".py")) return true;
  for (const auto& a : argv) {
    if (absl::StartsWith(a, "--num-layers") || absl::StartsWith(a, "--num_layers") ||
        absl::StartsWith(a, "--hybrid-override-pattern") || absl::StartsWith(a, "--hybrid-layer-pattern")) {
      return true;
    }
  }
  return false;
}

bool IsTrainingCommand(const std::vector<std::string>& argv) {
  return IsNemoCommand(argv) || IsTorchtitanCommand(argv) || IsMegatronCommand(argv);
}

}  // namespace

absl::StatusOr<ImportedJob> JobFromCommand(const std::vector<std::string>& argv, const std::string& base_dir) {
  // `srun ... bash -c "CMD"` / `sh -c`: the training command inside the string.
  absl::StatusOr<std::vector<std::string>> inner = CommandInsideShellC(argv, &IsTrainingCommand);
  if (!inner.ok()) return inner.status();
  if (!inner->empty()) {
    absl::StatusOr<ImportedJob> job = JobFromCommand(*inner, base_dir);
    if (job.ok() && job->launcher_gpus == 0) {
      // The launchers outside the shell (srun -N 2 --ntasks-per-node 8 bash -c ...).
      const LauncherPrefix outer = ParseLauncherPrefix(argv, /*shell_scripts=*/false);
      job->launcher_gpus = outer.gpus;
      job->launcher_gpus_from = outer.gpus_from;
    }
    return job;
  }
  // NeMo 2 (--factory) and Megatron-Bridge (--recipe) launch lines: proto/nemo_args.h.
  if (IsNemoCommand(argv)) return JobFromNemoCommand(argv);
  if (IsTorchtitanCommand(argv)) return JobFromTorchtitanLaunch(argv, base_dir);
  if (!IsMegatronCommand(argv)) {
    return absl::InvalidArgumentError(
        "the command is neither Megatron-LM (no --num-layers) nor torchtitan (no --job.config_file, "
        "--module or --model.name/--model.flavor)");
  }
  return JobFromMegatronArgs(argv);
}

absl::Status InLauncherTerms(const std::string& launcher, const absl::Status& s) {
  if (s.ok()) return s;
  std::vector<std::pair<std::string, std::string>> map;
  if (launcher == "megatron") {
    map = {{"parallelism.tp", "--tensor-model-parallel-size"},
           {"parallelism.pp_schedule", "the pipeline schedule"},
           {"parallelism.pp", "--pipeline-model-parallel-size"},
           {"parallelism.cp", "--context-parallel-size"},
           {"parallelism.ep", "--expert-model-parallel-size"},
           {"parallelism.etp", "--expert-tensor-parallel-size"},
           {"parallelism.vpp", "--num-virtual-stages-per-pipeline-rank"},
           {"parallelism.dp_replicate", "--num-distributed-optimizer-instances"},
           {"training.global_batch_size", "--global-batch-size"},
           {"training.micro_batch_size", "--micro-batch-size"},
           {"training.seq_length", "--seq-length"},
           {"model attention_heads", "--num-attention-heads"},
           {"model ffn_hidden_size", "--ffn-hidden-size"},
           {"model moe.routed_experts", "--num-experts"},
           {"model moe.expert_ffn_hidden_size", "--moe-ffn-hidden-size"},
           {"model kv_heads", "--num-query-groups"},
           {"model layers", "--num-layers"}};
  } else if (launcher == "torchtitan") {
    map = {{"parallelism.tp", "parallelism.tensor_parallel_degree"},
           {"parallelism.pp_schedule", "parallelism.pipeline_parallel_schedule"},
           {"parallelism.pp", "parallelism.pipeline_parallel_degree"},
           {"parallelism.cp", "parallelism.context_parallel_degree"},
           {"parallelism.ep", "parallelism.expert_parallel_degree"},
           {"parallelism.etp", "parallelism.expert_tensor_parallel_degree"},
           {"parallelism.dp_replicate", "parallelism.data_parallel_replicate_degree"},
           {"training.seq_length", "training.max_context_length"}};
  } else if (launcher == "megatron-bridge" || launcher == "nemo") {
    const std::string pre = launcher == "nemo" ? "trainer.strategy." : "model.";
    map = {{"parallelism.tp", pre + "tensor_model_parallel_size"},
           {"parallelism.pp_schedule", "the pipeline schedule"},
           {"parallelism.pp", pre + "pipeline_model_parallel_size"},
           {"parallelism.cp", pre + "context_parallel_size"},
           {"parallelism.ep", pre + "expert_model_parallel_size"},
           {"parallelism.etp", pre + "expert_tensor_parallel_size"},
           {"parallelism.vpp", pre + "virtual_pipeline_model_parallel_size"},
           {"training.global_batch_size", launcher == "nemo" ? "data.global_batch_size" : "train.global_batch_size"},
           {"training.micro_batch_size", launcher == "nemo" ? "data.micro_batch_size" : "train.micro_batch_size"},
           {"training.seq_length", launcher == "nemo" ? "data.seq_length" : "dataset.seq_length"}};
  } else {
    return s;
  }
  // Longest first, so "parallelism.pp_schedule" is not read as "parallelism.pp".
  std::sort(map.begin(), map.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string msg(s.message());
  std::string out;
  for (size_t i = 0; i < msg.size();) {
    bool hit = false;
    for (const auto& [from, to] : map) {
      if (msg.compare(i, from.size(), from) == 0) {
        const size_t end = i + from.size();
        // Whole names only ("parallelism.tp" but not "parallelism.tpx").
        if (end < msg.size() && (absl::ascii_isalnum(static_cast<unsigned char>(msg[end])) || msg[end] == '_')) continue;
        out += to;
        i = end;
        hit = true;
        break;
      }
    }
    if (!hit) out += msg[i++];
  }
  return absl::Status(s.code(), out);
}

std::string LauncherOfFramework(const std::string& framework) {
  if (absl::StartsWith(framework, "torchtitan")) return "torchtitan";
  if (framework == "megatron-bridge" || framework == "nemo") return framework;
  return "megatron";
}

std::string LauncherArgsForChange(const std::string& launcher, const std::vector<std::string>& used_flags,
                                  int64_t seq_length, absl::string_view field, absl::string_view before,
                                  absl::string_view after) {
  if (launcher == "torchtitan") return TorchtitanArgsForChange(used_flags, seq_length, field, before, after);
  if (launcher == "megatron-bridge" || launcher == "nemo") {
    const bool nemo = launcher == "nemo";
    const std::string pre = nemo ? "trainer.strategy." : "model.";
    const std::string to(after);
    static const std::map<std::string, std::string> kFields = {
        {"parallelism.tp", "tensor_model_parallel_size"},   {"parallelism.pp", "pipeline_model_parallel_size"},
        {"parallelism.cp", "context_parallel_size"},        {"parallelism.ep", "expert_model_parallel_size"},
        {"parallelism.etp", "expert_tensor_parallel_size"}, {"parallelism.vpp", "virtual_pipeline_model_parallel_size"},
        {"parallelism.sequence_parallel", "sequence_parallel"}};
    if (auto it = kFields.find(std::string(field)); it != kFields.end()) {
      std::string v = to;
      if (field == "parallelism.vpp" && (to == "0" || to == "1")) v = nemo ? "None" : "null";
      return absl::StrCat(pre, it->second, "=", v);
    }
    if (field == "training.micro_batch_size") return absl::StrCat(nemo ? "data" : "train", ".micro_batch_size=", to);
    if (field == "training.recompute") {
      return absl::StrCat("model.recompute_granularity=", to == "none" ? (nemo ? "None" : "null") : to);
    }
    if (field == "training.recompute_modules") return absl::StrCat("model.recompute_modules=[", to, "]");
    if (field == "training.recompute_num_layers") {
      return absl::StrCat("model.recompute_method=block model.recompute_num_layers=", to);
    }
    if (field == "training.sharding" && !nemo) {
      if (to == "zero1") return "ddp.use_distributed_optimizer=true";
      if (to == "zero3") return "ddp.use_megatron_fsdp=true ddp.data_parallel_sharding_strategy=optim_grads_params";
      if (to == "zero2") return "ddp.use_megatron_fsdp=true ddp.data_parallel_sharding_strategy=optim_grads";
      if (to == "none") return "ddp.use_distributed_optimizer=false";
    }
    if (field == "training.overlap_tp_comm" && !nemo) return absl::StrCat("comm_overlap.tp_comm_overlap=", to);
    if (field == "training.overlap_dp_comm" && !nemo) return absl::StrCat("ddp.overlap_grad_reduce=", to);
    return "";
  }
  return MegatronArgsForChange(used_flags, field, before, after);
}

LayoutAcceptance FrameworkAcceptsLayout(const Job& job) {
  const std::string launcher = LauncherOfFramework(job.framework.name);
  if (launcher == "torchtitan") return TorchtitanAcceptsLayout(job);
  static const std::set<std::string> kMegatron = {"megatron-core", "megatron-lm-2021", "megatron-lm-2022", "nemo",
                                                  "megatron-bridge"};
  if (kMegatron.count(job.framework.name)) return MegatronAcceptsLayout(job);
  return {};
}

}  // namespace stepcast
