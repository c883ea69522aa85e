// libstepcast_probe.so: the run probe, injected into a training process with
//   CUDA_INJECTION64_PATH=/path/libstepcast_probe.so python train.py ...
// CUDA calls InitializeInjection() at its initialisation; nothing in the training code changes.
//
// It records kernel activity with CUPTI (CONCURRENT_KERNEL, which does not serialise kernels;
// MEMCPY, MEMSET; the launch calls of the runtime AND the driver API only, whose correlation ids
// give each kernel the step that launched it: NCCL launches with cuLaunchKernelEx and Triton with
// cuLaunchKernel, which have no runtime record (gpu code review 2, N8; Kineto added DRIVER
// records for them, pytorch/kineto#752), and recording every runtime call (cudaGetDevice, ...)
// cost every call and filled the launch map; MARKER for NVTX ranges, routing NVTX to CUPTI when
// the process has not chosen an NVTX injection), flushes completed buffers every second and at
// exit, and hands the records to a Collector (bounded memory). At exit it disables the
// activities, flushes (NVIDIA's cupti_trace_injection sample does the same), and writes the
// process's JSON report (stepcast.v1.ProbeReport) unless the process launched no kernel (a
// helper process that only loaded CUDA: gpu_code_review item 7); when STEPCAST_SERVER and
// STEPCAST_PREDICTION_ID are set and STEPCAST_PROBE_REPORT is not "0", rank 0 reports the run to
// the service through the stepcast CLI in a child process (`stepcast report --probe`; the binary
// beside the library, ../bin/stepcast, or STEPCAST_CLI; its token from STEPCAST_REPORT_TOKEN or
// STEPCAST_TOKEN), so no gRPC is loaded into the training process. The library exports only
// InitializeInjection (plugin/probe/probe.map).
//
// Another CUPTI client (torch.profiler / Kineto, Nsight Systems) registering its own activity
// callbacks takes the records away from the probe (Kineto's CuptiActivityApi re-registers at
// every profiling window). The probe notices: every 10 s, while it holds a buffer, it forces a
// flush; when its own BufferCompleted is no longer called, the callbacks are not its own any more.
// It then says so on stderr at once and in the report (cupti_taken_over, a note): the report
// covers the steps before the takeover only. The two are exclusive: profile with one or the other.
//
// Environment: STEPCAST_PROBE_OUT (report path; %r rank, %p pid; default
// stepcast_probe.rank%r.pid%p.json: one report per process, a child that launches kernels (an
// Inductor autotuning subprocess) no longer overwrites its rank's), STEPCAST_PROBE_STEP_RANGE
// (NVTX name pattern, default "step"),
// STEPCAST_PROBE_WARMUP (steps left out, default 2), STEPCAST_PROBE_DISABLE=1.
//
// If CUPTI is unavailable, busy (another profiler subscribed) or the driver too old, the process
// runs on untouched and the probe says why once on stderr.
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <new>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "plugin/probe/collector.h"
#include "proto/codec.h"

extern "C" int InitializeInjection(void);
extern char** environ;

namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kAlign = 8;

// Never destroyed (CUPTI's worker may deliver a buffer during static destruction: review item 10).
std::atomic<stepcast::probe::Collector*> g_collector{nullptr};
std::atomic<bool> g_active{false};
std::atomic<int64_t> g_buffers_requested{0}, g_buffers_completed{0};
std::atomic<bool> g_taken_over{false};
std::vector<CUpti_ActivityKind> g_enabled;  // written once at initialisation
std::atomic<bool> g_stop{false};
std::thread g_flusher;
std::mutex g_flush_mu;
std::condition_variable g_flush_cv;
std::once_flag g_once;

void Say(const std::string& s) { std::fprintf(stderr, "stepcast probe: %s\n", s.c_str()); }

std::string Env(const char* k, const char* fallback = "") {
  const char* v = std::getenv(k);
  return v != nullptr ? v : fallback;
}

int Rank() {
  for (const char* k : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(k)) return std::atoi(v);
  }
  return 0;
}

