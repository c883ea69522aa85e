// File: plugin/service.h
//
// `stepcast serve`: the stepcast.v1.StepcastService gRPC server for launchers.
//   * Predict / Preflight run the model on the job (INVALID_ARGUMENT naming the field path for a
//     malformed spec; NOT_FOUND for an unknown profile). Not fitting in memory is a FAIL verdict.
//   * ReportRun / PutProfile write to the SQLite store (plugin/store.h) before replying and need
//     "authorization: Bearer <token>" when a token file is set (UNAUTHENTICATED otherwise). With
//     TLS, clients send it as gRPC access-token call credentials; on plaintext loopback as
//     metadata; the handler checks it either way.
//   * Health checking (grpc.health.v1) and reflection (v1alpha) are on; message sizes are capped;
//     expired deadlines and cancelled calls are answered without doing the work.
//   * One log line per RPC: time, method, status, latency, peer.
//   * Shutdown(): health goes NOT_SERVING, in-flight RPCs get the grace period, then it stops.
#ifndef STEPCAST_PLUGIN_SERVICE_H_
#define STEPCAST_PLUGIN_SERVICE_H_

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "proto/catalog.h"

namespace grpc {
class Server;
}

namespace stepcast {

struct ServeOptions {
  std::string listen_address = "127.0.0.1:50051";  // port 0 picks a free port
  std::string profiles_dir;                        // *.yaml|json|textproto profiles, by file stem
  std::string db_path = "stepcast.db";
  std::string tls_cert_file, tls_key_file;         // both or neither
  std::string token_file;                          // bearer token for write RPCs
  int max_message_bytes = 4 << 20;
  std::FILE* log = stderr;                         // nullptr: no RPC log
};

class ServiceImpl;

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

 private:
  StepcastServer() = default;
  std::unique_ptr<ServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
  std::once_flag shutdown_once_;
};

}  // namespace stepcast

#endif  // STEPCAST_PLUGIN_SERVICE_H_
