// Load generator for `stepcast serve`: N client threads (each with its own channel) issue one kind
// of RPC for a fixed time after a warm-up; prints throughput, p50/p90/p99/max latency and errors
// per kind. The kinds run one after the other in the same run, so that Predict and Preflight are
// read as a ratio to an empty RPC measured on the same machine minutes apart (the noise of a
// shared machine moves all three alike):
//   health     grpc.health.v1.Health/Check with an empty request: gRPC's own cost of a unary call
//              on this channel (HTTP/2, the callback server's threads), no work in the handler
//   predict    Predict with the job file
//   preflight  Preflight with the job file and an empty policy (prediction + layout suggestion +
//              verdict; the prediction is queued for the store, at most 20/s per peer)
// Run through bench/service_load.sh, which starts the server beside it.
//
//   build/bin/service_load --server 127.0.0.1:PORT --threads 8 --seconds 10 --job examples/llama3-70b-h100.yaml
//   ... --rpcs health,predict,preflight --rounds 2   the sequence twice (default once, all three)
//   ... --writers 8 [--token T]   beside the Predict load, 8 threads issuing ReportRun (store
//                                 writes) as fast as they can (docs/RELIABILITY.md)
//   ... --searchers 4             beside the Predict load, 4 threads each keeping one maximal Search
//                                 in flight (the job over 8..32768 GPUs, every schedule, overlap
//                                 off, ETP; refused ones retried after 100 ms): Predict beside 4
//                                 searches (docs/RELIABILITY.md)
//   ... --server-pid PID          also the server's CPU time per request (from /proc/PID/stat, 10 ms
//                                 ticks), beside this client's own, and for each kind beside the
//                                 health check the CPU ratio: (server + client CPU per health
//                                 check) / (the same per call of the kind), what the throughput
//                                 ratio would be if both kinds saturated the shared cores
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/client_unary_call.h"
#include "grpcpp/impl/codegen/rpc_method.h"
#include "plugin/client.h"
#include "proto/codec.h"