const char* ResultString(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "unknown CUPTI error";
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  g_buffers_requested.fetch_add(1);
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  g_buffers_completed.fetch_add(1);
  stepcast::probe::Collector* c = g_collector.load();
  CUpti_Activity* rec = nullptr;
  while (c != nullptr && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
        c->AddKernel(k->name ? k->name : "?", static_cast<int64_t>(k->start), static_cast<int64_t>(k->end),
                     static_cast<int32_t>(k->streamId), static_cast<int64_t>(k->correlationId));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
        c->AddMemory(false, static_cast<int64_t>(m->start), static_cast<int64_t>(m->end),
                     static_cast<int32_t>(m->streamId), static_cast<int64_t>(m->correlationId));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
        c->AddMemory(true, static_cast<int64_t>(m->start), static_cast<int64_t>(m->end),
                     static_cast<int32_t>(m->streamId), static_cast<int64_t>(m->correlationId));
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        // A runtime launch and the driver call it makes share the correlation id; the collector
        // keeps the earlier (the runtime call's) time.
        auto* a = reinterpret_cast<CUpti_ActivityAPI*>(rec);
        c->AddLaunch(static_cast<int64_t>(a->correlationId), static_cast<int64_t>(a->start));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MARKER: {
        auto* m = reinterpret_cast<CUpti_ActivityMarker2*>(rec);
        if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
          c->AddRangeStart(m->id, m->name ? m->name : "", static_cast<int64_t>(m->timestamp));
        } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
          c->AddRangeEnd(m->id, static_cast<int64_t>(m->timestamp));
        }
        break;
      }
      default: break;
    }
  }
  size_t dropped = 0;
  if (c != nullptr && cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    c->AddDropped(static_cast<int64_t>(dropped));
  }
  std::free(buffer);
}

// The takeover check (flusher thread, every 10 s): while one of our buffers is outstanding,
// force a flush; if our BufferCompleted was not called by the next check, another client's
// callbacks receive the buffers now.
void CheckTakeover(int64_t* pending_since_completed) {
  if (g_taken_over) return;
  const int64_t completed = g_buffers_completed.load();
  if (*pending_since_completed >= 0 && completed == *pending_since_completed &&
      g_buffers_requested.load() > completed) {
    g_taken_over = true;
    Say("another CUPTI client (torch.profiler / Kineto, Nsight Systems) took over the activity records: "
        "the probe measures nothing from here on, and its report covers the steps before (profile with one "
        "or the other)");
    return;
  }
  *pending_since_completed = -1;
  if (g_buffers_requested.load() > completed) {
    *pending_since_completed = completed;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
}

void EnableLaunchRecords(bool enable);
void ReportThroughCli(const std::string& report_path, const std::string& server, const std::string& prediction);

void WriteReport() {
  if (!g_active.exchange(false)) return;
  g_stop = true;
  g_flush_cv.notify_all();
  if (g_flusher.joinable()) g_flusher.join();
  // As NVIDIA's cupti_trace_injection AtExitHandler: disable, then force the last flush.
  for (CUpti_ActivityKind k : g_enabled) cuptiActivityDisable(k);
  EnableLaunchRecords(false);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  stepcast::probe::Collector* c = g_collector.load();
  if (c == nullptr || c->kernels_seen() == 0) return;  // a process that launched no kernel writes nothing
  stepcast::v1::ProbeReport report = c->Finish();
  if (g_taken_over) {
    report.set_cupti_taken_over(true);
    report.add_notes("another CUPTI client (torch.profiler / Kineto, Nsight Systems) took over the activity "
                     "records during the run: the steps after that are missing");
  }
  const int rank = Rank();
  report.set_rank(rank);
  report.set_pid(static_cast<int32_t>(getpid()));
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  report.set_host(host);
  std::string path = Env("STEPCAST_PROBE_OUT", "stepcast_probe.rank%r.pid%p.json");
  path = absl::StrReplaceAll(path, {{"%r", std::to_string(rank)}, {"%p", std::to_string(getpid())}});
  std::ofstream out(path);
  out << stepcast::ToJson(report);
  out.close();
  const bool written = static_cast<bool>(out);
  if (!written) Say(absl::StrCat("cannot write the report ", path));
  Say(absl::StrCat("rank ", rank, ": ", report.steps_size(), " steps (", report.step_source(), "), median step ",
                   report.median().step_time_s(), " s; report ", path));
  const std::string server = Env("STEPCAST_SERVER"), prediction = Env("STEPCAST_PREDICTION_ID");
  if (rank == 0 && !server.empty() && !prediction.empty() && Env("STEPCAST_PROBE_REPORT", "1") != "0" &&
      report.steps_size() > 0 && written) {
    ReportThroughCli(path, server, prediction);
  }
}

// The launch calls whose records link a kernel, copy or set to its launch (cupti_runtime_cbid.h,
// cupti_driver_cbid.h): kernels, cooperative kernels, graphs, and the common copies and sets.
constexpr CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
};
constexpr CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};
using EnableApiFn = CUptiResult (*)(CUpti_CallbackId, uint8_t);
EnableApiFn g_enable_runtime_api = nullptr, g_enable_driver_api = nullptr;

