#include "plugin/compare.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stepcast {

v1::StepBreakdown MeasuredBreakdown(const v1::StepMeasurement& s) {
  v1::StepBreakdown b;
  b.set_gemm_s(s.busy().gemm_s() + s.busy().convolution_s());
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

namespace {

double Exposed(const v1::StepMeasurement& m, std::initializer_list<const char*> colls, std::string* dominant) {
  double sum = 0, best = -1;
  for (const char* c : colls) {
    auto it = m.exposed_communication_by_collective_s().find(c);
    const double v = it == m.exposed_communication_by_collective_s().end() ? 0.0 : it->second;
    sum += v;
    if (v > best) {
      best = v;
      *dominant = c;
    }
  }
  return sum;
}

std::string CollectiveCause(const std::string& c) {
  if (c == "all_gather") return "parameter all-gather not overlapped (ZeRO-3 / FSDP prefetch, or SP all-gather)";
  if (c == "reduce_scatter") return "gradient reduce-scatter not overlapped with the backward pass";
  if (c == "all_reduce") return "all-reduce not overlapped (DP gradient buckets, or TP all-reduce on the critical path)";
  if (c == "all_to_all") return "MoE token all-to-all (dispatch / combine) not overlapped";
  if (c == "send_recv") return "pipeline send/recv waiting on the neighbouring stage";
  return "collectives the model does not predict (broadcast, barriers)";
}

}  // namespace

v1::Comparison CompareTerms(const v1::Prediction& p, const v1::StepMeasurement& m, const std::string& title,
                            const std::string& measured_source) {
  v1::Comparison c;
  c.set_title(title);
  c.set_measured_source(measured_source);
  c.set_predicted_step_time_s(p.step_time_s());
  c.set_measured_step_time_s(m.step_time_s());
  c.set_predicted_mfu(p.mfu());
  c.set_measured_mfu(m.step_time_s() > 0 ? p.mfu() * p.step_time_s() / m.step_time_s() : 0);
  if (c.measured_mfu() > 1.0) {
    c.add_warnings(absl::StrFormat("measured MFU %.0f%% is above 100%%: the measurement is not a run of this job "
                                   "(or its GPU count differs from the prediction's %d)",
                                   100 * c.measured_mfu(), p.gpu_count()));
  } else if (m.step_time_s() > 0 && p.step_time_s() > 0 &&
             (m.step_time_s() > 10 * p.step_time_s() || p.step_time_s() > 10 * m.step_time_s())) {
    c.add_warnings("measured and predicted step times are more than 10x apart: check that they are the same job");
  }
  const v1::StepBreakdown& b = p.breakdown();
  const v1::CategoryTimes& busy = m.busy();
  std::string d_tpdp, d_ep, d_pp, d_other;
  const double tpdp = Exposed(m, {"all_reduce", "all_gather", "reduce_scatter"}, &d_tpdp);
  const double ep = Exposed(m, {"all_to_all"}, &d_ep);
  const double pp = Exposed(m, {"send_recv"}, &d_pp);
  const double other = Exposed(m, {"broadcast", "other"}, &d_other);
  struct Term {
    std::string name;
    double predicted, measured;
    std::string more, less;  // cause when measured > predicted, and when below
  };
  const std::vector<Term> terms = {
      {"gemm", b.gemm_s() + b.recompute_s(), busy.gemm_s(),
       "GEMMs below the calibrated rate (shapes, dtype, clocks) or GEMM work the model does not count",
       "GEMMs faster than the calibrated rate, or less GEMM work (recompute off?)"},
      {"attention", b.attention_s(), busy.attention_s(), "attention kernels slower than modelled (not flash? long sequences?)",
       "attention faster than modelled"},
      {"convolution", 0, busy.convolution_s(), "convolutions, which the LLM model does not predict", ""},
      {"elementwise", b.elementwise_s() + b.optimizer_s(), busy.elementwise_s() + busy.memory_copy_s(),
       "memory-bound kernels (norms, activations, casts, copies, optimizer) slower or more than modelled (unfused?)",
       "memory-bound kernels faster or fewer than modelled (fused?)"},
      {"exposed all_reduce/all_gather/reduce_scatter (TP, DP)", b.tp_comm_s() + b.dp_comm_s(), tpdp,
       d_tpdp.empty() ? "" : CollectiveCause(d_tpdp), "more of TP/DP communication hidden than modelled"},
      {"exposed all_to_all (EP)", b.ep_comm_s(), ep, CollectiveCause("all_to_all"),
       "more of the all-to-all hidden than modelled"},
      {"exposed send_recv (PP, CP)", b.pp_comm_s() + b.cp_comm_s(), pp, CollectiveCause("send_recv"),
       "less PP/CP communication exposed than modelled"},
      {"exposed other collectives", 0, other, CollectiveCause("other"), ""},
      {"idle / bubble", b.pipeline_bubble_s(), m.idle_s(),
       "GPU idle with no kernel: host-bound launches, data loading, synchronisation, or a larger pipeline bubble",
       "less idle time than the modelled pipeline bubble"},
  };
  std::vector<Term> use = terms;
  if (m.exposed_communication_by_collective_s().empty() && m.exposed_communication_s() > 0) {
    // A stored summary without the per-collective split: one communication term.
    use.erase(std::remove_if(use.begin(), use.end(),
                             [](const Term& t) { return absl::StartsWith(t.name, "exposed "); }),
              use.end());
    use.push_back({"exposed communication", b.tp_comm_s() + b.cp_comm_s() + b.ep_comm_s() + b.pp_comm_s() + b.dp_comm_s(),
                   m.exposed_communication_s(), "communication not overlapped with computation as modelled",
                   "more communication hidden than modelled"});
  }
  for (const Term& t : use) {
    if (t.predicted == 0 && t.measured == 0) continue;
    v1::TermComparison* r = c.add_terms();
    r->set_term(t.name);
    r->set_predicted_s(t.predicted);
    r->set_measured_s(t.measured);
    r->set_difference_s(t.measured - t.predicted);
    r->set_explanation(t.measured >= t.predicted ? t.more : t.less);
  }
  std::stable_sort(c.mutable_terms()->begin(), c.mutable_terms()->end(),
                   [](const v1::TermComparison& a, const v1::TermComparison& b) {
                     return std::fabs(a.difference_s()) > std::fabs(b.difference_s());
                   });
  if (!c.terms().empty()) {
    const v1::TermComparison& t = c.terms(0);
    c.set_largest_gap(absl::StrFormat("%s is %.3f s measured vs %.3f s predicted%s%s", t.term(), t.measured_s(),
                                      t.predicted_s(), t.explanation().empty() ? "" : ": ", t.explanation()));
  }
  return c;
}

std::string FormatTermComparison(const v1::Comparison& c) {
  std::string o = absl::StrCat("stepcast compare: ", c.title(), "\n");
  absl::StrAppendFormat(&o, "  %-54s %12s %12s %12s\n", "", "predicted", "measured", "difference");
  absl::StrAppendFormat(&o, "  %-54s %10.4f s %10.4f s %+10.4f s\n", "step time", c.predicted_step_time_s(),
                        c.measured_step_time_s(), c.measured_step_time_s() - c.predicted_step_time_s());
  absl::StrAppendFormat(&o, "  %-54s %10.1f %% %10.1f %% %+10.1f pp\n", "MFU", 100 * c.predicted_mfu(),
                        100 * c.measured_mfu(), 100 * (c.measured_mfu() - c.predicted_mfu()));
  o += "  per term, largest gap first:\n";
  for (const auto& t : c.terms()) {
    absl::StrAppendFormat(&o, "  %-54s %10.4f s %10.4f s %+10.4f s\n", t.term(), t.predicted_s(), t.measured_s(),
                          t.difference_s());
  }
  if (!c.largest_gap().empty()) absl::StrAppendFormat(&o, "  largest difference: %s\n", c.largest_gap());
  for (const auto& w : c.warnings()) absl::StrAppendFormat(&o, "  warning: %s\n", w);
  return o;
}

}  // namespace stepcast
