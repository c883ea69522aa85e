#include "calibrate/communicator.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "calibrate/collective_harness.h"

namespace stepcast::calibrate {
namespace {

class SingleProcess final : public Communicator {
 public:
  SingleProcess() {
    char h[256] = {0};
    gethostname(h, sizeof(h) - 1);
    host_ = h;
  }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  int hosts() const override { return 1; }
  std::string host() const override { return host_; }
  std::string name() const override { return "single process"; }
  absl::Status Barrier() override { return absl::OkStatus(); }
  absl::Status AllreduceMax(std::vector<double>&) override { return absl::OkStatus(); }
  absl::Status AllreduceSum(std::vector<double>&) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<std::string>> Gather(const std::string& mine, int) override {
    return std::vector<std::string>{mine};
  }
  absl::Status Broadcast(std::string&, int) override { return absl::OkStatus(); }
  [[noreturn]] void Abort(int code, const std::string& why) override {
    std::fprintf(stderr, "stepcast-calibrate: aborting: %s\n", why.c_str());
    std::fflush(stderr);
    _exit(code);
  }
  void Finalize() override {}
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> HostCollectives(double) override {
    return absl::FailedPreconditionError("--backend mpi runs MPI's collectives between ranks: start it under mpirun");
  }

 private:
  std::string host_;
};

std::string ExeDir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

}  // namespace

std::unique_ptr<Communicator> MakeSingleProcessCommunicator() { return std::make_unique<SingleProcess>(); }

absl::StatusOr<std::unique_ptr<Communicator>> LoadMpiCommunicator(int* argc, char*** argv, double timeout_s) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("STEPCAST_CALIBRATE_MPI_MODULE")) candidates.push_back(env);
  const std::string dir = ExeDir();
  candidates.push_back(dir + "/../lib/libstepcast_calibrate_mpi.so");
  candidates.push_back(dir + "/libstepcast_calibrate_mpi.so");
  std::vector<std::string> errors;
  for (const std::string& path : candidates) {
    if (!std::filesystem::exists(path)) {
      errors.push_back(absl::StrCat(path, ": not found"));
      continue;
    }
    // RTLD_GLOBAL: Open MPI's own components (dlopen'ed by libmpi) resolve libmpi's symbols.
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      errors.push_back(absl::StrCat(path, ": ", dlerror()));
      continue;
    }
    auto create = reinterpret_cast<StepcastMpiCreateFn>(dlsym(lib, kMpiCreateSymbol));
    if (create == nullptr) {
      errors.push_back(absl::StrCat(path, ": no ", kMpiCreateSymbol));
      continue;
    }
    char err[512] = {0};
    Communicator* c = create(argc, argv, timeout_s, err, sizeof(err));
    if (c == nullptr) return absl::FailedPreconditionError(absl::StrCat("MPI: ", err));
    return std::unique_ptr<Communicator>(c);
  }
  return absl::FailedPreconditionError(absl::StrCat("--mpi needs the MPI module (built when MPI is found): ",
                                                    absl::StrJoin(errors, "; ")));
}

absl::Status AgreeOnStatus(Communicator& comm, const absl::Status& mine) {
  std::vector<double> flag = {mine.ok() ? 0.0 : 1.0};
  if (absl::Status s = comm.AllreduceMax(flag); !s.ok()) return s;
  if (flag[0] == 0) return absl::OkStatus();
  // Someone failed: every rank's message to rank 0, the combined verdict back to all.
  const std::string me = mine.ok() ? std::string() : absl::StrCat(static_cast<int>(mine.code()), "\t", mine.message());
  absl::StatusOr<std::vector<std::string>> all = comm.Gather(me, 0);
  if (!all.ok()) return all.status();
  std::string verdict;
  if (comm.rank() == 0) {
    std::vector<std::string> parts;
    int code = 0;
    for (size_t r = 0; r < all->size(); ++r) {
      const std::string& m = (*all)[r];
      if (m.empty()) continue;
      const size_t tab = m.find('\t');
      if (code == 0) code = std::atoi(m.substr(0, tab).c_str());
      parts.push_back(comm.size() > 1 ? absl::StrCat("rank ", r, ": ", m.substr(tab + 1)) : m.substr(tab + 1));
    }
    verdict = absl::StrCat(code, "\t", absl::StrJoin(parts, "; "));
  }
  if (absl::Status s = comm.Broadcast(verdict, 0); !s.ok()) return s;
  const size_t tab = verdict.find('\t');
  const int code = std::atoi(verdict.substr(0, tab).c_str());
  return absl::Status(static_cast<absl::StatusCode>(code == 0 ? 2 : code), verdict.substr(tab + 1));
}

absl::StatusOr<int> AllreduceMaxInt(Communicator& comm, int mine) {
  std::vector<double> v = {static_cast<double>(mine)};
  if (absl::Status s = comm.AllreduceMax(v); !s.ok()) return s;
  return static_cast<int>(v[0]);
}

}  // namespace stepcast::calibrate
