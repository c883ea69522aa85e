// The MPI module of stepcast-calibrate (libstepcast_calibrate_mpi.so), loaded at run time by
// LoadMpiCommunicator (calibrate/communicator.h) so that the tool itself does not link libmpi.
// Every collective call is non-blocking (MPI-3) and polled against the timeout; a rank that
// waits longer prints what it waited for and calls MPI_Abort, which ends the whole job.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "calibrate/communicator.h"
#include "calibrate/mpi_backend.h"
#include "calibrate/mpi_layout.h"

namespace stepcast::calibrate {
namespace {

constexpr int kTimeoutExit = 6;

class MpiCommunicator final : public Communicator {
 public:
  // Over `comm` (MPI_COMM_WORLD, or a host's ranks from SplitByHost, which this object then frees).
  MpiCommunicator(MPI_Comm comm, double timeout_s, int thread_level, bool owns)
      : comm_(comm), owns_(owns), timeout_s_(timeout_s), thread_level_(thread_level) {
    main_thread_ = std::this_thread::get_id();
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    char h[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(h, &len);
    host_ = std::string(h, len);
    // Test hook (tests/calibrate_tool_test.sh): STEPCAST_CALIBRATE_TEST_HOSTS=N spreads the world's
    // ranks over N made-up hosts in blocks (as mpirun -N fills nodes), so the multi-node path runs
    // on one machine. Never set in a real run.
    if (const char* fake = std::getenv("STEPCAST_CALIBRATE_TEST_HOSTS"); fake != nullptr && comm_ == MPI_COMM_WORLD) {
      const int n = std::max(1, std::atoi(fake));
      host_ = absl::StrCat(host_, "#", static_cast<long long>(rank_) * n / size_);
      std::snprintf(h, sizeof(h), "%s", host_.c_str());
    }
    // Hosts, this rank's index on its host and their number from every rank's processor name,
    // gathered non-blocking against the deadline (gpu code review 2, N14: MPI_Comm_split_type and
    // MPI_Allreduce here blocked without one when a rank never arrived).
    std::vector<char> names(static_cast<size_t>(size_) * MPI_MAX_PROCESSOR_NAME, '\0');
    MPI_Request r;
    MPI_Iallgather(h, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm_, &r);
    (void)Wait(r, "the start-up exchange of host names");
    std::vector<std::string> hosts;
    for (int i = 0; i < size_; ++i) {
      const char* n = names.data() + static_cast<size_t>(i) * MPI_MAX_PROCESSOR_NAME;
      hosts.emplace_back(n, strnlen(n, MPI_MAX_PROCESSOR_NAME));
    }
    const HostLayout layout = LayoutOfHosts(hosts, rank_);
    local_rank_ = layout.local_rank;
    local_size_ = layout.local_size;
    hosts_ = layout.hosts;
    std::vector<std::string> distinct = hosts;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    host_index_ = static_cast<int>(std::lower_bound(distinct.begin(), distinct.end(), host_) - distinct.begin());
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    MPI_Get_library_version(version, &len);
    std::string v(version, len);
    name_ = "MPI (" + v.substr(0, v.find(',')) + ")";
    if (thread_level_ < MPI_THREAD_MULTIPLE) {
      name_ += absl::StrCat(" [thread level ", MpiThreadLevelName(thread_level_),
                            ": a stalled rank ends itself, the launcher the job]");
    }
  }
  ~MpiCommunicator() override {
    if (owns_) MPI_Comm_free(&comm_);
  }
  // MPI_Comm_split by host (color: the host's index among the sorted names; key: the rank, so
  // the order is kept). MPI_Comm_split has no non-blocking form: every rank calls it at the same
  // point of the flow, after the deadline-bounded start-up exchange; a rank that dies in between
  // is ended by the flow's watchdog (3 x --timeout-s).
  absl::StatusOr<std::unique_ptr<Communicator>> SplitByHost() override {
    MPI_Comm sub = MPI_COMM_NULL;
    if (MPI_Comm_split(comm_, host_index_, rank_, &sub) != MPI_SUCCESS || sub == MPI_COMM_NULL) {
      return absl::InternalError("MPI_Comm_split by host failed");
    }
    auto c = std::make_unique<MpiCommunicator>(sub, timeout_s_, thread_level_, true);
    c->host_ = host_;  // the test hook's made-up name, kept
    return std::unique_ptr<Communicator>(std::move(c));
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  int hosts() const override { return hosts_; }
  std::string host() const override { return host_; }
  std::string name() const override { return name_; }

  absl::Status Barrier() override {
    MPI_Request r;
    MPI_Ibarrier(comm_, &r);
    return Wait(r, "a barrier");
  }
  absl::Status AllreduceMax(std::vector<double>& v) override { return Allreduce(v, MPI_MAX, "an all-reduce (max)"); }
  absl::Status AllreduceSum(std::vector<double>& v) override { return Allreduce(v, MPI_SUM, "an all-reduce (sum)"); }

  absl::StatusOr<std::vector<std::string>> Gather(const std::string& mine, int root) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(rank_ == root ? size_ : 0);
    MPI_Request r;
    MPI_Igather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, comm_, &r);
    if (absl::Status s = Wait(r, "a gather (sizes)"); !s.ok()) return s;
    std::vector<int> displ(lens.size(), 0);
    int total = 0;
    for (size_t i = 0; i < lens.size(); ++i) {
      displ[i] = total;
      total += lens[i];
    }
    std::string all(total, '\0');
    MPI_Igatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displ.data(), MPI_CHAR, root, comm_, &r);
    if (absl::Status s = Wait(r, "a gather (data)"); !s.ok()) return s;
    std::vector<std::string> out;
    for (size_t i = 0; i < lens.size(); ++i) out.push_back(all.substr(displ[i], lens[i]));
    return out;
  }

