#include "plugin/compare.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stepcast {

v1::StepBreakdown MeasuredBreakdown(const v1::StepMeasurement& s) {
  v1::StepBreakdown b;
  b.set_gemm_s(s.busy().gemm_s());
  b.set_attention_s(s.busy().attention_s());
  b.set_elementwise_s(s.busy().elementwise_s() + s.busy().memory_copy_s());
  b.set_exposed_communication_s(s.exposed_communication_s());
  b.set_idle_s(s.idle_s());
  return b;
}

Comparison Compare(const v1::Prediction& p, const v1::StepBreakdown& m, double measured_step_s) {
  Comparison c;
  const v1::StepBreakdown& b = p.breakdown();
  c.predicted_step_s = p.step_time_s();
  c.measured_step_s = measured_step_s;
  c.predicted_mfu = p.mfu();
  c.measured_mfu = measured_step_s > 0 ? p.mfu() * p.step_time_s() / measured_step_s : 0;
  const double pred[4] = {b.gemm_s() + b.attention_s() + b.recompute_s(), b.elementwise_s() + b.optimizer_s(),
                          b.tp_comm_s() + b.cp_comm_s() + b.ep_comm_s() + b.pp_comm_s() + b.dp_comm_s(),
                          b.pipeline_bubble_s()};
  const double meas[4] = {m.gemm_s() + m.attention_s(), m.elementwise_s(), m.exposed_communication_s(), m.idle_s()};
  const char* names[5] = {"compute", "memory_bound", "communication", "bubble_or_idle", "other"};
  double pred_sum = 0, meas_sum = 0;
  for (int i = 0; i < 4; ++i) {
    pred_sum += pred[i];
    meas_sum += meas[i];
  }
  int largest = 0;
  double largest_abs = -1;
  for (int i = 0; i < 5; ++i) {
    v1::CategoryComparison r;
    r.set_category(names[i]);
    r.set_predicted_s(i < 4 ? pred[i] : c.predicted_step_s - pred_sum);
    r.set_measured_s(i < 4 ? meas[i] : measured_step_s - meas_sum);
    r.set_difference_s(r.measured_s() - r.predicted_s());
    if (std::fabs(r.difference_s()) > largest_abs) {
      largest_abs = std::fabs(r.difference_s());
      largest = i;
    }
    c.rows.push_back(std::move(r));
  }
  const double gap = measured_step_s - c.predicted_step_s;
  c.largest_difference = absl::StrFormat("%s: %+.3f s of the %+.3f s step-time difference%s", names[largest],
                                         c.rows[largest].difference_s(), gap,
                                         std::fabs(gap) > 1e-12
                                             ? absl::StrFormat(" (%.0f%%)", 100 * c.rows[largest].difference_s() / gap)
                                             : "");
  return c;
}

std::string FormatComparison(const Comparison& c, const std::string& title) {
  std::string o = absl::StrCat("stepcast compare: ", title, "\n");
  absl::StrAppendFormat(&o, "  %-22s %12s %12s %12s\n", "", "predicted", "measured", "difference");
  absl::StrAppendFormat(&o, "  %-22s %10.4f s %10.4f s %+10.4f s\n", "step time", c.predicted_step_s,
                        c.measured_step_s, c.measured_step_s - c.predicted_step_s);
  for (const auto& r : c.rows) {
    absl::StrAppendFormat(&o, "  %-22s %10.4f s %10.4f s %+10.4f s\n", r.category(), r.predicted_s(), r.measured_s(),
                          r.difference_s());
  }
  absl::StrAppendFormat(&o, "  %-22s %10.1f %% %10.1f %% %+10.1f pp\n", "MFU", 100 * c.predicted_mfu,
                        100 * c.measured_mfu, 100 * (c.measured_mfu - c.predicted_mfu));
  absl::StrAppendFormat(&o, "  largest difference: %s\n", c.largest_difference);
  return o;
}

}  // namespace stepcast
