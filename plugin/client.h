// File: plugin/client.h
//
// Client side of the service: channel set-up (plaintext or TLS, bearer token) and deadlines,
// shared by the stepcast CLI (preflight, report, runs, profile) and the tests.
#ifndef STEPCAST_PLUGIN_CLIENT_H_
#define STEPCAST_PLUGIN_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "stepcast/v1/service.grpc.pb.h"

namespace stepcast {

struct ClientOptions {
  std::string address = "127.0.0.1:50051";
  std::string tls_ca_file;  // set: TLS with these roots; the token goes as access-token credentials
  std::string token;        // bearer token for ReportRun / PutProfile
  int deadline_ms = 10000;
};

// Reads the token from a file (trimmed); NotFound / InvalidArgument naming the flag.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

class Client {
 public:
  static absl::StatusOr<Client> Connect(const ClientOptions& options);

  // A context with the deadline and, on plaintext, the authorization metadata.
  std::unique_ptr<grpc::ClientContext> Context() const;
  v1::StepcastService::Stub& stub() const { return *stub_; }

 private:
  ClientOptions options_;
  std::shared_ptr<v1::StepcastService::Stub> stub_;
};

// A random idempotency key for ReportRunRequest.request_id (128 bits from std::random_device,
// hex).
std::string NewRequestId();

// ReportRun with an idempotency key (set when the request has none) and up to `attempts`
// tries, retrying UNAVAILABLE and DEADLINE_EXCEEDED after 0.2 s, 0.4 s, ...: a retry after a
// lost acknowledgement returns the stored run instead of storing it twice (review L1).
grpc::Status ReportRunWithRetry(const Client& client, v1::ReportRunRequest& request, v1::ReportRunResponse* response,
                                int attempts = 3);

// grpc::Status -> absl::Status with the same code and DescribeGrpcError's message.
absl::Status FromGrpc(const grpc::Status& s);

// A gRPC error's message as a user should read it. gRPC's own answers carry no hint of the cause:
// a request the server could not parse comes back UNIMPLEMENTED with no message from gRPC 1.51's
// callback API (reliability review L4), a request over the 4 MiB limit as "Received message larger
// than max (N vs. 4194304)" (L3); those get one. Other messages are returned as they are.
std::string DescribeGrpcError(const grpc::Status& s);

}  // namespace stepcast

#endif  // STEPCAST_PLUGIN_CLIENT_H_
