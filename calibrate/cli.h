// File: calibrate/cli.h
//
// The command line of stepcast-calibrate, over any GpuSystem: calibrate/main.cc passes the
// build's (CUDA's, or the one that says there is none), the CPU tests a fake
// (tests/calibrate_fake_tool.cc), so that the binary's whole path runs in the tests, under mpirun
// too. Options: docs/CALIBRATION.md.
#ifndef STEPCAST_CALIBRATE_CLI_H_
#define STEPCAST_CALIBRATE_CLI_H_

#include <functional>
#include <memory>

#include "calibrate/gpu_system.h"

namespace stepcast::calibrate {

// Parses argv; `import` builds a profile from logs; otherwise measures with make_gpus()'s system.
// Returns the exit code (calibrate/flow.h).
int CalibrateMain(int argc, char** argv, const std::function<std::unique_ptr<GpuSystem>()>& make_gpus);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_CLI_H_