  absl::Status Broadcast(std::string& bytes, int root) override {
    int len = static_cast<int>(bytes.size());
    MPI_Request r;
    MPI_Ibcast(&len, 1, MPI_INT, root, comm_, &r);
    if (absl::Status s = Wait(r, "a broadcast (size)"); !s.ok()) return s;
    bytes.resize(len);
    MPI_Ibcast(bytes.data(), len, MPI_CHAR, root, comm_, &r);
    return Wait(r, "a broadcast (data)");
  }

  [[noreturn]] void Abort(int code, const std::string& why) override {
    // MPI_Abort from the watchdog thread needs MPI_THREAD_MULTIPLE (MPI 4.0 section 11.6: below
    // it only the main thread, or one thread at a time, may call MPI). Without it the rank ends
    // itself; the launcher (mpirun, srun) ends the job when a rank exits non-zero without
    // MPI_Finalize, and the other ranks' own deadlines end them otherwise.
    const bool may_call_mpi = MpiAbortAllowed(thread_level_, std::this_thread::get_id() == main_thread_);
    std::fprintf(stderr, "stepcast-calibrate: rank %d on %s: aborting the job%s: %s\n", rank_, host_.c_str(),
                 may_call_mpi ? "" : " (this rank exits: MPI_Abort is not allowed from this thread)", why.c_str());
    std::fflush(stderr);
    if (may_call_mpi) MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
  }
  void Finalize() override {
    if (owns_) return;  // a host's communicator: the world's Finalize ends MPI
    MPI_Finalize();
  }
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> HostCollectives(double max_bytes) override {
    return MakeMpiBackend(max_bytes, hosts_ > 1 ? Scope::kInterNode : Scope::kIntraNode);
  }

 private:
  absl::Status Allreduce(std::vector<double>& v, MPI_Op op, const char* what) {
    std::vector<double> out(v.size());
    MPI_Request r;
    MPI_Iallreduce(v.data(), out.data(), static_cast<int>(v.size()), MPI_DOUBLE, op, comm_, &r);
    if (absl::Status s = Wait(r, what); !s.ok()) return s;
    v = std::move(out);
    return absl::OkStatus();
  }

  // Polls `r` until it completes or the timeout passes; then aborts the job.
  absl::Status Wait(MPI_Request& r, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    int done = 0;
    for (int spins = 0;; ++spins) {
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      if (done) return absl::OkStatus();
      if (std::chrono::steady_clock::now() > deadline) {
        Abort(kTimeoutExit, absl::StrCat("the other ranks did not arrive at ", what, " within ", timeout_s_,
                                         " s (2 x --timeout-s): one of them failed or hangs"));
      }
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  MPI_Comm comm_ = MPI_COMM_WORLD;
  bool owns_ = false;
  int host_index_ = 0;
  double timeout_s_;
  int thread_level_ = MPI_THREAD_MULTIPLE;
  std::thread::id main_thread_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, hosts_ = 1;
  std::string host_, name_;
};

}  // namespace
}  // namespace stepcast::calibrate

extern "C" __attribute__((visibility("default"))) stepcast::calibrate::Communicator* stepcast_calibrate_mpi_create(
    int* argc, char*** argv, double timeout_s, char* error, int error_len) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      std::snprintf(error, error_len, "MPI_Init_thread failed");
      return nullptr;
    }
  } else {
    MPI_Query_thread(&provided);
  }
  // The level the library gives is checked, not assumed (gpu code review 2, N14): the watchdog
  // thread's abort depends on it (MpiCommunicator::Abort).
  return new stepcast::calibrate::MpiCommunicator(MPI_COMM_WORLD, timeout_s, provided, false);
}
