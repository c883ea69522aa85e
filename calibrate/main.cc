// stepcast-calibrate: measure the usable rates of the actual GPUs and write a rate profile, or
// build one from the benchmark logs a cluster already has (`import`). calibrate/cli.h.
#include "calibrate/cli.h"

int main(int argc, char** argv) {
  return stepcast::calibrate::CalibrateMain(argc, argv, stepcast::calibrate::MakeGpuSystem);
}
