// ReportRun writers over one or more `stepcast serve` replicas, as launchers behind a load
// balancer use them: each writer sends its reports round-robin over the replicas, each report
// with its own request id; a report that fails (the replica was killed, the database restarted)
// is retried with the SAME request id on the next replica until it is acknowledged or
// --give-up-s passes. Prints the throughput, the failures seen by code with one message each,
// and writes every acknowledged "request_id run_id" to --ack-log, so that a test can check that
// every acknowledged report is stored, once (tests/replicas_test.sh, bench/replicas_bench.sh).
//
//   build/bin/report_writers --servers 127.0.0.1:P1,127.0.0.1:P2 --writers 8 --reports 2000 \
//       --job examples/llama3-70b-h100.yaml [--token T] [--ack-log FILE] [--seconds S]
// --reports N: N reports in all (split over the writers); --seconds S instead: as many as fit.
// Exit 0 when every report was acknowledged (or, with --seconds, none gave up), else 1.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "plugin/client.h"
#include "proto/codec.h"

namespace {

using Clock = std::chrono::steady_clock;
// --seconds' end: now plus a duration in (fractional) seconds.
using StopTime = std::chrono::time_point<Clock, std::chrono::duration<double>>;

// The command line (see the top of this file).
struct Options {
  std::string servers, job_path, token, ack_log;
  int writers = 8, reports = 0, deadline_ms = 3000;
  double seconds = 0, give_up_s = 120;
};

// What the writers share: the counts, the failures by gRPC code, the acknowledgement log.
struct Tally {
  std::atomic<long> acked{0}, attempts{0}, gave_up{0};
  std::mutex mu;
  std::map<std::string, std::pair<long, std::string>> failures;  // code -> (count, first message)
  std::ofstream log;
};

// One report sent until it is acknowledged or `give_up_s` passes: each try on the next replica
// (round-robin from `*next`), with the same request id, 50 ms apart; each failure counted by its
// gRPC code; an acknowledged report's "request_id run_id" written to the acknowledgement log.
void SendUntilAcknowledged(std::vector<stepcast::Client>& clients, size_t* next,
                           const stepcast::v1::ReportRunRequest& req, double give_up_s, Tally* tally) {
  const auto give_up = Clock::now() + std::chrono::duration<double>(give_up_s);
  for (;;) {
    stepcast::Client& c = clients[(*next)++ % clients.size()];
    stepcast::v1::ReportRunResponse resp;
    auto ctx = c.Context();
    ++tally->attempts;
    const grpc::Status st = c.stub().ReportRun(ctx.get(), req, &resp);
    if (st.ok()) {
      ++tally->acked;
      if (tally->log.is_open()) {
        std::lock_guard<std::mutex> l(tally->mu);
        tally->log << req.request_id() << " " << resp.run().run_id() << "\n";
      }
      break;
    }
    {
      std::lock_guard<std::mutex> l(tally->mu);
      auto& f = tally->failures[absl::StrCat(st.error_code())];
      if (f.first++ == 0) f.second = st.error_message();
    }
    if (Clock::now() > give_up) {
      ++tally->gave_up;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Writer `w`: a client per replica, then its share of --reports (or reports until `stop`), each
// with its own request id "w<tag>-<w>-<i>", starting on replica w.
void RunWriter(int w, const Options& o, const std::vector<std::string>& addresses, const stepcast::v1::JobSpec& job,
               const std::string& tag, StopTime stop, Tally* tally) {
  std::vector<stepcast::Client> clients;
  for (const std::string& a : addresses) {
    stepcast::ClientOptions co;
    co.address = a;
    co.token = o.token;
    co.deadline_ms = o.deadline_ms;
    absl::StatusOr<stepcast::Client> c = stepcast::Client::Connect(co);
    if (!c.ok()) {
      std::fprintf(stderr, "%s: %s\n", a.c_str(), std::string(c.status().message()).c_str());
      return;
    }
    clients.push_back(*std::move(c));
  }
  const int mine = o.reports > 0 ? o.reports / o.writers + (w < o.reports % o.writers ? 1 : 0) : 0;
  size_t next = static_cast<size_t>(w);
  for (int i = 0; o.reports > 0 ? i < mine : Clock::now() < stop; ++i) {
    stepcast::v1::ReportRunRequest req;
    *req.mutable_job() = job;
    req.set_measured_step_time_s(10 + i % 7);
    req.set_request_id(absl::StrCat("w", tag, "-", w, "-", i));
    (*req.mutable_labels())["writer"] = absl::StrCat(w);
    SendUntilAcknowledged(clients, &next, req, o.give_up_s, tally);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ReportRun writers over stepcast serve replicas"};
  Options o;
  app.add_option("--servers", o.servers, "comma-separated replica addresses")->required();
  app.add_option("--writers", o.writers)->capture_default_str();
  app.add_option("--reports", o.reports, "reports in all (0: use --seconds)")->capture_default_str();
  app.add_option("--seconds", o.seconds, "write for this long instead of --reports")->capture_default_str();
  app.add_option("--job", o.job_path)->required();
  app.add_option("--token", o.token, "bearer token for ReportRun");
  app.add_option("--ack-log", o.ack_log, "file: one 'request_id run_id' line per acknowledged report");
  app.add_option("--deadline-ms", o.deadline_ms, "per-call deadline")->capture_default_str();
  app.add_option("--give-up-s", o.give_up_s, "retry one report for at most this long")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if ((o.reports > 0) == (o.seconds > 0)) {
    std::fprintf(stderr, "give --reports or --seconds\n");
    return 2;
  }
  const std::vector<std::string> addresses = absl::StrSplit(o.servers, ',', absl::SkipEmpty());
  stepcast::v1::JobSpec job;
  if (absl::Status s = stepcast::ParseMessageFile(o.job_path, &job); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  const auto start = Clock::now();
  const auto stop = start + std::chrono::duration<double>(o.seconds);
  Tally tally;
  if (!o.ack_log.empty()) tally.log.open(o.ack_log);
  const std::string tag = stepcast::NewRequestId().substr(0, 8);
  std::vector<std::thread> pool;
  for (int w = 0; w < o.writers; ++w) {
    pool.emplace_back([&, w] { RunWriter(w, o, addresses, job, tag, stop, &tally); });
  }
  for (auto& t : pool) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("%ld reports acknowledged in %.1f s: %.0f reports/s, %d writers over %zu replicas, %ld calls, "
              "%ld gave up\n",
              tally.acked.load(), elapsed, tally.acked.load() / elapsed, o.writers, addresses.size(),
              tally.attempts.load(), tally.gave_up.load());
  for (const auto& [code, f] : tally.failures) {
    std::printf("failed calls, gRPC code %s: %ld (first: %s)\n", code.c_str(), f.first, f.second.c_str());
  }
  return tally.gave_up.load() == 0 && (o.reports == 0 || tally.acked.load() == o.reports) ? 0 : 1;
}
