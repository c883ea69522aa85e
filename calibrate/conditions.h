// File: calibrate/conditions.h
//
// The conditions a calibration ran under: host, time, command line, GPU names, driver, CUDA,
// cuBLAS and NCCL versions, and per-GPU clocks and temperature from NVML, which is loaded at run
// time (dlopen of libnvidia-ml.so.1) so the tool starts where NVML is absent.
#ifndef STEPCAST_CALIBRATE_CONDITIONS_H_
#define STEPCAST_CALIBRATE_CONDITIONS_H_

#include <string>
#include <vector>

#include "stepcast/v1/calibration.pb.h"

namespace stepcast::calibrate {

v1::CalibrationConditions Conditions(int argc, char** argv, const std::vector<int>& gpus);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_CONDITIONS_H_
