#include "calibrate/iterations.h"

#include <algorithm>

namespace stepcast::calibrate {

int TimedIterations(const BenchOptions& o, double run_s) {
  if (run_s <= 0) return o.iters;
  return static_cast<int>(std::clamp(o.budget_s / run_s, 1.0 * std::min(o.min_iters, o.iters), 1.0 * o.iters));
}
int WarmupIterations(const BenchOptions& o, double run_s) {
  if (run_s <= 0) return o.warmup;
  return static_cast<int>(std::clamp(o.warmup_budget_s / run_s, std::min(2.0, 1.0 * o.warmup), 1.0 * o.warmup));
}

}  // namespace stepcast::calibrate
