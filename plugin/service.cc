#include "plugin/service.h"

#include "proto/measured_run.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <deque>
#include <functional>
#include <optional>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <queue>
#include <random>
#include <set>
#include <sstream>

#include "absl/synchronization/mutex.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "plugin/compare.h"
#include "plugin/policy.h"
#include "plugin/store.h"
#include "proto/codec.h"
#include "proto/search_codec.h"
#include "stepcast/v1/service.grpc.pb.h"

namespace stepcast {

using google::protobuf::util::TimeUtil;

namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// Within google.protobuf.Timestamp's documented range (0001-01-01 to 9999-12-31), where
// TimeUtil's conversions cannot overflow.
bool ValidTimestamp(const google::protobuf::Timestamp& t) {
  return t.seconds() >= TimeUtil::kTimestampMinSeconds && t.seconds() <= TimeUtil::kTimestampMaxSeconds &&
         t.nanos() >= 0 && t.nanos() <= 999999999;
}

absl::Status Prefixed(const absl::Status& s, absl::string_view prefix) {
  if (s.ok() || s.code() != absl::StatusCode::kInvalidArgument) return s;
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

std::string RandomId(absl::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   static_cast<uint64_t>(absl::GetCurrentTimeNanos())};
  return absl::StrFormat("%s%016x", prefix, rng());
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* flag) {
  absl::StatusOr<std::string> text = ReadInputFile(path, 1 << 20);
  if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", text.status().message()));
  return text;
}

using Clock = std::chrono::steady_clock;

// Lowers the calling thread's scheduling priority by `delta` nice steps (to at most 19). On
// Linux nice is a per-thread attribute (setpriority(PRIO_PROCESS, tid), sched(7) "The nice
// value"), and threads created afterwards inherit it, so a search's own worker threads run at
// the same priority. Raising nice needs no privilege. Best effort: errors are ignored.
void LowerThreadPriority(int delta) {
  const id_t tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int now = ::getpriority(PRIO_PROCESS, tid);
  if (errno != 0) return;
  (void)::setpriority(PRIO_PROCESS, tid, std::min(19, now + delta));
}

// The host of a gRPC peer ("ipv4:10.0.0.1:5123" -> "ipv4:10.0.0.1"; "ipv6:[::1]:5123" -> "ipv6:[::1]").
std::string PeerHost(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

// Admission of the CPU-heavy calls, Search and Preflight's layout suggestion (reliability review
// 2, N2): they run on `workers` threads of their own at the lowest priority (nice + 19), never on
// gRPC's handler threads, so Predict, Preflight's verdict and the store's callers always find a
// handler thread and win the CPU from a search. A Search runs on at most workers - 1 of them (one
// is kept for suggestions, which go first); at most `max_waiting` Search calls wait, and one peer
// host has at most `per_peer` running or waiting; beyond these PostSearch refuses (the caller
// answers RESOURCE_EXHAUSTED with a retry-after). A task gets run = false, instead of running,
// when the pool is stopping or its deadline passed while it waited.
class SearchPool {
 public:
  // A task's work returns the call's status; `done` answers the call with it once the slot is
  // released (so that the caller's next call finds it free).
  using Fn = std::function<absl::Status(bool run)>;
  using Done = std::function<void(absl::Status)>;
  enum class Admit { kQueued, kFull, kPeerBusy, kWouldExpire, kStopping };

  SearchPool(int workers, int max_waiting, int per_peer)
      : workers_(std::max(2, workers)), max_waiting_(max_waiting), per_peer_(per_peer) {
    for (int i = 0; i < workers_; ++i) {
      threads_.emplace_back([this] {
        LowerThreadPriority(19);
        Loop();
      });
    }
  }
  ~SearchPool() {
    BeginShutdown();
    Join();
  }
  int workers() const { return workers_; }

  // `deadline`: the call's; `max_run`: how long the search runs at most once started (its time
  // limit; Clock::duration::max() for none).
  Admit PostSearch(const std::string& host, Clock::time_point deadline, Clock::duration max_run, Fn fn, Done done) {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_) return Admit::kStopping;
    if (static_cast<int>(searches_.size()) >= max_waiting_) return Admit::kFull;
    int& mine = per_host_[host];
    if (mine >= per_peer_) {
      if (mine == 0) per_host_.erase(host);
      return Admit::kPeerBusy;
    }
    // When would a slot be free for it? Each running search holds its slot until its deadline at
    // the latest, and so does each one waiting ahead once it starts. A call that would have to
    // wait and then not start a second (or half its time) before its own deadline is refused now
    // rather than after waiting for nothing.
    const Clock::time_point now = Clock::now();
    const Clock::time_point start = StartEstimateLocked();
    const Clock::duration least_run =
        std::min<Clock::duration>(std::chrono::seconds(1), (deadline - now) / 2);  // to find anything
    if (start > now && start + least_run > deadline) {
      if (mine == 0) per_host_.erase(host);
      return Admit::kWouldExpire;
    }
    ++mine;
    searches_.push_back({std::move(fn), std::move(done), deadline, host, max_run});
    cv_.notify_one();
    return Admit::kQueued;
  }
  bool PostSuggestion(Clock::time_point deadline, Fn fn, Done done) {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_ || static_cast<int>(suggestions_.size()) >= 4 * workers_) return false;
    suggestions_.push_back({std::move(fn), std::move(done), deadline, "", Clock::duration::max()});
    cv_.notify_one();
    return true;
  }
  // Seconds until a Search slot is likely free for a new call (the latest that the running and
  // waiting ones can hold their slots; at least 1).
  int64_t RetryAfterS() {
    std::lock_guard<std::mutex> l(mu_);
    const double s = std::chrono::duration<double>(StartEstimateLocked() - Clock::now()).count();
    return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(s)), 1, 3600);
  }
  // Running searches see stopping() and stop (their callers answer with the best found so
  // far); waiting tasks run with run = false; nothing new is admitted.
  void BeginShutdown() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
      stopping_flag_ = true;
    }
    cv_.notify_all();
  }
  bool stopping() const { return stopping_flag_.load(); }
  void Join() {
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  struct Task {
    Fn fn;
    Done done;
    Clock::time_point deadline;
    std::string host;  // Search tasks only
    Clock::duration max_run = Clock::duration::max();
    Clock::time_point EndIfStartedAt(Clock::time_point start) const {
      return max_run >= deadline - start ? deadline : start + max_run;
    }
  };
  // The latest time a new Search would start: slots free at the running searches' deadlines;
  // each waiting search takes the first free slot and holds it to its own deadline.
  Clock::time_point StartEstimateLocked() const {
    const int slots = std::max(1, workers_ - 1);
    std::priority_queue<Clock::time_point, std::vector<Clock::time_point>, std::greater<>> free_at;
    for (const auto& d : running_search_deadlines_) free_at.push(d);
    const Clock::time_point now = Clock::now();
    while (static_cast<int>(free_at.size()) < slots) free_at.push(now);
    for (const Task& t : searches_) {
      const Clock::time_point start = std::max(now, free_at.top());
      free_at.pop();
      free_at.push(std::max(start, t.EndIfStartedAt(start)));
    }
    return std::max(now, free_at.top());
  }
  void Loop() {
    for (;;) {
      Task t;
      bool is_search = false;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] {
          return stopping_ || !suggestions_.empty() || (!searches_.empty() && running_searches_ < workers_ - 1);
        });
        if (!suggestions_.empty()) {
          t = std::move(suggestions_.front());
          suggestions_.pop_front();
        } else if (!searches_.empty() && (stopping_ || running_searches_ < workers_ - 1)) {
          t = std::move(searches_.front());
          searches_.pop_front();
          is_search = true;
          ++running_searches_;
          t.deadline = t.EndIfStartedAt(Clock::now());  // the call's, or sooner by its time limit
          running_search_deadlines_.insert(t.deadline);
        } else {
          return;  // stopping, nothing left
        }
      }
      const bool run = !stopping_flag_.load() && Clock::now() < t.deadline;
      absl::Status status = t.fn(run);
      if (is_search) {
        std::lock_guard<std::mutex> l(mu_);
        --running_searches_;
        running_search_deadlines_.erase(running_search_deadlines_.find(t.deadline));
        if (--per_host_[t.host] <= 0) per_host_.erase(t.host);
        cv_.notify_all();
      }
      t.done(std::move(status));
    }
  }

  const int workers_, max_waiting_, per_peer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> suggestions_, searches_;
  std::map<std::string, int> per_host_;  // running or waiting Search calls per peer host
  std::multiset<Clock::time_point> running_search_deadlines_;  // when each running search ends at the latest
  int running_searches_ = 0;
  bool stopping_ = false;
  std::atomic<bool> stopping_flag_{false};
  std::vector<std::thread> threads_;
};

