#ifndef STEPCAST_CALIBRATE_ITERATIONS_H_
#define STEPCAST_CALIBRATE_ITERATIONS_H_

namespace stepcast::calibrate {

// Iteration counts. A GEMM runs at most `iters` timed and `warmup` untimed iterations, fewer
// when one run is long: timed runs stop at `budget_s` (never fewer than `min_iters`) and warm-up
// at `warmup_budget_s` (never fewer than 2), so a 16384-token MLP GEMM (~90 ms on an H100) costs
// about a second and the full sweep stays near a minute per GPU (docs/CALIBRATION.md).
struct BenchOptions {
  int warmup = 10;
  int iters = 30;
  int min_iters = 5;
  double budget_s = 0.15;
  double warmup_budget_s = 0.05;
};
// Timed and warm-up iteration counts for a run of `run_s` seconds under `o`.
int TimedIterations(const BenchOptions& o, double run_s);
int WarmupIterations(const BenchOptions& o, double run_s);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_ITERATIONS_H_
