// stepcast-calibrate's command line over the fake GPU system of tests/calibrate_fakes.h, so the
// tool's whole path (options, the MPI module, gathering, exit codes, files) runs in the CPU tests,
// under `mpirun -np 2` too (tests/calibrate_tool_test.sh). The fake is configured from the
// environment: STEPCAST_FAKE_GPUS (GPUs per rank, default 2) and STEPCAST_FAKE_SLOW="RANK:INDEX:SCALE"
// (that GPU's GEMM rate x SCALE); the rank is Open MPI's OMPI_COMM_WORLD_RANK (0 alone).
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "calibrate/cli.h"
#include "tests/calibrate_fakes.h"

int main(int argc, char** argv) {
  using namespace stepcast::calibrate;
  testing::FakeConfig c;
  c.gpus = 2;
  if (const char* g = std::getenv("STEPCAST_FAKE_GPUS")) absl::SimpleAtoi(g, &c.gpus);
  int rank = 0;
  if (const char* r = std::getenv("OMPI_COMM_WORLD_RANK")) absl::SimpleAtoi(r, &rank);
  if (const char* s = std::getenv("STEPCAST_FAKE_SLOW")) {
    std::vector<std::string> p = absl::StrSplit(s, ':');
    int r = -1, i = -1;
    double scale = 1;
    if (p.size() == 3 && absl::SimpleAtoi(p[0], &r) && absl::SimpleAtoi(p[1], &i) && absl::SimpleAtod(p[2], &scale) &&
        r == rank) {
      c.gemm_scale[i] = scale;
    }
  }
  return CalibrateMain(argc, argv, [c] { return std::make_unique<testing::FakeGpuSystem>(c); });
}