// One thread that runs the store writes in order, so that gRPC's handler threads never wait on
// SQLite (reliability review M1). Post() refuses (false) when max_queue tasks are waiting. It runs
// at a lower priority (nice + 10): writes are not on a launch's path, so under load Predict and
// Preflight win the CPU and the writes slow down (review 2, N2: Predict beside 8 writers).
class Writer {
 public:
  // `threads` run the queue (a store that takes concurrent writes: PostgreSQL's pool).
  explicit Writer(size_t max_queue, int threads = 1) : max_queue_(max_queue) {
    for (int i = 0; i < std::max(1, threads); ++i) {
      threads_.emplace_back([this] {
        LowerThreadPriority(10);
        Loop();
      });
    }
  }
  ~Writer() { Stop(); }
  bool Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_ || queue_.size() >= max_queue_) return false;
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
    return true;
  }
  // Runs what is queued, then joins. Idempotent.
  void Stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }
  const size_t max_queue_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// A token bucket per peer host (the address without its port): `rate_per_s` with bursts of
// `burst`. Forgets every peer when it tracks more than 10,000 (a scan of many addresses).
class PeerRateLimiter {
 public:
  PeerRateLimiter(double rate_per_s, double burst) : rate_(rate_per_s), burst_(burst) {}
  bool Allow(const std::string& peer) {
    if (rate_ <= 0) return true;
    const std::string host = peer.substr(0, peer.rfind(':'));
    const absl::Time now = absl::Now();
    std::lock_guard<std::mutex> l(mu_);
    if (buckets_.size() > 10000) buckets_.clear();
    auto [it, added] = buckets_.try_emplace(host, Bucket{burst_, now});
    Bucket& b = it->second;
    b.tokens = std::min(burst_, b.tokens + rate_ * absl::ToDoubleSeconds(now - b.last));
    b.last = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

 private:
  struct Bucket {
    double tokens;
    absl::Time last;
  };
  const double rate_, burst_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;
};

// Accept-queue length of the TCP socket listening on `port` (/proc/net/tcp{,6}: for a socket in
// LISTEN state, 0A, the rx_queue column is the number of connections waiting for accept(); see
// proc(5) and tcp_diag). -1 when neither file can be read (at the fd limit).
int64_t ListenBacklog(int port) {
  int64_t total = -1;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(file);
    if (!in) continue;
    if (total < 0) total = 0;
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string sl, local, remote, st, queues;
      if (!(ls >> sl >> local >> remote >> st >> queues)) continue;
      if (st != "0A") continue;
      const size_t colon = local.rfind(':');
      if (colon == std::string::npos || std::stoi(local.substr(colon + 1), nullptr, 16) != port) continue;
      const size_t qc = queues.find(':');
      if (qc == std::string::npos) continue;
      total += std::stoll(queues.substr(qc + 1), nullptr, 16);
    }
  }
  return total;
}

