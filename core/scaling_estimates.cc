#include "core/scaling_estimates.h"

#include <cmath>
#include <numbers>

namespace stepcast::estimates {

double ChinchillaDatasetTokens(double n) { return 20.0 * n; }
double TrainingFlops(double n, double d) { return 6.0 * n * d; }
double CriticalBatchSizeTokens(double c) { return 0.2920 * std::pow(c, 0.3271); }
double TrainingSteps(double d, double b) { return std::floor(d / b); }
double FlopsPerStep(double n, double b) { return 6.0 * b * n; }
double GpusForStepTime(double f, double u, double t) { return f / (u * t); }
double StepTimeSeconds(double f, double g, double u) { return f / (g * u); }
double TrainingCostUsd(double g, double usd, double t, double steps) {
  return g * usd * (t / 3600.0) * steps;
}
double CommTimeGivenVolume(double v, double bw, double sites) { return v / (bw / sites); }
double DilocoCommTime(double per_step, double steps, double k) { return per_step * steps / k; }
double GreatCircleDistanceKm(double la1, double lo1, double la2, double lo2) {
  constexpr double kR = 6371.009;
  const double d2r = std::numbers::pi / 180.0;
  const double p1 = la1 * d2r, p2 = la2 * d2r, dl = (lo2 - lo1) * d2r;
  // Vincenty form of the great-circle central angle (geopy great_circle).
  const double num = std::hypot(std::cos(p2) * std::sin(dl),
                                std::cos(p1) * std::sin(p2) - std::sin(p1) * std::cos(p2) * std::cos(dl));
  const double den = std::sin(p1) * std::sin(p2) + std::cos(p1) * std::cos(p2) * std::cos(dl);
  return kR * std::atan2(num, den);
}
double LightSpeedLatencySeconds(double km) { return km * 1000.0 / 299792458.0; }
double ElectricityJoules(double w, double s, double g) { return w * s * g; }

double ApproxParams(double L, double H, double V) { return 12 * L * H * H + 2 * V * H; }
double StaticMemoryBytes(double psi) { return 16 * psi; }
double LayerActivationBytesApprox(double B, double S, double H, double A) {
  return B * S * H * (34 + 5 * A * S / H);
}
double CheckpointedActivationBytes(double L, double k, double per_layer) {
  return (L / k + k) * per_layer;
}
double StepTimeAtMfu(double psi, double tokens, double mfu, double peak, double gpus) {
  return 6 * psi * tokens / (mfu * peak * gpus);
}
double RingAllReduceSeconds(double bytes, double P, double bw) { return 2 * (P - 1) / P * bytes / bw; }
double BubbleFraction(double p, double m) { return (p - 1) / (m + p - 1); }
double MfuFromThroughput(double tps, double n, double g, double peak) { return tps * 6 * n / (g * peak); }
double GpusForBudget(double budget, double usd, double days) { return budget / (usd * days * 24); }
double RequiredMfu(double n, double d, double days, double g, double peak) {
  return 6 * n * d / (days * 86400 * g * peak);
}

}  // namespace stepcast::estimates
