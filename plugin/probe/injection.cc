// libstepcast_probe.so: the run probe, injected into a training process with
//   CUDA_INJECTION64_PATH=/path/libstepcast_probe.so python train.py ...
// CUDA calls InitializeInjection() at its initialisation; nothing in the training code changes.
//
// It records kernel activity with CUPTI (CONCURRENT_KERNEL, which does not serialise kernels;
// MEMCPY, MEMSET; RUNTIME, whose correlation ids give each kernel the step that launched it;
// MARKER for NVTX ranges, routing NVTX to CUPTI when the process has not chosen an NVTX
// injection), flushes completed buffers every second and at exit, and hands the records to a
// Collector (bounded memory). At exit it disables the activities, flushes (NVIDIA's
// cupti_trace_injection sample does the same), and writes the rank's JSON report
// (stepcast.v1.ProbeReport) unless the process launched no kernel (a helper process that only
// loaded CUDA: gpu_code_review item 7); when STEPCAST_SERVER and STEPCAST_PREDICTION_ID are set
// and STEPCAST_PROBE_REPORT is not "0", rank 0 reports the run to the service (its token from
// STEPCAST_TOKEN).
//
// Another CUPTI client (torch.profiler / Kineto, Nsight Systems) registering its own activity
// callbacks takes the records away from the probe (Kineto's CuptiActivityApi re-registers at
// every profiling window). The probe notices: every 10 s, while it holds a buffer, it forces a
// flush; when its own BufferCompleted is no longer called, the callbacks are not its own any more.
// It then says so on stderr at once and in the report (cupti_taken_over, a note): the report
// covers the steps before the takeover only. The two are exclusive: profile with one or the other.
//
// Environment: STEPCAST_PROBE_OUT (report path; %r rank, %p pid; default
// stepcast_probe.rank%r.json), STEPCAST_PROBE_STEP_RANGE (NVTX name pattern, default "step"),
// STEPCAST_PROBE_WARMUP (steps left out, default 2), STEPCAST_PROBE_DISABLE=1.
//
// If CUPTI is unavailable, busy (another profiler subscribed) or the driver too old, the process
// runs on untouched and the probe says why once on stderr.
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
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

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "plugin/client.h"
#include "plugin/compare.h"
#include "plugin/probe/collector.h"
#include "proto/codec.h"

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
      case CUPTI_ACTIVITY_KIND_RUNTIME: {
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

void WriteReport() {
  if (!g_active.exchange(false)) return;
  g_stop = true;
  g_flush_cv.notify_all();
  if (g_flusher.joinable()) g_flusher.join();
  // As NVIDIA's cupti_trace_injection AtExitHandler: disable, then force the last flush.
  for (CUpti_ActivityKind k : g_enabled) cuptiActivityDisable(k);
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
  std::string path = Env("STEPCAST_PROBE_OUT", "stepcast_probe.rank%r.json");
  path = absl::StrReplaceAll(path, {{"%r", std::to_string(rank)}, {"%p", std::to_string(getpid())}});
  std::ofstream(path) << stepcast::ToJson(report);
  Say(absl::StrCat("rank ", rank, ": ", report.steps_size(), " steps (", report.step_source(), "), median step ",
                   report.median().step_time_s(), " s; report ", path));
  const std::string server = Env("STEPCAST_SERVER"), prediction = Env("STEPCAST_PREDICTION_ID");
  if (rank == 0 && !server.empty() && !prediction.empty() && Env("STEPCAST_PROBE_REPORT", "1") != "0" &&
      report.steps_size() > 0) {
    stepcast::ClientOptions o;
    o.address = server;
    // The report-only token (docs/SERVICE.md); STEPCAST_TOKEN for servers with one token.
    o.token = Env("STEPCAST_REPORT_TOKEN", Env("STEPCAST_TOKEN").c_str());
    o.deadline_ms = 5000;
    absl::StatusOr<stepcast::Client> c = stepcast::Client::Connect(o);
    stepcast::v1::ReportRunRequest req;
    req.set_prediction_id(prediction);
    req.set_measured_step_time_s(report.median().step_time_s());
    *req.mutable_measured_breakdown() = stepcast::MeasuredBreakdown(report.median());
    (*req.mutable_labels())["source"] = "stepcast-probe";
    stepcast::v1::ReportRunResponse resp;
    grpc::Status st = grpc::Status(grpc::UNAVAILABLE, "no client");
    if (c.ok()) st = stepcast::ReportRunWithRetry(*c, req, &resp);  // idempotent retries
    Say(st.ok() ? absl::StrCat("reported ", resp.run().run_id(), " to ", server)
                : absl::StrCat("could not report to ", server, ": ", stepcast::DescribeGrpcError(st)));
  }
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
    // Launch records give each kernel its step by correlation id (gpu_code_review item 8).
    Enable(CUPTI_ACTIVITY_KIND_RUNTIME, "runtime API", false);
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