// Opens a non-blocking TCP connection to 127.0.0.1:port (or [::1]) so that a dead listener shows
// a waiting connection even when no client is connecting. -1 on failure (errno kept).
int PokeListener(int port, bool ipv6) {
  const int fd = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int rc;
  if (ipv6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    a.sin6_addr = in6addr_loopback;
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  if (rc != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One log line per RPC.
class RpcLog {
 public:
  RpcLog(std::FILE* out, const char* method, grpc::CallbackServerContext* ctx)
      : out_(out), method_(method), ctx_(ctx), start_(absl::Now()) {}
  // Writes the line (one write(2) on an unbuffered stream such as stderr, so that a line is in the
  // file when the client has its answer, kill -9 included) and returns `st`.
  grpc::Status Done(grpc::Status st) {
    if (out_ != nullptr) {
      const absl::Time now = absl::Now();
      char time[32];
      FormatUtcMillis(now, time);
      std::fprintf(out_, "%s rpc=%s status=%s latency_us=%lld peer=%s%s%s\n", time, method_,
                   StatusName(st.error_code()), static_cast<long long>(absl::ToInt64Microseconds(now - start_)),
                   ctx_->peer().c_str(), st.ok() ? "" : " error=", st.ok() ? "" : st.error_message().c_str());
    }
    return st;
  }

 private:
  // `t` as absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, UTC) writes it ("2026-11-27T16:47:53.123Z",
  // 24 characters and a NUL into `out`), the date and time up to the second formatted once per
  // second per thread (absl::FormatTime was 1.1% of the server's CPU under Predict load).
  static void FormatUtcMillis(absl::Time t, char out[32]) {
    thread_local int64_t cached_s = std::numeric_limits<int64_t>::min();
    thread_local char cached[24] = {};
    const int64_t ms = absl::ToUnixMillis(t);
    const int64_t s = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);  // floor, as FormatTime truncates
    if (s != cached_s) {
      const std::string d = absl::FormatTime("%Y-%m-%dT%H:%M:%S", absl::FromUnixSeconds(s), absl::UTCTimeZone());
      std::snprintf(cached, sizeof cached, "%s", d.c_str());
      cached_s = s;
    }
    std::snprintf(out, 32, "%s.%03dZ", cached, static_cast<int>(ms - s * 1000));
  }
  static const char* StatusName(grpc::StatusCode c) {
    switch (c) {
      case grpc::OK: return "OK";
      case grpc::CANCELLED: return "CANCELLED";
      case grpc::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
      case grpc::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
      case grpc::NOT_FOUND: return "NOT_FOUND";
      case grpc::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
      case grpc::UNAUTHENTICATED: return "UNAUTHENTICATED";
      case grpc::UNAVAILABLE: return "UNAVAILABLE";
      case grpc::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
      case grpc::PERMISSION_DENIED: return "PERMISSION_DENIED";
      case grpc::DATA_LOSS: return "DATA_LOSS";
      default: return "ERROR";
    }
  }
  std::FILE* out_;
  const char* method_;
  grpc::CallbackServerContext* ctx_;
  absl::Time start_;
};

// A steady-clock deadline for work inside an RPC: at most `cap` from now, and ending early enough
// (10% of the time left, at least 50 ms) that the answer reaches the client before its deadline.
std::chrono::steady_clock::time_point WorkDeadline(grpc::CallbackServerContext* ctx, std::chrono::milliseconds cap) {
  const auto now_sys = std::chrono::system_clock::now();
  const auto now = std::chrono::steady_clock::now();
  const auto d = ctx->deadline();
  if (d >= now_sys + cap) return now + cap;
  const auto remaining = std::chrono::duration_cast<std::chrono::steady_clock::duration>(d - now_sys);
  const auto margin = std::max<std::chrono::steady_clock::duration>(std::chrono::milliseconds(50), remaining / 10);
  return now + (remaining - margin);
}

}  // namespace

// The service's state and its handlers, independent of any one grpc::Server (the watchdog may
// rebuild the server; GrpcFrontend below binds a server to this).
class ServiceImpl {
 public:
  enum class Scope { kReport, kAdmin, kRead };

  ServiceImpl(Catalog catalog, std::unique_ptr<RunStore> store, std::map<std::string, RateProfile> dir_profiles,
              std::string admin_token, std::string report_token, const ServeOptions& options)
      : catalog_(std::move(catalog)),
        store_(std::move(store)),
        dir_profiles_(std::move(dir_profiles)),
        admin_token_(std::move(admin_token)),
        report_token_(std::move(report_token)),
        options_(options),
        log_(options.log),
        limiter_(options.preflight_store_per_s, options.preflight_store_burst),
        pool_(std::make_unique<SearchPool>(
            options.search_workers > 0 ? options.search_workers
                                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()) / 2),
            options.max_waiting_searches, options.max_searches_per_peer)),
        writer_(std::make_unique<Writer>(static_cast<size_t>(options.max_queued_writes), store_->max_concurrent_writes())) {
    // A search's own threads: the cores shared among the pool's workers.
    search_threads_ = std::max(1, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) /
                                      std::max(1, pool_->workers() - 1));
    Prune();
  }
  ~ServiceImpl() {
    pool_->BeginShutdown();
    pool_->Join();
    StopWriter();
  }

  std::FILE* log() const { return log_; }
  // Runs the queued writes, then stops the writer thread (after the server has stopped).
  void StopWriter() { writer_->Stop(); }
  // Shutdown, after the lame duck: new calls are answered UNAVAILABLE (retry elsewhere or
  // later), running searches stop with the best found so far, waiting ones are answered.
  void BeginRefusing() {
    refusing_ = true;
    pool_->BeginShutdown();
  }
  // After the server has stopped: the pool's threads have answered everything.
  void JoinPool() { pool_->Join(); }
  // Calls inside a handler's synchronous part right now (the watchdog's "handlers busy").
  int busy_handlers() const { return busy_handlers_.load(); }
  std::atomic<int>& busy_handlers_counter() { return busy_handlers_; }

  // Answers expired or cancelled calls without doing the work.
  template <typename F>
  absl::Status Guard(grpc::CallbackServerContext* ctx, F&& f) {
    if (refusing_.load()) {
      return absl::UnavailableError("the server is shutting down; retry (another replica, or once it is back)");
    }
    if (ctx->IsCancelled()) return absl::CancelledError("cancelled by the client");
    if (ctx->deadline() < std::chrono::system_clock::now()) {
      return absl::DeadlineExceededError("deadline expired before the work started");
    }
    return f();
  }

 private:
  static bool SameToken(const std::string& got, const std::string& token) {
    if (token.empty()) return false;
    const std::string want = "Bearer " + token;
    // Constant-time comparison.
    unsigned diff = got.size() ^ want.size();
    for (size_t i = 0; i < want.size(); ++i) diff |= (i < got.size() ? got[i] : 0) ^ want[i];
    return diff == 0;
  }

 public:
  // kAdmin (PutProfile): the admin token. kReport (ReportRun): the report or the admin token.
  // kRead: either, and only when protect_reads is set. With no token configured, all is open.
  absl::Status CheckToken(grpc::CallbackServerContext* ctx, Scope scope) const {
    if (admin_token_.empty() && report_token_.empty()) return absl::OkStatus();
    if (scope == Scope::kRead && !options_.protect_reads) return absl::OkStatus();
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    if (it == md.end()) return absl::UnauthenticatedError("missing bearer token (authorization metadata)");
    const std::string got(it->second.data(), it->second.size());
    if (SameToken(got, admin_token_)) return absl::OkStatus();
    if (SameToken(got, report_token_)) {
      if (scope == Scope::kAdmin) {
        return absl::PermissionDeniedError("the report token cannot write profiles; use the admin token (--token-file)");
      }
      return absl::OkStatus();
    }
    return absl::UnauthenticatedError("wrong bearer token");
  }

  // A job in a request: at most max_job_bytes in its wire encoding (reliability review H4).
  absl::Status CheckJobSize(const v1::JobSpec& job, absl::string_view field) const {
    const size_t n = job.ByteSizeLong();
    if (static_cast<int64_t>(n) > options_.max_job_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", n, " bytes, above the service's limit of ",
                                                     options_.max_job_bytes, " bytes for a job"));
    }
    // The name is copied into every prediction (review 2, N3).
    if (static_cast<int64_t>(job.name().size()) > options_.max_job_name_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".name: ", job.name().size(),
                                                     " bytes, above the service's limit of ",
                                                     options_.max_job_name_bytes, " bytes for a job's name"));
    }
    return absl::OkStatus();
  }

  // Whether the call carries one of the configured tokens (never true when none is configured).
  bool Authenticated(grpc::CallbackServerContext* ctx) const {
    if (admin_token_.empty() && report_token_.empty()) return false;
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    if (it == md.end()) return false;
    const std::string got(it->second.data(), it->second.size());
    return SameToken(got, admin_token_) || SameToken(got, report_token_);
  }

  // A profile reference's own fields (no lookup): a version needs a name and is >= 0.
  static absl::Status CheckProfileRef(const v1::ProfileRef& ref) {
    if (ref.name().empty() && ref.version() != 0) return absl::InvalidArgumentError("profile.version: needs profile.name");
    if (ref.version() < 0) return absl::InvalidArgumentError("profile.version: must be >= 0");
    return absl::OkStatus();
  }

  // A job given as a path to a config.json: the service reads no files.
  static absl::Status HfConfigRefused() {
    return absl::InvalidArgumentError(
        "job.model.hf_config: the service reads no files; send the shape inline (the stepcast and "
        "Python clients inline a local config.json)");
  }

  // The profile a request names; nullopt for the hardware's reference profile.
  absl::StatusOr<std::optional<RateProfile>> ResolveProfile(const v1::ProfileRef& ref) {
    if (absl::Status s = CheckProfileRef(ref); !s.ok()) return s;
    if (ref.name().empty()) return std::nullopt;
    absl::StatusOr<v1::GetProfileResponse> stored = store_->GetProfile(ref.name(), ref.version());
    if (stored.ok()) {
      absl::StatusOr<RateProfile> p = RateProfileFromProto(stored->profile(), "profile");
      if (!p.ok()) return absl::DataLossError(absl::StrCat("stored profile '", ref.name(), "': ", p.status().message()));
      return std::optional<RateProfile>(*std::move(p));
    }
    if (stored.status().code() != absl::StatusCode::kNotFound) return stored.status();
    if (ref.version() <= 1) {
      if (auto it = dir_profiles_.find(ref.name()); it != dir_profiles_.end()) {
        return std::optional<RateProfile>(it->second);
      }
      for (const auto& [key, hw] : catalog_.hardware()) {
        if (hw.reference_profile.name == ref.name()) return std::optional<RateProfile>(hw.reference_profile);
      }
    }
    return absl::NotFoundError(absl::StrCat("profile.name: unknown profile '", ref.name(), "'",
                                            ref.version() ? absl::StrCat(" version ", ref.version()) : ""));
  }

  absl::StatusOr<Prediction> Run(const v1::JobSpec& spec, const v1::ProfileRef& ref, Job* job_out = nullptr) {
    if (spec.model().source_case() == v1::ModelSpec::kHfConfig) return HfConfigRefused();
    absl::StatusOr<std::optional<RateProfile>> profile = ResolveProfile(ref);
    if (!profile.ok()) return profile.status();
    absl::StatusOr<Job> job = JobFromSpec(spec, catalog_, "", *profile ? &**profile : nullptr);
    if (!job.ok()) return Prefixed(job.status(), "job.");
    absl::StatusOr<Prediction> p = stepcast::Predict(*job);
    if (!p.ok()) return Prefixed(p.status(), "job.");
    if (job_out != nullptr) *job_out = *std::move(job);
    return p;
  }

  absl::Status DoPredict(grpc::CallbackServerContext*, const v1::PredictRequest& req, v1::PredictResponse* resp) {
    if (absl::Status s = CheckJobSize(req.job(), "job"); !s.ok()) return s;
    absl::StatusOr<Prediction> p = Run(req.job(), req.profile());
    if (!p.ok()) return p.status();
    PredictionToProto(*p, resp->mutable_prediction());  // in place: the response is on its call's arena
    return absl::OkStatus();
  }

  // Preflight: the verdict on the handler thread (a prediction takes microseconds); the layout
  // suggestion on the search pool, within 2 s of the call's budget; answered (`done`, exactly
  // once) from the pool, or at once when the pool has no room (then without a suggestion).
  void PreflightAsync(grpc::CallbackServerContext* ctx, const v1::PreflightRequest& req,
                      v1::PreflightResponse* resp, std::function<void(absl::Status)> done) {
    auto job = std::make_shared<Job>();
    auto prediction = std::make_shared<Prediction>();
    absl::Status s = Guard(ctx, [&]() -> absl::Status {
      if (absl::Status c = CheckJobSize(req.job(), "job"); !c.ok()) return c;
      if (absl::Status c = ValidatePolicy(req.policy()); !c.ok()) return c;
      absl::StatusOr<Prediction> p = Run(req.job(), req.profile(), job.get());
      if (!p.ok()) return p.status();
      *prediction = *std::move(p);
      PredictionToProto(*prediction, resp->mutable_prediction());
      const PolicyResult verdict = EvaluatePolicy(resp->prediction(), req.policy());
      resp->set_verdict(verdict.verdict);
      for (const auto& r : verdict.reasons) *resp->add_reasons() = r;
      StorePreflight(ctx, req, resp);
      return absl::OkStatus();
    });
    if (!s.ok()) return done(s);
    // A better layout on the same GPUs when this one does not fit or is >= 10% slower
    // (docs/SEARCH.md); the search stops in time for the verdict (at most 2 s). Not finding
    // one, or no room on the pool, is no error.
    const Clock::time_point deadline = WorkDeadline(ctx, std::chrono::milliseconds(2000));
    SearchPool* pool = pool_.get();
    const int threads = search_threads_;
    const bool queued = pool_->PostSuggestion(
        deadline,
        [ctx, resp, job, prediction, deadline, pool, threads](bool run) {
          if (run) {
            absl::StatusOr<std::optional<v1::LayoutSuggestion>> suggestion = SuggestLayout(
                *job, *prediction, deadline, [ctx, pool] { return ctx->IsCancelled() || pool->stopping(); }, threads);
            if (suggestion.ok() && suggestion->has_value()) *resp->mutable_suggestion() = **suggestion;
          }
          return absl::OkStatus();
        },
        done);
    if (!queued) done(absl::OkStatus());
  }

  // The verdict never waits for the store (reliability review H4/M1): the prediction is queued
  // for the writer thread, and a failed or refused write only leaves prediction_id empty. A peer
  // over its store rate gets its verdict without a stored prediction; so does a caller without a
  // token whose job and prediction are above max_unauthenticated_stored_bytes (review 2, N7).
  // The stored prediction leaves out job_name (the job's name, stored once with the job).
  void StorePreflight(grpc::CallbackServerContext* ctx, const v1::PreflightRequest& req, v1::PreflightResponse* resp) {
    auto stored = std::make_shared<RunStore::StoredPrediction>(
        RunStore::StoredPrediction{req.job(), req.profile(), resp->prediction()});
    stored->prediction.clear_job_name();
    if (!Authenticated(ctx)) {
      const size_t bytes = stored->job.ByteSizeLong() + stored->profile.ByteSizeLong() +
                           stored->prediction.ByteSizeLong();
      if (static_cast<int64_t>(bytes) > options_.max_unauthenticated_stored_bytes) return;
    }
    if (!limiter_.Allow(ctx->peer())) return;
    const std::string id = RandomId("pred-");
    {
      std::lock_guard<std::mutex> l(pending_mu_);
      pending_[id] = stored;
    }
    const int64_t bytes = static_cast<int64_t>(stored->job.ByteSizeLong() + stored->profile.ByteSizeLong() +
                                               stored->prediction.ByteSizeLong());
    const bool queued = writer_->Post([this, id, stored, bytes] {
      if (absl::Status s = store_->PutPrediction(id, *stored, absl::ToUnixMicros(absl::Now())); !s.ok()) {
        if (log_ != nullptr) std::fprintf(log_, "stepcast serve: prediction %s not stored: %s\n", id.c_str(),
                                          std::string(s.message()).c_str());
      }
      {
        std::lock_guard<std::mutex> l(pending_mu_);
        pending_.erase(id);
      }
      // Pruned every 1000 rows or every 1/64 of the byte cap, whichever comes first.
      stored_bytes_since_prune_ += bytes;
      if (++stored_since_prune_ >= 1000 || stored_bytes_since_prune_ >= options_.max_stored_prediction_bytes / 64) {
        Prune();
      }
    });
    if (!queued) {
      std::lock_guard<std::mutex> l(pending_mu_);
      pending_.erase(id);
      return;
    }
    resp->set_prediction_id(id);
  }

  // Retention of predictions (ServeOptions::prediction_ttl_s, max_stored_predictions).
  void Prune() {
    stored_since_prune_ = 0;
    stored_bytes_since_prune_ = 0;
    const int64_t cutoff = absl::ToUnixMicros(absl::Now()) - options_.prediction_ttl_s * 1000000;
    if (absl::Status s = store_->PrunePredictions(cutoff, options_.max_stored_predictions,
                                                  options_.max_stored_prediction_bytes);
        !s.ok()) {
      if (log_ != nullptr) std::fprintf(log_, "stepcast serve: pruning predictions: %s\n", std::string(s.message()).c_str());
    }
  }

  absl::StatusOr<RunStore::StoredPrediction> GetPrediction(const std::string& id) {
    {
      std::lock_guard<std::mutex> l(pending_mu_);
      if (auto it = pending_.find(id); it != pending_.end()) {
        RunStore::StoredPrediction p = *it->second;
        p.prediction.set_job_name(p.job.name());
        return p;
      }
    }
    absl::StatusOr<RunStore::StoredPrediction> p = store_->GetPrediction(id);
    // Stored without job_name since review 2's N7 (the job's name is stored with the job).
    if (p.ok() && p->prediction.job_name().empty()) p->prediction.set_job_name(p->job.name());
    return p;
  }

  // Search: the job's model, batch, hardware and framework; its own layout only for the changes.
  // Checked on the handler thread; searched on the pool (admission: RESOURCE_EXHAUSTED with a
  // retry-after when it is full); answered (`done`, exactly once) from there.
  void SearchAsync(grpc::CallbackServerContext* ctx, const v1::SearchRequest& req, v1::SearchResponse* resp,
                   std::function<void(absl::Status)> done) {
    auto base = std::make_shared<SearchBase>();
    auto options = std::make_shared<SearchOptions>();
    absl::Status s = Guard(ctx, [&]() -> absl::Status {
      if (absl::Status c = CheckJobSize(req.job(), "job"); !c.ok()) return c;
      if (req.job().model().source_case() == v1::ModelSpec::kHfConfig) return HfConfigRefused();
      absl::StatusOr<std::optional<RateProfile>> profile = ResolveProfile(req.profile());
      if (!profile.ok()) return profile.status();
      absl::StatusOr<SearchBase> b = SearchBaseFromSpec(req.job(), catalog_, "", *profile ? &**profile : nullptr);
      if (!b.ok()) return Prefixed(b.status(), "job.");
      *base = *std::move(b);
      absl::StatusOr<SearchOptions> o = SearchOptionsFromProto(req.options(), *base);
      if (!o.ok()) return o.status();
      *options = *std::move(o);
      options->threads = search_threads_;
      // The caps before admission: a refused search costs no slot.
      if (absl::Status c = CheckSearchCaps(base->job, *options); !c.ok()) {
        return Prefixed(c, absl::StartsWith(c.message(), "top_n") ? "options." : "job.");
      }
      return absl::OkStatus();
    });
    if (!s.ok()) return done(s);
    // The call's deadline (answered in time) and at most 60 s; the request's time limit counts
    // from when the search starts, not from when it was queued.
    const Clock::time_point call_deadline = WorkDeadline(ctx, std::chrono::seconds(60));
    const double time_limit_s = std::min(req.options().time_limit_s(), 86400.0);
    options->deadline = call_deadline;
    SearchPool* pool = pool_.get();
    const size_t max_reply_bytes = static_cast<size_t>(options_.max_message_bytes) / 4 * 3;
    const SearchPool::Admit admit =
        pool_->PostSearch(PeerHost(ctx->peer()), call_deadline,
                          time_limit_s > 0 ? std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(time_limit_s))
                                           : Clock::duration::max(),
                          [ctx, resp, base, options, pool, max_reply_bytes, call_deadline,
                           time_limit_s](bool run) -> absl::Status {
                            if (!run) {
                              if (pool->stopping()) return absl::UnavailableError("the server is shutting down; retry");
                              return absl::DeadlineExceededError(
                                  "the search waited for a free slot past its deadline; retry later");
                            }
                            if (time_limit_s > 0) {
                              options->deadline = std::min(
                                  call_deadline, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                                    std::chrono::duration<double>(time_limit_s)));
                            }
                            options->cancelled = [ctx, pool] { return ctx->IsCancelled() || pool->stopping(); };
                            absl::StatusOr<SearchResult> r = SearchLayouts(base->job, *options);
                            if (!r.ok()) {
                              if (r.status().code() == absl::StatusCode::kCancelled && pool->stopping()) {
                                return absl::UnavailableError(absl::StrCat("the server is shutting down; retry (",
                                                                           r.status().message(), ")"));
                              }
                              return Prefixed(r.status(),
                                              absl::StartsWith(r.status().message(), "budget_usd") ? "options." : "job.");
                            }
                            // Within the message limit, fitted before it is built (review 2, N3).
                            *resp->mutable_result() = SearchResultToProto(
                                *r, base->submitted ? &*base->submitted : nullptr, max_reply_bytes);
                            return absl::OkStatus();
                          },
                          done);
    switch (admit) {
      case SearchPool::Admit::kQueued: return;
      case SearchPool::Admit::kStopping:
        return done(absl::UnavailableError("the server is shutting down; retry"));
      case SearchPool::Admit::kFull:
      case SearchPool::Admit::kPeerBusy:
      case SearchPool::Admit::kWouldExpire: {
        const int64_t after = pool_->RetryAfterS();
        ctx->AddTrailingMetadata("retry-after", absl::StrCat(after));
        std::string why;
        switch (admit) {
          case SearchPool::Admit::kFull:
            why = absl::StrCat("the service's search queue is full (", options_.max_waiting_searches, " waiting)");
            break;
          case SearchPool::Admit::kPeerBusy:
            why = absl::StrCat("this host already has ", options_.max_searches_per_peer, " searches running or waiting");
            break;
          default:
            why = "every search slot is taken past this call's deadline";
        }
        return done(absl::ResourceExhaustedError(absl::StrCat(why, "; retry after ", after, " s")));
      }
    }
  }

  // ReportRun: checked on the handler thread (token, sizes, fields: cheap, and the only part that
  // reads `ctx`); built and stored on the writer thread, which then answers (`done`, called
  // exactly once, here or there). Building holds the run's prediction (a whole Predict when the
  // request carries a job), so at the writer's lower priority a flood of reports slows itself, not
  // the Predict and Preflight calls beside it (issue 30: Predict beside 8 ReportRun writers).
  // `req` and `resp` stay valid until `done` is called (gRPC callback API).
  void ReportRunAsync(grpc::CallbackServerContext* ctx, const v1::ReportRunRequest& req, v1::ReportRunResponse* resp,
                      std::function<void(absl::Status)> done) {
    absl::Status s = Guard(ctx, [&] { return CheckReportRequest(ctx, req); });
    if (!s.ok()) return done(s);
    const v1::ReportRunRequest* request = &req;
    const bool queued = writer_->Post([this, request, resp, done] {
      v1::Run run;
      if (absl::Status b = BuildCheckedRun(*request, run); !b.ok()) return done(b);
      absl::StatusOr<std::string> id = store_->PutRun(run, request->request_id());
      if (!id.ok()) return done(id.status());
      if (*id != run.run_id()) {  // a retry: answer with the run the first attempt stored
        absl::StatusOr<v1::Run> first = store_->GetRun(*id);
        if (!first.ok()) return done(first.status());
        *resp->mutable_run() = *std::move(first);
        return done(absl::OkStatus());
      }
      *resp->mutable_run() = std::move(run);
      done(absl::OkStatus());
    });
    if (!queued) done(absl::UnavailableError("the store's write queue is full; retry"));
  }

  static absl::Status BadField(absl::string_view f, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(f, ": ", why));
  }

  // ReportRun's request checked field by field before anything is built: the token, sizes, labels,
  // finite non-negative measurements, timestamps, one of prediction_id and job, the job's and the
  // profile reference's own fields (every error names the field). Everything that reads only the
  // request is here, on the handler thread; what needs the model or the store (the job's layout,
  // the named prediction and profile) is checked when the run is built on the writer thread.
  absl::Status CheckReportRequest(grpc::CallbackServerContext* ctx, const v1::ReportRunRequest& req) const {
    if (absl::Status s = CheckToken(ctx, Scope::kReport); !s.ok()) return s;
    const auto& bad = BadField;
    if (req.has_job()) {
      if (absl::Status s = CheckJobSize(req.job(), "job"); !s.ok()) return s;
    }
    if (req.request_id().size() > 128) return bad("request_id", "at most 128 bytes");
    if (req.cluster().size() > 256) return bad("cluster", "at most 256 bytes");
    if (req.prediction_id().size() > 128) return bad("prediction_id", "at most 128 bytes");
    if (req.labels_size() > options_.max_labels) {
      return bad("labels", absl::StrCat(req.labels_size(), " labels, above the limit of ", options_.max_labels));
    }
    for (const auto& [k, v] : req.labels()) {
      if (static_cast<int>(k.size() + v.size()) > options_.max_label_bytes) {
        return bad(absl::StrCat("labels[", k.substr(0, 64), "]"),
                   absl::StrCat("key and value above ", options_.max_label_bytes, " bytes"));
      }
    }
    if (absl::Status s = CheckFiniteNumbers(req.measured_breakdown(), "measured_breakdown"); !s.ok()) return s;
    if (req.has_framework_reported()) {
      // What the run's log states (stepcast report --log), stored as sent: checked, not converted.
      const v1::FrameworkReported& f = req.framework_reported();
      if (absl::Status s = CheckFiniteNumbers(f, "framework_reported"); !s.ok()) return s;
      for (const auto& [field, v] : {std::pair{"framework_reported.tflops_per_gpu", f.tflops_per_gpu()},
                                     std::pair{"framework_reported.mfu", f.mfu()},
                                     std::pair{"framework_reported.tokens_per_s_per_gpu", f.tokens_per_s_per_gpu()}}) {
        if (v < 0) return bad(field, "must be >= 0");
      }
      if (f.iterations() < 0 || f.warmup_records() < 0) return bad("framework_reported.iterations", "must be >= 0");
      if (f.framework().size() > 64) return bad("framework_reported.framework", "at most 64 bytes");
    }
    const double step = req.measured_step_time_s(), tps = req.measured_tokens_per_s();
    if (!(std::isfinite(step) && step >= 0)) return bad("measured_step_time_s", "must be a finite number >= 0");
    if (!(std::isfinite(tps) && tps >= 0)) return bad("measured_tokens_per_s", "must be a finite number >= 0");
    if (step == 0 && tps == 0) {
      return bad("measured_step_time_s", "one of measured_step_time_s or measured_tokens_per_s is required");
    }
    if (step > 0 && tps > 0) return bad("measured_tokens_per_s", "give measured_step_time_s or this, not both");
    if (req.gpu_count() < 0) return bad("gpu_count", "must be >= 0");
    // No cluster has more; 2^31-1 was accepted before (reliability review L2).
    if (req.gpu_count() > (1 << 24)) return bad("gpu_count", "must be at most 16777216");
    // Seconds far out of range overflowed TimestampToMicroseconds (int64 microseconds, undefined
    // behaviour; review 2, N13): protobuf's Timestamp range, years 1 to 9999.
    for (const auto& [field, t, given] : {std::tuple{"start_time", &req.start_time(), req.has_start_time()},
                                          std::tuple{"end_time", &req.end_time(), req.has_end_time()}}) {
      if (given && !ValidTimestamp(*t)) {
        return bad(field, "out of range: seconds must be within years 1 to 9999 and nanos in [0, 999999999]");
      }
    }
    if (req.has_start_time() && req.has_end_time() &&
        TimeUtil::TimestampToMicroseconds(req.end_time()) < TimeUtil::TimestampToMicroseconds(req.start_time())) {
      return bad("end_time", "is before start_time");
    }
    for (const auto& [k, v] : req.labels()) {
      if (k.empty()) return bad("labels", "keys must not be empty");
    }
    // What the run is measured against: checked here, on the handler thread, so that a malformed
    // request is INVALID_ARGUMENT even when the writer's queue is full (review L1).
    if (!req.prediction_id().empty() && req.has_job()) return bad("job", "give prediction_id or job, not both");
    if (req.prediction_id().empty() && !req.has_job()) {
      return bad("prediction_id", "one of prediction_id or job is required");
    }
    if (req.has_job()) {
      if (req.job().model().source_case() == v1::ModelSpec::kHfConfig) return HfConfigRefused();
      if (absl::Status s = CheckProfileRef(req.profile()); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // The run to store from a checked ReportRun request: the prediction it names (or one made from
  // its job), the measured figures and what derives from them (measured MFU, error, comparison).
  // `req` must have passed CheckReportRequest.
  absl::Status BuildCheckedRun(const v1::ReportRunRequest& req, v1::Run& run) {
    const auto& bad = BadField;
    const double step = req.measured_step_time_s(), tps = req.measured_tokens_per_s();
    // CheckReportRequest has refused both and neither of prediction_id and job.
    if (!req.prediction_id().empty()) {
      absl::StatusOr<RunStore::StoredPrediction> sp = GetPrediction(req.prediction_id());
      if (!sp.ok()) return sp.status();
      run.set_prediction_id(req.prediction_id());
      *run.mutable_job() = sp->job;
      *run.mutable_prediction() = sp->prediction;
    } else if (req.has_job()) {
      absl::StatusOr<Prediction> p = Run(req.job(), req.profile());
      if (!p.ok()) return p.status();
      *run.mutable_job() = req.job();
      PredictionToProto(*p, run.mutable_prediction());
    } else {
      return bad("prediction_id", "one of prediction_id or job is required");
    }
    const v1::Prediction& pred = run.prediction();
    const int32_t gpus = req.gpu_count() > 0 ? req.gpu_count() : pred.gpu_count();
    const double measured = step > 0 ? step : pred.tokens_per_step() / tps;
    run.set_run_id(RandomId("run-"));
    run.set_cluster(!req.cluster().empty() ? req.cluster() : run.job().cluster().name());
    run.set_model(pred.model_name());
    run.set_hardware(pred.hardware_name());
    run.set_gpu_count(gpus);
    run.set_predicted_step_time_s(pred.step_time_s());
    run.set_measured_step_time_s(measured);
    run.set_predicted_mfu(pred.mfu());
    run.set_measured_mfu(pred.model_flops_per_step() / (measured * gpus * pred.peak_flops_per_s_per_gpu()));
    run.set_step_time_error_pct((pred.step_time_s() - measured) / measured * 100);
    *run.mutable_predicted_breakdown() = pred.breakdown();
    if (req.has_measured_breakdown()) {
      *run.mutable_measured_breakdown() = req.measured_breakdown();
      const Comparison cmp = Compare(pred, req.measured_breakdown(), measured);
      for (const auto& row : cmp.rows) *run.add_comparison() = row;
      run.set_largest_difference(cmp.largest_difference);
    }
    if (req.has_start_time()) *run.mutable_start_time() = req.start_time();
    if (req.has_end_time()) *run.mutable_end_time() = req.end_time();
    *run.mutable_create_time() = TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(absl::Now()));
    for (const auto& [k, v] : req.labels()) (*run.mutable_labels())[k] = v;
    if (req.has_framework_reported()) *run.mutable_framework_reported() = req.framework_reported();
    // Derived values: a tiny measured step (1e-320 s) would store an infinite MFU (review L2).
    if (!std::isfinite(run.measured_mfu()) || !std::isfinite(run.step_time_error_pct()) ||
        !std::isfinite(run.measured_step_time_s()) || !(run.measured_step_time_s() > 0)) {
      return bad(step > 0 ? "measured_step_time_s" : "measured_tokens_per_s",
                 "gives a non-finite measured MFU or error (the value is out of range)");
    }
    // The ranges `stepcast report` checks too (proto/measured_run.h): MFU at most 100%, a step
    // of at most a day. The field names are the request's.
    if (absl::Status s = ValidateMeasuredRun(run.measured_step_time_s(), 0, run.measured_mfu()); !s.ok()) {
      const std::string msg(s.message());
      if (absl::StartsWith(msg, "mfu")) {
        return bad(step > 0 ? "measured_step_time_s" : "measured_tokens_per_s",
                   absl::StrCat("gives a measured MFU of ", run.measured_mfu() * 100,
                                "% of the peak, above 100%: check the units and gpu_count"));
      }
      return bad(step > 0 ? "measured_step_time_s" : "measured_tokens_per_s", msg);
    }
    return absl::OkStatus();
  }

  absl::Status DoGetRun(grpc::CallbackServerContext* ctx, const v1::GetRunRequest& req, v1::GetRunResponse* resp) {
    if (absl::Status s = CheckToken(ctx, Scope::kRead); !s.ok()) return s;
    if (req.run_id().empty()) return absl::InvalidArgumentError("run_id: required");
    absl::StatusOr<v1::Run> run = store_->GetRun(req.run_id());
    if (!run.ok()) return run.status();
    *resp->mutable_run() = *std::move(run);
    return absl::OkStatus();
  }

  absl::Status DoListRuns(grpc::CallbackServerContext* ctx, const v1::ListRunsRequest& req, v1::ListRunsResponse* resp) {
    if (absl::Status s = CheckToken(ctx, Scope::kRead); !s.ok()) return s;
    absl::StatusOr<v1::ListRunsResponse> r = store_->ListRuns(req);
    if (!r.ok()) return r.status();
    *resp = *std::move(r);
    return absl::OkStatus();
  }

  absl::Status DoListProfiles(grpc::CallbackServerContext* ctx, const v1::ListProfilesRequest&,
                              v1::ListProfilesResponse* resp) {
    if (absl::Status s = CheckToken(ctx, Scope::kRead); !s.ok()) return s;
    absl::StatusOr<std::vector<v1::ProfileInfo>> stored = store_->ListProfiles();
    if (!stored.ok()) return stored.status();
    for (auto& p : *stored) *resp->add_profiles() = std::move(p);
    for (const auto& [name, p] : dir_profiles_) {
      v1::ProfileInfo* info = resp->add_profiles();
      info->set_name(name);
      info->set_latest_version(1);
      info->set_origin("directory");
    }
    for (const auto& [key, hw] : catalog_.hardware()) {
      v1::ProfileInfo* info = resp->add_profiles();
      info->set_name(hw.reference_profile.name);
      info->set_latest_version(1);
      info->set_origin("builtin");
    }
    return absl::OkStatus();
  }

  absl::Status DoGetProfile(grpc::CallbackServerContext* ctx, const v1::GetProfileRequest& req,
                            v1::GetProfileResponse* resp) {
    if (absl::Status s = CheckToken(ctx, Scope::kRead); !s.ok()) return s;
    if (req.name().empty()) return absl::InvalidArgumentError("name: required");
    v1::ProfileRef ref;
    ref.set_name(req.name());
    ref.set_version(req.version());
    absl::StatusOr<v1::GetProfileResponse> stored = store_->GetProfile(req.name(), req.version());
    if (stored.ok()) {
      *resp = *std::move(stored);
      return absl::OkStatus();
    }
    absl::StatusOr<std::optional<RateProfile>> p = ResolveProfile(ref);
    if (!p.ok()) return p.status();
    *resp->mutable_profile() = RateProfileToProto(**p);
    resp->set_version(1);
    return absl::OkStatus();
  }

  // PutProfile: checked on the handler thread, stored (and answered) on the writer thread.
  void PutProfileAsync(grpc::CallbackServerContext* ctx, const v1::PutProfileRequest& req,
                       v1::PutProfileResponse* resp, std::function<void(absl::Status)> done) {
    absl::Status s = Guard(ctx, [&]() -> absl::Status {
      if (absl::Status t = CheckToken(ctx, Scope::kAdmin); !t.ok()) return t;
      if (req.name().empty()) return absl::InvalidArgumentError("name: required (the cluster's name)");
      if (req.name().size() > 128) return absl::InvalidArgumentError("name: at most 128 bytes");
      for (char c : req.name()) {
        if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
          return absl::InvalidArgumentError("name: only letters, digits, '-', '_' and '.'");
        }
      }
      if (!req.has_profile()) return absl::InvalidArgumentError("profile: required");
      if (req.profile().ByteSizeLong() > static_cast<size_t>(options_.max_job_bytes)) {
        return absl::InvalidArgumentError(absl::StrCat("profile: above the limit of ", options_.max_job_bytes, " bytes"));
      }
      // NaN and infinity anywhere in the profile (ValidateRateProfile checks the rates it uses).
      if (absl::Status f = CheckFiniteNumbers(req.profile(), "profile"); !f.ok()) return f;
      absl::StatusOr<RateProfile> p = RateProfileFromProto(req.profile(), "profile");
      return p.status();
    });
    if (!s.ok()) return done(s);
    auto name = std::make_shared<std::string>(req.name());
    auto profile = std::make_shared<v1::RateProfile>(req.profile());
    const bool queued = writer_->Post([this, name, profile, resp, done] {
      absl::StatusOr<int32_t> v = store_->PutProfile(*name, *profile, absl::ToUnixMicros(absl::Now()));
      if (!v.ok()) return done(v.status());
      resp->set_version(*v);
      done(absl::OkStatus());
    });
    if (!queued) done(absl::UnavailableError("the store's write queue is full; retry"));
  }


 private:
  const Catalog catalog_;
  std::unique_ptr<RunStore> store_;
  const std::map<std::string, RateProfile> dir_profiles_;
  const std::string admin_token_, report_token_;
  const ServeOptions options_;
  std::FILE* const log_;
  PeerRateLimiter limiter_;
  // Predictions answered but not yet written (ReportRun may name one right away).
  std::mutex pending_mu_;
  std::map<std::string, std::shared_ptr<RunStore::StoredPrediction>> pending_;
  std::atomic<int> stored_since_prune_{0};
  std::atomic<int64_t> stored_bytes_since_prune_{0};
  std::atomic<bool> refusing_{false};
  std::atomic<int> busy_handlers_{0};
  std::unique_ptr<SearchPool> pool_;  // stopped (joined) before the members above go
  int search_threads_ = 1;
  std::unique_ptr<Writer> writer_;  // last: stopped (joined) before the members above go
};

