// File: calibrate/cupti_timer.h
//
// Kernel durations from CUPTI activity records (CONCURRENT_KERNEL, which does not serialise
// kernels), to cross-check CUDA-event timings of the GEMM and HBM benchmarks. One active window
// at a time; disabled (with the reason) when CUPTI cannot be used, e.g. another profiler holds it.
#ifndef STEPCAST_CALIBRATE_CUPTI_TIMER_H_
#define STEPCAST_CALIBRATE_CUPTI_TIMER_H_

#include <string>
#include <vector>

namespace stepcast::calibrate {

class CuptiTimer {
 public:
  CuptiTimer();
  bool enabled() const { return enabled_; }
  const std::string& why_disabled() const { return why_; }
  // Collects kernel durations (seconds) from Begin() to End(), skipping kernels whose name
  // contains `skip` (e.g. the L2 flush). End() synchronises the device.
  void Begin();
  std::vector<double> End(const std::string& skip);

 private:
  bool enabled_ = false;
  std::string why_;
};

// Relative disagreement of two medians, |a - b| / b.
double Disagreement(double cupti_median_s, double event_median_s);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_CUPTI_TIMER_H_
