// Synthetic Kineto traces for the trace tests: events written the way torch.profiler writes
// them (ph X, cat, name, pid, tid, ts/dur in microseconds, args), so a test states its timeline
// in a few lines and checks the figures by hand.
#ifndef STEPCAST_TESTS_TRACE_BUILDER_H_
#define STEPCAST_TESTS_TRACE_BUILDER_H_

#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace stepcast::testing {

class TraceBuilder {
 public:
  // A CPU range: ProfilerStep#N, a user annotation (cat user_annotation) on thread `tid`.
  TraceBuilder& Range(const std::string& name, double ts_us, double dur_us, int tid = 1,
                      const std::string& cat = "user_annotation") {
    Add("{\"ph\":\"X\",\"cat\":\"" + cat + "\",\"name\":\"" + name + "\",\"pid\":1,\"tid\":" + std::to_string(tid) +
        ",\"ts\":" + Num(ts_us) + ",\"dur\":" + Num(dur_us) + "}");
    return *this;
  }
  // A kernel launched at `launch_us` on thread `tid` (launch_us < 0: no launch event and no
  // correlation), running [ts_us, ts_us + dur_us) on `stream`, with Kineto's grid/block args.
  // `extra_args`: more args members, written as JSON ("\"Process Group Name\":\"1\"").
  TraceBuilder& Kernel(const std::string& name, double launch_us, double ts_us, double dur_us, int stream,
                       int tid = 1, const std::string& grid = "[1,1,1]", const std::string& cat = "kernel",
                       const std::string& extra_args = "") {
    std::string corr;
    if (launch_us >= 0) {
      const int64_t c = next_corr_++;
      corr = ",\"correlation\":" + std::to_string(c);
      Add("{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":" +
          std::to_string(tid) + ",\"ts\":" + Num(launch_us) + ",\"dur\":1,\"args\":{\"correlation\":" +
          std::to_string(c) + "}}");
    }
    Add("{\"ph\":\"X\",\"cat\":\"" + cat + "\",\"name\":\"" + name + "\",\"pid\":0,\"tid\":" + std::to_string(stream) +
        ",\"ts\":" + Num(ts_us) + ",\"dur\":" + Num(dur_us) + ",\"args\":{\"device\":0,\"stream\":" +
        std::to_string(stream) + corr + ",\"grid\":" + grid + ",\"block\":[128,1,1]" +
        (extra_args.empty() ? "" : "," + extra_args) + "}}");
    return *this;
  }
  // distributedInfo {rank, world_size} (as torch.distributed runs write it); none by default.
  TraceBuilder& Rank(int rank, int world_size) {
    dist_ = ",\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":" + std::to_string(rank) +
            ",\"world_size\":" + std::to_string(world_size) + "}";
    return *this;
  }
  std::string Json(const std::string& gpu = "NVIDIA H100 80GB HBM3") const {
    return "{\"schemaVersion\":1,\"deviceProperties\":[{\"id\":0,\"name\":\"" + gpu + "\"}]" + dist_ +
           ",\"traceEvents\":[\n" + events_ + "\n]}";
  }
  // Written under the test's temporary directory; gzip when the name ends in .gz.
  std::string Write(const std::string& name) const { return WriteText(name, Json()); }

  static std::string WriteText(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + name;
    if (name.size() > 3 && name.substr(name.size() - 3) == ".gz") {
      gzFile f = gzopen(path.c_str(), "wb");
      gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
      gzclose(f);
    } else {
      std::ofstream(path, std::ios::binary) << text;
    }
    return path;
  }

 private:
  static std::string Num(double v) {
    char b[64];
    std::snprintf(b, sizeof(b), "%.3f", v);
    return b;
  }
  void Add(const std::string& e) { events_ += (events_.empty() ? "" : ",\n") + e; }
  std::string events_, dist_;
  int64_t next_corr_ = 1;
};

}  // namespace stepcast::testing

#endif  // STEPCAST_TESTS_TRACE_BUILDER_H_