// The request and response of one call on one protobuf arena, its first block inside the holder
// (gRPC's callback-API MessageAllocator, grpcpp/support/message_allocator.h; protobuf's
// ArenaOptions::initial_block): a Predict's ~5 KB response (assumed inputs with their sources,
// the interval's notes) is built without a heap allocation per field and freed at once when the
// call ends (docs/PERFORMANCE.md, issue 30, seventh pass). A response larger than the block
// takes more blocks from the heap, as any arena does.
template <class Request, class Response>
class ArenaMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder(); }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options(block_)) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    static constexpr size_t kBlockBytes = 16 << 10;
    static google::protobuf::ArenaOptions Options(char* block) {
      google::protobuf::ArenaOptions o;
      o.initial_block = block;
      o.initial_block_size = kBlockBytes;
      return o;
    }
    alignas(16) char block_[kBlockBytes];  // before arena_: constructed first, destroyed last
    google::protobuf::Arena arena_;
  };
};

// Binds one grpc::Server to the ServiceImpl: one log line per RPC; synchronous handlers answer
// inline, ReportRun and PutProfile answer from the writer thread, Search and Preflight (after its
// suggestion) from the search pool.
class GrpcFrontend final : public v1::StepcastService::CallbackService {
 public:
  explicit GrpcFrontend(std::shared_ptr<ServiceImpl> impl) : impl_(std::move(impl)) {
    SetMessageAllocatorFor_Predict(&predict_allocator_);
    SetMessageAllocatorFor_Preflight(&preflight_allocator_);
  }

