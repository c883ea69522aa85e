// File: calibrate/import_tracelens.h
//
// Reads the per-shape GEMM table of an AMD-AGI TraceLens performance report (GEMM.csv, one row
// per distinct aten::mm / addmm / bmm shape of a PyTorch profiler trace; columns found by their
// header names, which TraceLens orders differently between versions): the op, batch B, M, N, K,
// bias, the A/B dtypes, the median kernel time of the op (all its kernels, e.g. cuBLAS's memset
// and GEMM) and TraceLens's median TFLOP/s. tests/data/real_data/microbench/gemm/ holds six such
// tables measured on an H100 80GB HBM3 (56 shapes).
#ifndef STEPCAST_CALIBRATE_IMPORT_TRACELENS_H_
#define STEPCAST_CALIBRATE_IMPORT_TRACELENS_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/hardware.h"

namespace stepcast::calibrate {

struct TraceLensGemm {
  int line = 0;             // of the row in the CSV
  std::string op;           // "aten::addmm"
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool bias = false;
  std::string dtype_a_b;    // as TraceLens writes it: "('c10::BFloat16', 'c10::BFloat16')"
  bool dtype_known = false;  // A and B of one dtype stepcast models
  DType dtype = DType::kBF16;
  double median_kernel_time_s = 0;
  double tracelens_median_flops_per_s = 0;  // TraceLens's TFLOPS/s_median (counts the bias add)
  // 2 B M N K / median kernel time: the GEMM FLOPs as stepcast (and mamf-finder) count them.
  double MedianFlopsPerS() const;
};

bool LooksLikeTraceLensGemmCsv(absl::string_view text);

// Parses a GEMM.csv text. Errors "<path>:<line>: ...": a missing column (named), a row whose cell
// count differs from the header's, a dimension or time that is not a positive number.
absl::StatusOr<std::vector<TraceLensGemm>> ParseTraceLensGemmCsv(absl::string_view text, const std::string& path);
// Reads and parses one file.
absl::StatusOr<std::vector<TraceLensGemm>> ReadTraceLensGemmCsv(const std::string& path);

// Profile GEMM points of the rows with a known dtype: (dtype, m, n, k, MedianFlopsPerS()), the
// source naming the file, line and op. A batched row (B > 1) folds its batch into m (m = B x M)
// so that the point keeps the op's FLOPs (2 B M N K) and the source says so; the profile's table
// has no batch dimension.
std::vector<GemmRatePoint> GemmPointsFromTraceLens(const std::vector<TraceLensGemm>& rows, const std::string& path);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_IMPORT_TRACELENS_H_
