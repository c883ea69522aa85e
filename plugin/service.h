// File: plugin/service.h
//
// `stepcast serve`: the stepcast.v1.StepcastService gRPC server for launchers.
//   * Predict / Preflight run the model on the job (INVALID_ARGUMENT naming the field path for a
//     malformed spec; NOT_FOUND for an unknown profile). Not fitting in memory is a FAIL verdict.
//   * ReportRun / PutProfile write to the run store (plugin/store.h: SQLite, or PostgreSQL shared
//     by several replicas) before replying and need
//     "authorization: Bearer <token>" when a token file is set (UNAUTHENTICATED otherwise). With
//     TLS, clients send it as gRPC access-token call credentials; on plaintext loopback as
//     metadata; the handler checks it either way.
//   * Health checking (grpc.health.v1) and reflection (v1alpha) are on; message sizes are capped;
//     expired deadlines and cancelled calls are answered without doing the work.
//   * One log line per RPC: time, method, status, latency, peer.
//   * Shutdown(): health goes NOT_SERVING, in-flight RPCs get the grace period, then it stops.
//   * Store writes run on writer threads (one for SQLite; the pool's size less one for
//     PostgreSQL), never on gRPC's handler threads: Preflight answers
//     before its prediction is stored (and answers when storing fails); ReportRun and PutProfile
//     answer from the writer thread once the write is on disk.
#ifndef STEPCAST_PLUGIN_SERVICE_H_
#define STEPCAST_PLUGIN_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <thread>
#include <vector>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "proto/catalog.h"

namespace grpc {
class Server;
class ServerCredentials;
}

namespace stepcast {

struct ServeOptions {
  std::string listen_address = "127.0.0.1:50051";  // port 0 picks a free port
  std::string profiles_dir;                        // *.yaml|json|textproto profiles, by file stem
  // The run store (plugin/store.h): a SQLite file (PATH or sqlite:PATH), or postgresql://... for
  // several replicas on one store (`--store`, alias `--db`).
  std::string db_path = "stepcast.db";
  // PostgreSQL: the store's connection pool size; that many writes less one run at once.
  int store_connections = 4;
  std::string tls_cert_file, tls_key_file;         // both or neither
  // Admin token: PutProfile (and ReportRun) need it when set.
  std::string token_file;
  // Report token: enough for ReportRun only. This is the token that sits in every training job's
  // environment for the probe (docs/PROBE.md), so it must not allow profile writes (review M3).
  std::string report_token_file;
  // Reads (GetRun, ListRuns, GetProfile, ListProfiles) need one of the tokens too.
  bool protect_reads = false;
  int max_message_bytes = 4 << 20;
  std::FILE* log = stderr;                         // nullptr: no RPC log