  // Counts a handler's synchronous part (the watchdog tells busy handlers from a dead listener).
  struct Busy {
    explicit Busy(std::atomic<int>& n) : n_(n) { ++n_; }
    ~Busy() { --n_; }
    std::atomic<int>& n_;
  };

#define STEPCAST_UNARY(Method, Body)                                                                 \
  grpc::ServerUnaryReactor* Method(grpc::CallbackServerContext* ctx, const v1::Method##Request* req, \
                                   v1::Method##Response* resp) override {                            \
    Busy busy(impl_->busy_handlers_counter());                                                       \
    RpcLog log(impl_->log(), #Method, ctx);                                                          \
    auto* reactor = ctx->DefaultReactor();                                                           \
    reactor->Finish(log.Done(ToGrpc(impl_->Guard(ctx, [&] { return impl_->Body(ctx, *req, resp); })))); \
    return reactor;                                                                                  \
  }
  STEPCAST_UNARY(Predict, DoPredict)
  STEPCAST_UNARY(GetRun, DoGetRun)
  STEPCAST_UNARY(ListRuns, DoListRuns)
  STEPCAST_UNARY(ListProfiles, DoListProfiles)
  STEPCAST_UNARY(GetProfile, DoGetProfile)
#undef STEPCAST_UNARY
#define STEPCAST_ASYNC(Method, Body)                                                                 \
  grpc::ServerUnaryReactor* Method(grpc::CallbackServerContext* ctx, const v1::Method##Request* req, \
                                   v1::Method##Response* resp) override {                            \
    Busy busy(impl_->busy_handlers_counter());                                                       \
    RpcLog log(impl_->log(), #Method, ctx);                                                          \
    auto* reactor = ctx->DefaultReactor();                                                           \
    impl_->Body(ctx, *req, resp, [reactor, log](absl::Status s) mutable { reactor->Finish(log.Done(ToGrpc(s))); }); \
    return reactor;                                                                                  \
  }
  STEPCAST_ASYNC(ReportRun, ReportRunAsync)
  STEPCAST_ASYNC(PutProfile, PutProfileAsync)
  STEPCAST_ASYNC(Preflight, PreflightAsync)
  STEPCAST_ASYNC(Search, SearchAsync)
#undef STEPCAST_ASYNC

 private:
  std::shared_ptr<ServiceImpl> impl_;
  ArenaMessageAllocator<v1::PredictRequest, v1::PredictResponse> predict_allocator_;
  ArenaMessageAllocator<v1::PreflightRequest, v1::PreflightResponse> preflight_allocator_;
};

namespace {

absl::StatusOr<std::string> ReadToken(const std::string& path, const char* flag) {
  absl::StatusOr<std::string> t = ReadFile(path, flag);
  if (!t.ok()) return t.status();
  std::string token(absl::StripAsciiWhitespace(*t));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is empty"));
  return token;
}

// Raises the soft open-file limit to the hard one: each connection costs one descriptor, and
// the defaults (1024 soft) make the fd limit the first thing a burst of connections reaches.
void RaiseFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
}

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]" || absl::StartsWith(host, "127.") ||
         absl::StartsWith(host, "unix:");
}

}  // namespace

