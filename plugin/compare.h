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

#include "stepcast/v1/comparison.pb.h"
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

// A probe or trace step (usually the median) as a StepBreakdown: gemm_s (GEMM + convolution, the
// matrix-engine work), attention_s, elementwise_s (elementwise + memory copy),
// exposed_communication_s (HTA's definition), idle_s.
v1::StepBreakdown MeasuredBreakdown(const v1::StepMeasurement& step);

// A readable table of the comparison.
std::string FormatComparison(const Comparison& c, const std::string& title);

// Predicted vs measured term by term, the largest |measured - predicted| first. Terms:
//   gemm             predicted GEMM + recompute (recomputation is mostly GEMM work) | measured GEMM busy
//   attention        predicted attention core                      | measured attention busy
//   convolution      0 (the model has none)                        | measured convolution busy
//   elementwise      predicted elementwise + optimizer             | measured elementwise + memcpy/memset
//   exposed all_reduce/all_gather/reduce_scatter (TP, DP)  predicted tp + dp comm | measured exposed
//                    (HTA's definition: not under computation kernels) of those collectives
//   exposed all_to_all (EP)         predicted ep comm                | measured exposed all_to_all
//   exposed send_recv (PP, CP)      predicted pp + cp comm           | measured exposed send_recv
//   exposed other collectives       0                                | measured exposed broadcast/other
//   idle / bubble    predicted pipeline bubble                     | measured idle (no GPU record running)
// A measurement without the per-collective split (a stored run) gets one "exposed communication"
// term against all predicted communication instead. A term with both sides zero is left out. Each term carries the likely cause of its gap;
// `largest_gap` puts the first in words. measured_mfu = predicted MFU x predicted / measured
// step time (the same model FLOPs, GPUs and peak). `measured` is a median step (probe or trace).
v1::Comparison CompareTerms(const v1::Prediction& prediction, const v1::StepMeasurement& measured,
                            const std::string& title, const std::string& measured_source);

// A readable table of a term comparison: step time, MFU, then the terms, largest gap first.
std::string FormatTermComparison(const v1::Comparison& c);

}  // namespace stepcast

#endif  // STEPCAST_PLUGIN_COMPARE_H_