namespace {

using Clock = std::chrono::steady_clock;

struct PhaseResult {
  std::string rpc;
  size_t requests = 0;
  double req_per_s = 0;
  double p50_us = 0, p90_us = 0, p99_us = 0, max_us = 0;
  long errors = 0;
  double server_cpu_us = -1, client_cpu_us = -1;  // CPU per request measured (-1: unknown)
};

// CPU seconds (user + system) of process `pid` so far, from /proc/PID/stat; -1 when unreadable.
double ProcessCpuSeconds(int pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return -1;
  char buf[4096];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // Fields after the command (which may hold spaces) start after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return -1;
  unsigned long long utime = 0, stime = 0;
  // state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2) return -1;
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The health check as an empty unary call on its own channel (made like Client::Connect's):
// HealthCheckRequest{service: ""} is zero bytes on the wire; the answer must be
// HealthCheckResponse{status: SERVING} (field 1 = 1: bytes 08 01).
class HealthCaller {
 public:
  explicit HealthCaller(const std::string& address)
      : channel_(Channel(address)), method_(kMethod, grpc::internal::RpcMethod::NORMAL_RPC, channel_) {}
  // One call with `ctx` (made as for the other kinds: Client::Context()).
  bool Call(grpc::ClientContext* ctx) {
    const grpc::Slice empty(std::string{});
    grpc::ByteBuffer request(&empty, 1), response;
    const grpc::Status st =
        grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(channel_.get(), method_, ctx, request, &response);
    if (!st.ok()) return false;
    std::vector<grpc::Slice> slices;
    if (!response.Dump(&slices).ok()) return false;
    std::string bytes;
    for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    return bytes == std::string("\x08\x01", 2);
  }

 private:
  static constexpr char kMethod[] = "/grpc.health.v1.Health/Check";
  static std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(4 << 20);
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  }
  std::shared_ptr<grpc::Channel> channel_;
  grpc::internal::RpcMethod method_;
};

// What every phase shares: the command line, the requests, the server.
struct Config {
  std::string server = "127.0.0.1:50051", job_path, rpcs = "health,predict,preflight", token;
  int threads = 8, rounds = 1, writers = 0, searchers = 0, server_pid = 0;
  double seconds = 10, warmup = 2;
  stepcast::v1::PredictRequest req;
  stepcast::v1::PreflightRequest preflight_req;
  std::vector<std::string> kinds;
};

// The phase's time line: warm-up from `start`, measured from `measure_from` to `stop`.
struct Window {
  Clock::time_point measure_from, stop;
};

// One client's call of `kind` (health, predict or preflight): true when answered correctly. Each
// kind the same way: a context from Client::Context() per call, the response message reused (as a
// client in a loop would), so that the client's own work stays small beside the server's. The
// returned function holds references to `client`, `health` and `errors`.
std::function<bool()> MakeCall(const std::string& kind, const Config& c, stepcast::Client& client,
                               HealthCaller& health, std::atomic<long>& errors) {
  if (kind == "health") return [&] { return health.Call(client.Context().get()); };
  if (kind == "predict") {
    return [&, resp = std::make_shared<stepcast::v1::PredictResponse>()] {
      auto ctx = client.Context();
      const grpc::Status st = client.stub().Predict(ctx.get(), c.req, resp.get());
      if (!st.ok() && errors.load() == 0) std::fprintf(stderr, "predict: %s\n", st.error_message().c_str());
      return st.ok() && resp->prediction().step_time_s() > 0;
    };
  }
  return [&, resp = std::make_shared<stepcast::v1::PreflightResponse>()] {
    auto ctx = client.Context();
    const grpc::Status st = client.stub().Preflight(ctx.get(), c.preflight_req, resp.get());
    if (!st.ok() && errors.load() == 0) std::fprintf(stderr, "preflight: %s\n", st.error_message().c_str());
    return st.ok() && resp->prediction().step_time_s() > 0;
  };
}

// One load client: calls `kind` until w.stop, recording the latency of those started after
// w.measure_from in `latencies` (microseconds) and counting failures in `errors`.
void LoadClient(const std::string& kind, const Config& c, const Window& w, std::vector<double>& latencies,
                std::atomic<long>& errors) {
  stepcast::ClientOptions o;
  o.address = c.server;
  auto client = stepcast::Client::Connect(o);
  if (!client.ok()) {
    ++errors;
    return;
  }
  HealthCaller health(c.server);
  const std::function<bool()> call = MakeCall(kind, c, *client, health, errors);
  latencies.reserve(400000);
  while (true) {
    const auto t0 = Clock::now();
    if (t0 >= w.stop) break;
    const bool ok = call();
    const auto t1 = Clock::now();
    if (t0 < w.measure_from) continue;
    if (!ok) ++errors;
    latencies.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
}

// One ReportRun writer beside the Predict load: writes until w.stop, counting those of the
// measured window in `writes` and `write_errors`.
void ReportWriter(const Config& c, const Window& w, std::atomic<long>& writes, std::atomic<long>& write_errors) {
  stepcast::ClientOptions o;
  o.address = c.server;
  o.token = c.token;
  auto client = stepcast::Client::Connect(o);
  if (!client.ok()) return;
  // Reports name a stored prediction (as the probe's do), so that a write costs the store, not
  // another prediction on the server's CPU.
  stepcast::v1::ReportRunRequest rr;
  {
    stepcast::v1::PreflightResponse presp;
    auto ctx = client->Context();
    if (client->stub().Preflight(ctx.get(), c.preflight_req, &presp).ok() && !presp.prediction_id().empty()) {
      rr.set_prediction_id(presp.prediction_id());
    } else {
      *rr.mutable_job() = c.req.job();
    }
  }
  rr.set_measured_step_time_s(10);
  while (Clock::now() < w.stop) {
    stepcast::v1::ReportRunResponse resp;
    auto ctx = client->Context();
    const bool measuring = Clock::now() >= w.measure_from;
    const grpc::Status st = client->stub().ReportRun(ctx.get(), rr, &resp);
    if (measuring) ++(st.ok() ? writes : write_errors);
  }
}

// Counts of the searchers' outcomes.
struct SearchCounts {
  std::atomic<long> ok{0}, refused{0}, errors{0};
};

// One searcher beside the Predict load: keeps a maximal Search in flight until w.stop.
void Searcher(const Config& c, const Window& w, SearchCounts& n) {
  stepcast::ClientOptions o;
  o.address = c.server;
  o.deadline_ms = 120000;
  auto client = stepcast::Client::Connect(o);
  if (!client.ok()) return;
  stepcast::v1::SearchRequest sr;
  *sr.mutable_job() = c.req.job();
  stepcast::v1::SearchSpaceSpec* sp = sr.mutable_options()->mutable_space();
  sp->set_min_gpus(8);
  sp->set_max_gpus(32768);
  sp->set_all_schedules(true);
  sp->set_overlap_off(true);
  sp->set_search_etp(true);
  while (Clock::now() < w.stop) {
    // The rest of the phase (the service caps a search at 60 s).
    sr.mutable_options()->set_time_limit_s(std::max(0.5, std::chrono::duration<double>(w.stop - Clock::now()).count()));
    stepcast::v1::SearchResponse resp;
    auto ctx = client->Context();
    const grpc::Status st = client->stub().Search(ctx.get(), sr, &resp);
    if (st.ok()) {
      ++n.ok;
    } else {
      ++(st.error_code() == grpc::RESOURCE_EXHAUSTED ? n.refused : n.errors);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

// The phase's figures from the clients' latencies and the CPU samples at the window's ends;
// printed on one line.
PhaseResult Summarize(const std::string& kind, const Config& c, const std::vector<std::vector<double>>& latencies,
                      long errors, const double server_cpu[2], const double client_cpu[2]) {
  PhaseResult r;
  r.rpc = kind;
  r.errors = errors;
  std::vector<double> all;
  for (const auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  if (all.empty()) return r;
  std::sort(all.begin(), all.end());
  auto pct = [&](double q) { return all[std::min(all.size() - 1, static_cast<size_t>(q * all.size()))]; };
  r.requests = all.size();
  r.req_per_s = all.size() / c.seconds;
  r.p50_us = pct(0.50);
  r.p90_us = pct(0.90);
  r.p99_us = pct(0.99);
  r.max_us = all.back();
  if (server_cpu[0] >= 0 && server_cpu[1] >= 0) r.server_cpu_us = (server_cpu[1] - server_cpu[0]) / all.size() * 1e6;
  if (client_cpu[0] >= 0 && client_cpu[1] >= 0) r.client_cpu_us = (client_cpu[1] - client_cpu[0]) / all.size() * 1e6;
  std::printf("%-9s requests %zu in %.1f s: %.0f req/s, %d client threads, errors %ld; latency us: p50 %.0f  p90 %.0f  "
              "p99 %.0f  max %.0f; CPU us per request: server %.1f, client %.1f\n",
              kind.c_str(), r.requests, c.seconds, r.req_per_s, c.threads, r.errors, r.p50_us, r.p90_us, r.p99_us,
              r.max_us, r.server_cpu_us, r.client_cpu_us);
  std::fflush(stdout);
  return r;
}

// One phase: `threads` clients issuing `kind` for warmup + seconds (and the writers and searchers
// beside Predict when asked).
PhaseResult RunPhase(const std::string& kind, const Config& c) {
  Window w;
  w.measure_from = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.warmup));
  w.stop = w.measure_from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.seconds));
  std::vector<std::vector<double>> latencies(c.threads);
  std::atomic<long> errors{0}, writes{0}, write_errors{0};
  SearchCounts searches;
  std::vector<std::thread> pool;
  for (int t = 0; t < c.threads; ++t) {
    pool.emplace_back([&, t] { LoadClient(kind, c, w, latencies[t], errors); });
  }
  for (int i = 0; kind == "predict" && i < c.writers; ++i) {
    pool.emplace_back([&] { ReportWriter(c, w, writes, write_errors); });
  }
  for (int i = 0; kind == "predict" && i < c.searchers; ++i) pool.emplace_back([&] { Searcher(c, w, searches); });
  // CPU of the server and of this client over the measured window (sampled at its ends).
  double server_cpu[2] = {-1, -1}, client_cpu[2] = {-1, -1};
  std::thread sampler([&] {
    for (int i = 0; i < 2; ++i) {
      std::this_thread::sleep_until(i == 0 ? w.measure_from : w.stop);
      if (c.server_pid > 0) server_cpu[i] = ProcessCpuSeconds(c.server_pid);
      client_cpu[i] = ProcessCpuSeconds(::getpid());
    }
  });
  for (auto& th : pool) th.join();
  sampler.join();
  if (kind == "predict" && c.searchers > 0) {
    std::printf("beside %d searchers: %ld searches answered, %ld refused (RESOURCE_EXHAUSTED), %ld other errors\n",
                c.searchers, searches.ok.load(), searches.refused.load(), searches.errors.load());
  }
  if (kind == "predict" && c.writers > 0) {
    std::printf("beside %d ReportRun writers: %.0f writes/s, write errors %ld\n", c.writers, writes.load() / c.seconds,
                write_errors.load());
  }
  return Summarize(kind, c, latencies, errors.load(), server_cpu, client_cpu);
}

// The command line into `c` (requests read from the job file); nullopt to go on, else the exit code.
std::optional<int> ParseArgs(int argc, char** argv, Config& c) {
  CLI::App app{"Health check, Predict and Preflight load against a live stepcast serve"};
  app.add_option("--server", c.server)->capture_default_str();
  app.add_option("--threads", c.threads)->capture_default_str();
  app.add_option("--seconds", c.seconds, "measured seconds per RPC kind")->capture_default_str();
  app.add_option("--warmup", c.warmup, "seconds before each measurement")->capture_default_str();
  app.add_option("--job", c.job_path)->required();
  app.add_option("--rpcs", c.rpcs, "comma-separated, run in this order: health, predict, preflight")
      ->capture_default_str();
  app.add_option("--rounds", c.rounds, "run the sequence this many times")->capture_default_str();
  app.add_option("--writers", c.writers, "threads issuing ReportRun beside the Predict load")->capture_default_str();
  app.add_option("--token", c.token, "bearer token for ReportRun");
  app.add_option("--searchers", c.searchers, "threads keeping a maximal Search in flight beside the Predict load")
      ->capture_default_str();
  app.add_option("--server-pid", c.server_pid, "the server's process id: report its CPU time per request");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (absl::Status s = stepcast::ParseMessageFile(c.job_path, c.req.mutable_job()); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  *c.preflight_req.mutable_job() = c.req.job();
  c.kinds = absl::StrSplit(c.rpcs, ',', absl::SkipWhitespace());
  for (const std::string& k : c.kinds) {
    if (k != "health" && k != "predict" && k != "preflight") {
      std::fprintf(stderr, "--rpcs: '%s' is not one of health, predict, preflight\n", k.c_str());
      return 2;
    }
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  if (std::optional<int> rc = ParseArgs(argc, argv, c)) return *rc;
  bool failed = false;
  for (int round = 1; round <= c.rounds; ++round) {
    std::map<std::string, PhaseResult> results;
    for (const std::string& kind : c.kinds) {
      results[kind] = RunPhase(kind, c);
      if (results[kind].requests == 0 || results[kind].errors > 0) failed = true;
    }
    if (auto h = results.find("health"); h != results.end() && h->second.req_per_s > 0) {
      for (const char* kind : {"predict", "preflight"}) {
        if (auto it = results.find(kind); it != results.end()) {
          std::printf("round %d: %s / health = %.0f / %.0f req/s = %.0f%%", round, kind, it->second.req_per_s,
                      h->second.req_per_s, 100 * it->second.req_per_s / h->second.req_per_s);
          // Server and client share the cores: the throughput ratio of two saturated kinds is the
          // inverse ratio of their CPU per request, server + client, which moves less with the load.
          const PhaseResult& k = it->second;
          if (k.server_cpu_us > 0 && k.client_cpu_us > 0 && h->second.server_cpu_us > 0 && h->second.client_cpu_us > 0) {
            const double hc = h->second.server_cpu_us + h->second.client_cpu_us, kc = k.server_cpu_us + k.client_cpu_us;
            std::printf("; CPU per request (server + client) %.1f vs %.1f us = %.0f%%", hc, kc, 100 * hc / kc);
          }
          std::printf("\n");
        }
      }
    }
  }
  if (failed) std::fprintf(stderr, "some RPC kind completed no requests or had errors\n");
  return failed ? 1 : 0;
}