absl::StatusOr<std::unique_ptr<StepcastServer>> StepcastServer::Start(const ServeOptions& o, Catalog catalog) {
  std::string token, report_token;
  if (!o.token_file.empty()) {
    absl::StatusOr<std::string> t = ReadToken(o.token_file, "--token-file");
    if (!t.ok()) return t.status();
    token = *t;
  }
  if (!o.report_token_file.empty()) {
    absl::StatusOr<std::string> t = ReadToken(o.report_token_file, "--report-token-file");
    if (!t.ok()) return t.status();
    report_token = *t;
    if (report_token == token) {
      return absl::InvalidArgumentError("--report-token-file: must differ from --token-file (the admin token)");
    }
  }
  if (o.protect_reads && token.empty() && report_token.empty()) {
    return absl::InvalidArgumentError("--protect-reads: needs --token-file or --report-token-file");
  }
  if (o.max_job_bytes <= 0 || o.max_labels < 0 || o.max_label_bytes <= 0 || o.prediction_ttl_s <= 0 ||
      o.handshake_timeout_ms <= 0 || o.max_connection_idle_ms <= 0 || o.watchdog_period_ms < 0 ||
      o.lame_duck_ms < 0 || !(o.preflight_store_per_s >= 0) || !(o.preflight_store_burst >= 1)) {
    return absl::InvalidArgumentError("serve: limits must be positive");
  }
  const struct {
    const char* flag;
    int64_t v, lo;
  } limits[] = {{"--max-stored-prediction-bytes", o.max_stored_prediction_bytes, 1},
                {"max_unauthenticated_stored_bytes", o.max_unauthenticated_stored_bytes, 0},
                {"max_job_name_bytes", o.max_job_name_bytes, 1},
                {"search_workers", o.search_workers, 0},
                {"max_waiting_searches", o.max_waiting_searches, 0},
                {"max_searches_per_peer", o.max_searches_per_peer, 1},
                {"rebuild_grace_ms", o.rebuild_grace_ms, 0},
                {"refuse_ms", o.refuse_ms, 0},
                {"max_queued_writes", o.max_queued_writes, 1},
                {"--max-message-bytes", o.max_message_bytes, 64 << 10}};
  for (const auto& l : limits) {
    if (l.v < l.lo) return absl::InvalidArgumentError(absl::StrCat(l.flag, ": ", l.v, " must be at least ", l.lo));
  }
  std::map<std::string, RateProfile> dir_profiles;
  if (!o.profiles_dir.empty()) {
    namespace fs = std::filesystem;
    if (!fs::is_directory(o.profiles_dir)) {
      return absl::InvalidArgumentError(absl::StrCat("--profiles-dir: ", o.profiles_dir, " is not a directory"));
    }
    for (const auto& e : fs::directory_iterator(o.profiles_dir)) {
      if (!FormatFromPath(e.path().string()).ok()) continue;
      absl::StatusOr<RateProfile> p = LoadRateProfile(e.path().string());
      if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat("--profiles-dir: ", p.status().message()));
      dir_profiles[e.path().stem().string()] = *std::move(p);
    }
  }
  StoreOptions store_options;
  store_options.connections = o.store_connections;
  absl::StatusOr<std::unique_ptr<RunStore>> store = RunStore::Open(o.db_path, store_options);
  if (!store.ok()) return absl::Status(store.status().code(), absl::StrCat("--store: ", store.status().message()));

  std::unique_ptr<StepcastServer> server(new StepcastServer());
  server->options_ = o;
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key: give both or neither");
  }
  if (!o.tls_cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadFile(o.tls_cert_file, "--tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile(o.tls_key_file, "--tls-key");
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    server->creds_ = grpc::SslServerCredentials(ssl);
  } else {
    server->creds_ = grpc::InsecureServerCredentials();
  }
  const std::string host = o.listen_address.substr(0, o.listen_address.rfind(':'));
  if ((!token.empty() || !report_token.empty()) && o.tls_cert_file.empty() && !IsLoopback(host) && o.log) {
    std::fprintf(o.log, "stepcast serve: WARNING: listening on %s without TLS: bearer tokens travel in clear text "
                        "(give --tls-cert/--tls-key)\n", o.listen_address.c_str());
  }
  RaiseFileLimit();
  // absl::Mutex's deadlock detection (on in Debian's absl build, which keeps its debug checks)
  // records every lock in a global graph: 2-3% of the server's CPU under load, inside gRPC's own
  // mutexes (perf, docs/PERFORMANCE.md "The service under load"). A debugging aid, off for the
  // process that serves (absl/synchronization/mutex.h SetMutexDeadlockDetectionMode).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  server->service_ = std::make_shared<ServiceImpl>(std::move(catalog), *std::move(store), std::move(dir_profiles),
                                                   std::move(token), std::move(report_token), o);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  if (absl::Status s = server->StartGrpc(o.listen_address); !s.ok()) return s;
  server->address_ = absl::StrCat(host, ":", server->port_);
  if (o.watchdog_period_ms > 0) server->watchdog_ = std::thread([s = server.get()] { s->WatchdogLoop(); });
  return server;
}

