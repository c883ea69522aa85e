#include "plugin/client.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace stepcast {

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--token-file: cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t(absl::StripAsciiWhitespace(ss.str()));
  if (t.empty()) return absl::InvalidArgumentError(absl::StrCat("--token-file: ", path, " is empty"));
  return t;
}

absl::StatusOr<Client> Client::Connect(const ClientOptions& o) {
  if (o.address.empty()) return absl::InvalidArgumentError("--server: required");
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (!o.tls_ca_file.empty()) {
    std::ifstream in(o.tls_ca_file);
    if (!in) return absl::NotFoundError(absl::StrCat("--tls-ca: cannot read ", o.tls_ca_file));
    std::stringstream ss;
    ss << in.rdbuf();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ss.str();
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

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace stepcast
