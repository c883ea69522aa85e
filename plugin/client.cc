#include "plugin/client.h"

#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/codec.h"

namespace stepcast {

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadInputFile(path, 1 << 20);
  if (!text.ok()) return absl::Status(text.status().code(), absl::StrCat("--token-file: ", text.status().message()));
  std::string t(absl::StripAsciiWhitespace(*text));
  if (t.empty()) return absl::InvalidArgumentError(absl::StrCat("--token-file: ", path, " is empty"));
  return t;
}

absl::StatusOr<Client> Client::Connect(const ClientOptions& o) {
  if (o.address.empty()) return absl::InvalidArgumentError("--server: required");
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (!o.tls_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadInputFile(o.tls_ca_file, 1 << 20);
    if (!ca.ok()) return absl::Status(ca.status().code(), absl::StrCat("--tls-ca: ", ca.status().message()));
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = *ca;
    creds = grpc::SslCredentials(ssl);
    if (!o.token.empty()) {
      creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(o.token));
    }
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(4 << 20);
  Client c;
  c.options_ = o;
  c.stub_ = v1::StepcastService::NewStub(grpc::CreateCustomChannel(o.address, creds, args));
  return c;
}

std::unique_ptr<grpc::ClientContext> Client::Context() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options_.deadline_ms));
  if (options_.tls_ca_file.empty() && !options_.token.empty()) {
    ctx->AddMetadata("authorization", "Bearer " + options_.token);
  }
  return ctx;
}

std::string NewRequestId() {
  std::random_device rd;
  const uint64_t hi = (static_cast<uint64_t>(rd()) << 32) ^ rd(), lo = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return absl::StrFormat("req-%016x%016x", hi, lo);
}

grpc::Status ReportRunWithRetry(const Client& client, v1::ReportRunRequest& request, v1::ReportRunResponse* response,
                                int attempts) {
  if (request.request_id().empty()) request.set_request_id(NewRequestId());
  grpc::Status st;
  for (int i = 0; i < attempts; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200 << (i - 1)));
    auto ctx = client.Context();
    st = client.stub().ReportRun(ctx.get(), request, response);
    if (st.error_code() != grpc::UNAVAILABLE && st.error_code() != grpc::DEADLINE_EXCEEDED) break;
  }
  return st;
}

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), DescribeGrpcError(s));
}

std::string DescribeGrpcError(const grpc::Status& s) {
  if (s.error_code() == grpc::UNIMPLEMENTED && s.error_message().empty()) {
    return "UNIMPLEMENTED with no message: the server does not have this method, or could not parse the "
           "request (a malformed message, or a client and server built from different protos)";
  }
  if (s.error_code() == grpc::RESOURCE_EXHAUSTED && absl::StrContains(s.error_message(), "larger than max")) {
    return absl::StrCat(s.error_message(), ": the request or reply is over gRPC's message limit (4 MiB by default); "
                        "a job with a large inlined hf_config, or a run with a very large measured breakdown?");
  }
  return s.error_message();
}

}  // namespace stepcast