// Launch records only: cuptiActivityEnableRuntimeApi / EnableDriverApi (CUPTI 12.6+, looked up at
// run time so an older libcupti still loads the probe). Without them: every runtime call (the
// RUNTIME kind, as before), and no driver launch.
void EnableLaunchRecords(bool enable) {
  if (g_enable_runtime_api == nullptr && g_enable_driver_api == nullptr) return;
  for (CUpti_CallbackId id : kRuntimeLaunches) g_enable_runtime_api(id, enable ? 1 : 0);
  for (CUpti_CallbackId id : kDriverLaunches) g_enable_driver_api(id, enable ? 1 : 0);
}

// Rank 0's report to the service, through the stepcast CLI in a child process: no gRPC in the
// training process. Waits at most 30 s for it.
void ReportThroughCli(const std::string& report_path, const std::string& server, const std::string& prediction) {
  std::string bin = Env("STEPCAST_CLI");
  if (bin.empty()) {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&InitializeInjection), &info) && info.dli_fname) {
      std::string lib = info.dli_fname;
      const size_t slash = lib.rfind('/');
      bin = (slash == std::string::npos ? std::string(".") : lib.substr(0, slash)) + "/../bin/stepcast";
    }
  }
  if (bin.empty() || access(bin.c_str(), X_OK) != 0) {
    Say(absl::StrCat("could not report to ", server, ": no stepcast binary at '", bin, "' (set STEPCAST_CLI)"));
    return;
  }
  std::vector<std::string> args = {bin, "report", "--server", server, "--prediction-id", prediction,
                                   "--probe", report_path, "--deadline-ms", "5000"};
  // The report-only token (docs/SERVICE.md); STEPCAST_TOKEN for servers with one token. Passed
  // in a file only the user can read, removed afterwards.
  const std::string token = Env("STEPCAST_REPORT_TOKEN", Env("STEPCAST_TOKEN").c_str());
  std::string token_file;
  if (!token.empty()) {
    std::string tmpl = Env("TMPDIR", "/tmp") + "/stepcast_probe_token.XXXXXX";
    const int fd = mkstemp(tmpl.data());
    if (fd < 0) {
      Say(absl::StrCat("could not report to ", server, ": cannot write the token file"));
      return;
    }
    fchmod(fd, 0600);
    const bool written = write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
    close(fd);
    token_file = tmpl;
    if (!written) {
      unlink(token_file.c_str());
      Say(absl::StrCat("could not report to ", server, ": cannot write the token file"));
      return;
    }
    args.push_back("--token-file");
    args.push_back(token_file);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child is no CUDA program: it does not get the probe injected again.
  std::vector<std::string> env_s;
  for (char** e = environ; e && *e; ++e) {
    if (absl::StartsWith(*e, "CUDA_INJECTION64_PATH=") || absl::StartsWith(*e, "NVTX_INJECTION64_PATH=")) continue;
    env_s.push_back(*e);
  }
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, bin.c_str(), nullptr, nullptr, argv.data(), envp.data()) != 0) {
    if (!token_file.empty()) unlink(token_file.c_str());
    Say(absl::StrCat("could not report to ", server, ": cannot start ", bin));
    return;
  }
  int status = 0;
  bool done = false;
  for (int i = 0; i < 600 && !done; ++i) {  // 30 s
    done = waitpid(pid, &status, WNOHANG) == pid;
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  if (!token_file.empty()) unlink(token_file.c_str());
  Say(done && WIFEXITED(status) && WEXITSTATUS(status) == 0
          ? absl::StrCat("reported the run to ", server, " (stepcast report --probe ", report_path, ")")
          : absl::StrCat("could not report to ", server, ": stepcast report ",
                         done ? absl::StrCat("exited ", WIFEXITED(status) ? WEXITSTATUS(status) : -1)
                              : std::string("did not finish in 30 s")));
}