  // Bounds (docs/RELIABILITY.md, reliability review H1/H4). A job, in its wire encoding, above
  // max_job_bytes is refused (the largest example is under 2 KB); labels are capped in number
  // and size. Predictions are kept prediction_ttl_s and at most max_stored_predictions rows; a
  // peer's Preflight results are stored at most preflight_store_per_s per second (burst
  // preflight_store_burst) — beyond that it still gets its verdict, without a prediction_id.
  int64_t max_job_bytes = 256 << 10;
  int max_labels = 64;
  int max_label_bytes = 1024;
  int64_t prediction_ttl_s = 30 * 86400;
  int64_t max_stored_predictions = 1000000;
  double preflight_store_per_s = 20;
  double preflight_store_burst = 200;
  // Connections: a TCP connection that has not completed its HTTP/2 (or TLS) handshake within
  // handshake_timeout_ms is closed; one idle for max_connection_idle_ms is closed.
  int handshake_timeout_ms = 5000;
  int max_connection_idle_ms = 300000;
  // Listener watchdog (gRPC 1.51 does not re-arm its listener after accept4 fails with EMFILE,
  // grpc/grpc#31080): every watchdog_period_ms it pokes the listening socket and checks that its
  // accept queue drains. A queue that does not drain for 3 checks running is a dead listener only
  // when accept could have failed: the process was seen at its descriptor limit (or the poke's
  // socket() failed with EMFILE/ENFILE), or no handler was busy during the checks. Busy handlers
  // alone are not death (review 2, N2). The rebuild starts a new server on the same port first
  // (SO_REUSEPORT), then shuts the old one down on a thread of its own, its calls given
  // rebuild_grace_ms to finish. 0: off.
  int watchdog_period_ms = 1000;
  int rebuild_grace_ms = 30000;
  // Expensive calls (review 2, N2): Search and Preflight's layout suggestion run on
  // search_workers threads of their own at the lowest priority (0: max(2, cores / 2)); a Search
  // uses at most search_workers - 1 of them, one is kept for suggestions. At most
  // max_waiting_searches Search calls wait, max_searches_per_peer per peer host (running or
  // waiting); beyond that Search answers RESOURCE_EXHAUSTED with a retry-after (seconds, in the
  // message and the `retry-after` trailing metadata). A Preflight whose suggestion finds no free
  // slot in time is answered without one.
  int search_workers = 0;
  int max_waiting_searches = 4;
  int max_searches_per_peer = 2;
  // Replies: a job's name above max_job_name_bytes is refused (the name was repeated in every
  // candidate of a Search reply: 261 KB x top_n 1000 built a 264 MB reply, review 2 N3); a Search
  // reply is fitted under 3/4 of max_message_bytes before it is built.
  int max_job_name_bytes = 1024;
  // Store bounds (review 2, N7): a Preflight from a caller without a valid token stores at most
  // max_unauthenticated_stored_bytes (its job and prediction, wire encoding; larger: nothing is
  // stored and the verdict has no prediction_id); stored predictions are pruned to
  // max_stored_prediction_bytes as well as max_stored_predictions rows.
  int64_t max_unauthenticated_stored_bytes = 16 << 10;
  int64_t max_stored_prediction_bytes = int64_t{1} << 30;
  // On SIGTERM: health NOT_SERVING, calls keep being served for lame_duck_ms (so that those
  // already queued are answered, not cancelled); then for refuse_ms new calls are answered
  // UNAVAILABLE ("shutting down; retry"), so that the calls queued at the final shutdown are few
  // (review 2, N16); running searches stop with the best found so far; then in-flight calls get
  // the rest of the grace.
  int lame_duck_ms = 1000;
  int refuse_ms = 250;
  // Store writes waiting for the writer threads (ReportRun, PutProfile, Preflight's prediction);
  // beyond it ReportRun and PutProfile answer UNAVAILABLE ("the store's write queue is full;
  // retry") and Preflight answers without a prediction_id. A malformed request is still
  // INVALID_ARGUMENT: requests are checked before they are queued.
  int max_queued_writes = 4096;
};

class ServiceImpl;
class GrpcFrontend;

class StepcastServer {
 public:
  // Opens the store, loads the profiles directory and starts listening. Errors name the flag.
  static absl::StatusOr<std::unique_ptr<StepcastServer>> Start(const ServeOptions& options, Catalog catalog);
  ~StepcastServer();

  int port() const { return port_; }
  const std::string& address() const { return address_; }
  // Health goes NOT_SERVING, new calls are refused, in-flight ones get `grace`. Safe to call
  // from another thread (a signal watcher) while Wait() blocks; idempotent.
  void Shutdown(std::chrono::milliseconds grace);
  // Blocks until the server has shut down.
  void Wait();
  // How many times the watchdog rebuilt the listener.
  int listener_restarts() const { return restarts_.load(); }
  // How many times the watchdog found the accept queue not draining while handlers were busy
  // and no descriptor shortage was seen (not rebuilt).
  int listener_busy_checks() const { return busy_checks_.load(); }

 private:
  StepcastServer() = default;
  // Builds and starts a gRPC server on `address` (the chosen port after the first start).
  absl::Status StartGrpc(const std::string& address);
  void WatchdogLoop();

  ServeOptions options_;
  std::shared_ptr<grpc::ServerCredentials> creds_;
  std::shared_ptr<ServiceImpl> service_;
  std::vector<std::unique_ptr<GrpcFrontend>> frontends_;  // one per (re)built server, kept alive
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
  std::once_flag shutdown_once_;
  std::mutex mu_;  // guards server_ against the watchdog; stopping_, stopped_
  std::condition_variable cv_;
  bool stopping_ = false, stopped_ = false;
  std::thread watchdog_;
  std::vector<std::thread> reapers_;  // old servers shutting down after a rebuild
  std::atomic<int> restarts_{0}, busy_checks_{0};
};

}  // namespace stepcast

#endif  // STEPCAST_PLUGIN_SERVICE_H_
