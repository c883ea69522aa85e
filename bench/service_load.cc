// Load generator for `stepcast serve`: N client threads (each with its own channel) issue
// Predict calls for a fixed time after a warm-up; prints throughput, p50/p90/p99/max latency
// and errors. Run through bench/service_load.sh, which starts the server beside it.
//
//   build/bin/service_load --server 127.0.0.1:PORT --threads 8 --seconds 10 --job examples/llama3-70b-h100.yaml
//   ... --writers 8 [--token T]   beside them, 8 threads issuing ReportRun (store writes) as fast as
//                                 they can (docs/RELIABILITY.md: Predict beside 8 writers)
//   ... --searchers 4             beside them, 4 threads each keeping one maximal Search in flight
//                                 (the job over 8..32768 GPUs, every schedule, overlap off, ETP;
//                                 refused ones retried after 100 ms): Predict beside 4 searches
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "plugin/client.h"
#include "proto/codec.h"

int main(int argc, char** argv) {
  CLI::App app{"Predict load against a live stepcast serve"};
  std::string server = "127.0.0.1:50051", job_path;
  int threads = 8;
  double seconds = 10, warmup = 2;
  app.add_option("--server", server)->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--seconds", seconds)->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--job", job_path)->required();
  int writers = 0;
  std::string token;
  app.add_option("--writers", writers, "threads issuing ReportRun beside the Predict load")->capture_default_str();
  app.add_option("--token", token, "bearer token for ReportRun");
  int searchers = 0;
  app.add_option("--searchers", searchers, "threads keeping a maximal Search in flight beside the Predict load")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  stepcast::v1::PredictRequest req;
  if (absl::Status s = stepcast::ParseMessageFile(job_path, req.mutable_job()); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto measure_from = start + std::chrono::duration<double>(warmup);
  const auto stop = measure_from + std::chrono::duration<double>(seconds);
  std::vector<std::vector<double>> latencies(threads);
  std::atomic<long> errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      stepcast::ClientOptions o;
      o.address = server;
      auto client = stepcast::Client::Connect(o);
      if (!client.ok()) {
        ++errors;
        return;
      }
      latencies[t].reserve(200000);
      while (true) {
        const auto t0 = Clock::now();
        if (t0 >= stop) break;
        stepcast::v1::PredictResponse resp;
        auto ctx = client->Context();
        const grpc::Status st = client->stub().Predict(ctx.get(), req, &resp);
        const auto t1 = Clock::now();
        if (t0 < measure_from) continue;
        if (!st.ok() || resp.prediction().step_time_s() <= 0) ++errors;
        latencies[t].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    });
  }
  std::atomic<long> writes{0}, write_errors{0};
  for (int w = 0; w < writers; ++w) {
    pool.emplace_back([&] {
      stepcast::ClientOptions o;
      o.address = server;
      o.token = token;
      auto client = stepcast::Client::Connect(o);
      if (!client.ok()) return;
      // Reports name a stored prediction (as the probe's do), so that a write costs the store,
      // not another prediction on the server's CPU.
      stepcast::v1::ReportRunRequest rr;
      {
        stepcast::v1::PreflightRequest pr;
        *pr.mutable_job() = req.job();
        stepcast::v1::PreflightResponse presp;
        auto ctx = client->Context();
        if (client->stub().Preflight(ctx.get(), pr, &presp).ok() && !presp.prediction_id().empty()) {
          rr.set_prediction_id(presp.prediction_id());
        } else {
          *rr.mutable_job() = req.job();
        }
      }
      rr.set_measured_step_time_s(10);
      while (Clock::now() < stop) {
        stepcast::v1::ReportRunResponse resp;
        auto ctx = client->Context();
        const bool measuring = Clock::now() >= measure_from;
        const grpc::Status st = client->stub().ReportRun(ctx.get(), rr, &resp);
        if (measuring) ++(st.ok() ? writes : write_errors);
      }
    });
  }
  std::atomic<long> searches_ok{0}, searches_refused{0}, search_errors{0};
  for (int s = 0; s < searchers; ++s) {
    pool.emplace_back([&] {
      stepcast::ClientOptions o;
      o.address = server;
      o.deadline_ms = 120000;
      auto client = stepcast::Client::Connect(o);
      if (!client.ok()) return;
      stepcast::v1::SearchRequest sr;
      *sr.mutable_job() = req.job();
      stepcast::v1::SearchSpaceSpec* sp = sr.mutable_options()->mutable_space();
      sp->set_min_gpus(8);
      sp->set_max_gpus(32768);
      sp->set_all_schedules(true);
      sp->set_overlap_off(true);
      sp->set_search_etp(true);
      while (Clock::now() < stop) {
        // The rest of the run (the service caps a search at 60 s).
        sr.mutable_options()->set_time_limit_s(std::max(0.5, std::chrono::duration<double>(stop - Clock::now()).count()));
        stepcast::v1::SearchResponse resp;
        auto ctx = client->Context();
        const grpc::Status st = client->stub().Search(ctx.get(), sr, &resp);
        if (st.ok()) {
          ++searches_ok;
        } else if (st.error_code() == grpc::RESOURCE_EXHAUSTED) {
          ++searches_refused;
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        } else {
          ++search_errors;
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  if (searchers > 0) {
    std::printf("beside %d searchers: %ld searches answered, %ld refused (RESOURCE_EXHAUSTED), %ld other errors\n",
                searchers, searches_ok.load(), searches_refused.load(), search_errors.load());
  }
  if (writers > 0) {
    std::printf("beside %d ReportRun writers: %.0f writes/s, write errors %ld\n", writers, writes.load() / seconds,
                write_errors.load());
  }
  std::vector<double> all;
  for (auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  if (all.empty()) {
    std::fprintf(stderr, "no requests completed\n");
    return 1;
  }
  std::sort(all.begin(), all.end());
  auto pct = [&](double q) { return all[std::min(all.size() - 1, static_cast<size_t>(q * all.size()))]; };
  std::printf("requests %zu in %.1f s: %.0f req/s, %d client threads, errors %ld\n", all.size(), seconds,
              all.size() / seconds, threads, errors.load());
  std::printf("latency us: p50 %.0f  p90 %.0f  p99 %.0f  max %.0f\n", pct(0.50), pct(0.90), pct(0.99), all.back());
  return errors.load() == 0 ? 0 : 1;
}
