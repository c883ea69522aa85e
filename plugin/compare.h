// File: plugin/compare.h
//
// Predicted vs measured, per category of a step. Categories:
//   compute          predicted GEMM + attention + recompute   | measured GEMM + attention busy
//   memory_bound     predicted elementwise + optimizer        | measured elementwise + memcpy/set busy
//   communication    predicted exposed TP/CP/EP/PP/DP comm    | measured exposed communication
//   bubble_or_idle   predicted pipeline bubble                | measured idle (no kernel running)
//   other            the rest of each step time (busy categories may overlap across streams)
// The category with the largest |measured - predicted| explains most of the difference.
#ifndef STEPCAST_PLUGIN_COMPARE_H_
#define STEPCAST_PLUGIN_COMPARE_H_

#include <string>
#include <vector>

#include "stepcast/v1/prediction.pb.h"
#include "stepcast/v1/probe.pb.h"

namespace stepcast {

struct Comparison {
  std::vector<v1::CategoryComparison> rows;
  std::string largest_difference;  // "communication: +1.20 s of +1.81 s (66%)"
  double predicted_step_s = 0, measured_step_s = 0;
  double predicted_mfu = 0, measured_mfu = 0;
};

// measured_step_s: the measured step time; `measured` per StepBreakdown's measured fields (gemm_s,
// attention_s, elementwise_s, exposed_communication_s, idle_s; see MeasuredBreakdown).
Comparison Compare(const v1::Prediction& prediction, const v1::StepBreakdown& measured, double measured_step_s);

// A probe step (usually the median) as a StepBreakdown: gemm_s, attention_s, elementwise_s
// (elementwise + memory copy), exposed_communication_s, idle_s.
v1::StepBreakdown MeasuredBreakdown(const v1::StepMeasurement& step);

// A readable table of the comparison.
std::string FormatComparison(const Comparison& c, const std::string& title);

}  // namespace stepcast

#endif  // STEPCAST_PLUGIN_COMPARE_H_