absl::Status StepcastServer::StartGrpc(const std::string& address) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, creds_, &port);
  frontends_.push_back(std::make_unique<GrpcFrontend>(service_));
  builder.RegisterService(frontends_.back().get());
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  // Connections that never finish their handshake, and idle ones, are closed (review H1).
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, options_.handshake_timeout_ms);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, options_.max_connection_idle_ms);
  std::unique_ptr<grpc::Server> s = builder.BuildAndStart();
  if (s == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ", address));
  }
  s->GetHealthCheckService()->SetServingStatus(true);
  server_ = std::move(s);
  port_ = port;
  return absl::OkStatus();
}

namespace {

// Whether the process is at (or within 16 of) its open-file limit: /proc/self/fd counted against
// RLIMIT_NOFILE's soft limit; true also when the directory cannot be opened for want of a
// descriptor. Then accept4() fails with EMFILE, which is what kills gRPC 1.51's listener.
bool AtFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return false;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return errno == EMFILE || errno == ENFILE;
  uint64_t n = 0;
  while (::readdir(d) != nullptr) ++n;
  ::closedir(d);
  return n + 16 >= static_cast<uint64_t>(rl.rlim_cur);
}

}  // namespace

void StepcastServer::WatchdogLoop() {
  const std::string host = options_.listen_address.substr(0, options_.listen_address.rfind(':'));
  const bool ipv6 = absl::StartsWith(host, "[") && host != "[::]";
  std::FILE* out = options_.log != nullptr ? options_.log : stderr;  // always logged (--quiet drops RPC lines only)
  int bad = 0;
  bool file_limit_seen = false;  // since the listener last accepted
  bool busy_logged = false;
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    cv_.wait_for(l, std::chrono::milliseconds(options_.watchdog_period_ms), [&] { return stopping_; });
    if (stopping_) break;
    bool dead;
    if (server_ == nullptr) {
      dead = true;  // a rebuild failed (still at the fd limit): try again
    } else {
      const int port = port_;
      l.unlock();
      // A poke: a live listener accepts it within milliseconds; a dead one leaves it queued.
      // Busy handlers (every gRPC thread in a handler) can also leave it queued: that is not
      // death, and rebuilding then only cancelled calls (review 2, N2). So a queue that does not
      // drain counts only when accept could have failed (the descriptor limit reached since the
      // listener last accepted) or when no handler was busy while it did not drain.
      if (AtFileLimit()) file_limit_seen = true;
      const int busy_before = service_->busy_handlers();
      const int fd = PokeListener(port, ipv6);
      const int poke_errno = errno;
      if (fd < 0 && (poke_errno == EMFILE || poke_errno == ENFILE)) file_limit_seen = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const int64_t backlog = ListenBacklog(port);
      const int busy_after = service_->busy_handlers();
      if (fd >= 0) ::close(fd);
      if (AtFileLimit()) file_limit_seen = true;
      l.lock();
      const bool stuck = backlog > 0 || (fd < 0 && (poke_errno == EMFILE || poke_errno == ENFILE));
      if (!stuck) {
        bad = 0;
        file_limit_seen = false;
        busy_logged = false;
        continue;
      }
      const bool idle = busy_before == 0 && busy_after == 0;
      dead = file_limit_seen || idle;
      if (!dead) {
        bad = 0;
        ++busy_checks_;
        if (!busy_logged) {
          std::fprintf(out, "stepcast serve: listener on port %d left a connection waiting 200 ms while handlers were "
                            "busy and no descriptor shortage was seen: busy, not dead; not rebuilding\n", port);
          std::fflush(out);
          busy_logged = true;
        }
        continue;
      }
    }
    bad = dead ? bad + 1 : 0;
    if (bad < 3 || stopping_) continue;
    // Still at the descriptor limit: a listener built now would die the same way; rebuild at the
    // first check after descriptors free up.
    if (AtFileLimit()) continue;
    bad = 0;
    const bool limit = file_limit_seen;
    // Rebuild without cancelling anything: a new server on the same port first (gRPC sets
    // SO_REUSEPORT on Linux, so both may listen), then the old one shut down on a thread of its
    // own, its in-flight calls given rebuild_grace_ms; never a Wait() under mu_.
    std::unique_ptr<grpc::Server> old = std::move(server_);
    const absl::Status st = StartGrpc(absl::StrCat(host, ":", port_));
    if (!st.ok() && old != nullptr) {
      server_ = std::move(old);  // keep serving the connections it has; retry at the next check
    } else if (old != nullptr) {
      const auto grace = std::chrono::milliseconds(options_.rebuild_grace_ms);
      grpc::Server* raw = old.release();
      reapers_.emplace_back([raw, grace] {
        std::unique_ptr<grpc::Server> s(raw);
        s->Shutdown(std::chrono::system_clock::now() + grace);
        s->Wait();
      });
    }
    if (st.ok()) {
      ++restarts_;
      file_limit_seen = false;
    }
    std::fprintf(out, "stepcast serve: listener on port %d was not accepting connections%s; %s\n", port_,
                 limit ? " (the descriptor limit was reached)" : " (no handler busy)",
                 st.ok() ? "rebuilt it (calls in flight on the old one finish there)"
                         : absl::StrCat("rebuilding failed: ", st.message(), "; will retry").c_str());
    std::fflush(out);
  }
}