bool Enable(CUpti_ActivityKind kind, const char* what, bool required) {
  const CUptiResult r = cuptiActivityEnable(kind);
  if (r == CUPTI_SUCCESS) {
    g_enabled.push_back(kind);
    return true;
  }
  if (required) Say(absl::StrCat("disabled: cannot enable ", what, " activity (", ResultString(r), ")"));
  return false;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  std::call_once(g_once, [] {
    if (Env("STEPCAST_PROBE_DISABLE") == "1") return;
    // Route NVTX to CUPTI (for step ranges) unless the process chose its own NVTX injection.
    if (const char* nvtx = std::getenv("NVTX_INJECTION64_PATH"); nvtx != nullptr) {
      Say(absl::StrCat("NVTX goes to ", nvtx, " (Nsight Systems?), not to the probe: no step ranges; steps come "
                       "from the kernel period"));
    } else {
      Dl_info info;
      if (dladdr(reinterpret_cast<void*>(&cuptiActivityEnable), &info) && info.dli_fname) {
        setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
      }
    }
    stepcast::probe::Collector::Options opt;
    opt.step_pattern = Env("STEPCAST_PROBE_STEP_RANGE", "step");
    opt.warmup_steps = std::atoi(Env("STEPCAST_PROBE_WARMUP", "2").c_str());
    auto* collector = new stepcast::probe::Collector(opt);  // never deleted (see g_collector)
    CUptiResult r = cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
    if (r != CUPTI_SUCCESS) {
      Say(absl::StrCat("disabled: CUPTI unavailable (", ResultString(r), "); the process runs untouched"));
      delete collector;
      return;
    }
    g_collector = collector;
    if (!Enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernel", true)) {
      cuptiActivityFlushAll(0);
      g_collector = nullptr;  // the collector stays allocated: a late buffer may still read it
      return;
    }
    Enable(CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy", false);
    Enable(CUPTI_ACTIVITY_KIND_MEMSET, "memset", false);
    // Launch records give each kernel its step by correlation id (gpu_code_review item 8): the
    // launch calls of the runtime and the driver API only (N8), else every runtime call.
    g_enable_runtime_api = reinterpret_cast<EnableApiFn>(dlsym(RTLD_DEFAULT, "cuptiActivityEnableRuntimeApi"));
    g_enable_driver_api = reinterpret_cast<EnableApiFn>(dlsym(RTLD_DEFAULT, "cuptiActivityEnableDriverApi"));
    if (g_enable_runtime_api == nullptr || g_enable_driver_api == nullptr) {
      g_enable_runtime_api = g_enable_driver_api = nullptr;
      Enable(CUPTI_ACTIVITY_KIND_RUNTIME, "runtime API", false);
      Say("this CUPTI has no per-API activity control (12.6+): every runtime call is recorded, driver-API "
          "launches (NCCL, Triton) are not linked to their step");
    } else {
      EnableLaunchRecords(true);
    }
    Enable(CUPTI_ACTIVITY_KIND_MARKER, "NVTX marker", false);
    g_active = true;
    g_flusher = std::thread([] {
      std::unique_lock<std::mutex> lock(g_flush_mu);
      int64_t pending = -1;
      for (int tick = 1; !g_stop; ++tick) {
        g_flush_cv.wait_for(lock, std::chrono::seconds(1));
        if (g_stop) break;
        cuptiActivityFlushAll(0);  // completed buffers only; no GPU sync
        if (tick % 10 == 0) CheckTakeover(&pending);
      }
    });
    std::atexit(WriteReport);
    // A fork()ed child inherits g_active but not the flusher thread: its atexit must neither
    // join a thread that does not exist there nor write the parent's report or a second
    // ReportRun (reliability review L6). The child's probe is off.
    pthread_atfork(nullptr, nullptr, [] {
      g_active = false;
      // Forget the parent's thread handle without touching it (its destructor at exit would
      // otherwise std::terminate on a joinable thread that does not exist in the child).
      new (&g_flusher) std::thread();
    });
  });
  return 1;  // never fails CUDA's initialisation
}