StepcastServer::~StepcastServer() {
  Shutdown(std::chrono::milliseconds(0));
  Wait();
}

void StepcastServer::Shutdown(std::chrono::milliseconds grace) {
  std::call_once(shutdown_once_, [&] {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();  // the watchdog never calls Shutdown
    std::unique_ptr<grpc::Server> server;
    {
      std::lock_guard<std::mutex> l(mu_);
      server = std::move(server_);
    }
    if (server != nullptr) {
      if (auto* health = server->GetHealthCheckService()) health->SetServingStatus(false);
      // Lame duck: calls already queued for a handler thread are answered rather than cancelled
      // (review M9); health-checking clients move away meanwhile.
      auto lame = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(options_.lame_duck_ms), grace / 2);
      if (lame.count() > 0) std::this_thread::sleep_for(lame);
      // Then new calls are refused UNAVAILABLE (retryable) and searches stop, so that few calls
      // are still queued when gRPC's shutdown cancels what is queued (review 2, N16).
      if (service_ != nullptr) service_->BeginRefusing();
      const auto refuse = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(options_.refuse_ms),
                                                              (grace - lame) / 2);
      if (refuse.count() > 0) std::this_thread::sleep_for(refuse);
      server->Shutdown(std::chrono::system_clock::now() + (grace - lame - refuse));
      server->Wait();
    } else if (service_ != nullptr) {
      service_->BeginRefusing();
    }
    for (std::thread& t : reapers_) {
      if (t.joinable()) t.join();
    }
    if (service_ != nullptr) {
      service_->JoinPool();    // every search answered
      service_->StopWriter();  // queued writes finish and answer
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
  });
}

void StepcastServer::Wait() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return stopped_; });
}

}  // namespace stepcast
