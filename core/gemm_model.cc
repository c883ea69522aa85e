#include "core/gemm_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stepcast {
namespace {

constexpr DType kAllDTypes[] = {DType::kBF16, DType::kFP16, DType::kFP8,
                                DType::kTF32, DType::kFP32, DType::kINT8};

// Output element size: fp8 GEMMs write bf16 (Transformer Engine, cuBLASLt fp8 matmuls in
// training), int8 GEMMs int32 accumulators, the others their input type.
constexpr double OutputBytes(DType d) {
  switch (d) {
    case DType::kFP8:
      return 2.0;
    case DType::kINT8:
      return 4.0;
    default:
      return BytesPerElement(d);
  }
}

// True when x elements of `bytes` each span a multiple of 16 bytes. TMA (Hopper's tensor-core
// loads) requires every global stride to be a multiple of 16 bytes (CUDA Driver API,
// cuTensorMapEncodeTiled, globalStrides); CUTLASS generates its SM90 TMA kernels for 16-bit
// types with alignment 8 elements and only cp.async "alignx" kernels for 2 or 4
// (python/cutlass_library/generator.py, GenerateSM90_TensorOp_16b_WGMMA_gemm / _alignx_gemm);
// "most kernels targeting Tensor Cores require 128b aligned memory accesses ... a documented
// requirement in cublas" (NVIDIA/cutlass issue #75). The H100 traces agree: every shape with n
// or k off 8 bf16 elements ran a cutlass_75/80 align1/align2 kernel. A fractional x (an average)
// counts as aligned.
bool Aligned16(double x, int64_t bytes) {
  if (!(x < 4.0e15)) return true;
  const int64_t xi = static_cast<int64_t>(x);
  if (static_cast<double>(xi) != x) return true;
  return ((xi * bytes) & 15) == 0;
}

// ceil(x) for x >= 0, without libm (x86-64's baseline has no roundsd).
inline double CeilPos(double x) {
  if (!(x < 4.0e18)) return x;  // already an integer in double precision
  const double t = static_cast<double>(static_cast<int64_t>(x));
  return t < x ? t + 1 : t;
}

struct Tile {
  int32_t m, n;
  int32_t shift_m, shift_n;  // log2 of m, n
};
// Output tiles of the Hopper kernels, larger first so that ties go to the larger tile (more
// operand reuse). 128x128x64, 128x256x64, 256x128x64 are CUTLASS's SM90 TMA warp-specialized
// tile shapes (cutlass/python/cutlass_library/generator.py, GenerateSM90_TensorOp_16b_WGMMA_gemm)
// and the tiles cuBLAS's sm90_xmma kernels name in the H100 traces (tilesize128x128x64,
// 256x128x64); the smaller 128x64, 64x128, 64x64 appear there only when the 128x128 grid leaves
// SMs idle (512x1536x1536 -> 128x64, 141x512x2048 -> 64x64), as NVIDIA's "Matrix
// Multiplication Background User's Guide" (tile quantization) describes cuBLAS's heuristic.
constexpr Tile kLargeTiles[] = {{256, 128, 8, 7}, {128, 256, 7, 8}, {128, 128, 7, 7}};
constexpr Tile kSmallTiles[] = {{128, 64, 7, 6}, {64, 128, 6, 7}, {64, 64, 6, 6}};

DType Twin(DType d) {
  return d == DType::kBF16 ? DType::kFP16 : DType::kBF16;
}
bool HasTwin(DType d) {
  return d == DType::kBF16 || d == DType::kFP16;
}

absl::Status CheckShape(const GemmShape& s, absl::string_view prefix) {
  const double v[] = {s.batch, s.m, s.n, s.k};
  const char* names[] = {"batch", "m", "n", "k"};
  for (int i = 0; i < 4; ++i) {
    if (!std::isfinite(v[i]) || !(v[i] > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, ".", names[i], ": must be a finite number > 0 (got ", v[i], ")"));
    }
  }
  const int d = static_cast<int>(s.dtype);
  if (d < 0 || d >= 6) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".dtype: unknown dtype ", d));
  }
  return absl::OkStatus();
}

}  // namespace

const char* GemmKernelName(GemmKernel k) {
  switch (k) {
    case GemmKernel::kTiled:
      return "tiled";
    case GemmKernel::kUnalignedFallback:
      return "unaligned_fallback";
    case GemmKernel::kGemv:
      return "gemv";
  }
  return "?";
}

const char* GemmBoundName(GemmBound b) {
  switch (b) {
    case GemmBound::kCompute:
      return "compute";
    case GemmBound::kMemory:
      return "memory";
    case GemmBound::kLatency:
      return "latency";
  }
  return "?";
}

absl::StatusOr<GemmModel> GemmModel::Create(const Hardware& hw, const RateProfile& profile,
                                            const GemmConstants& constants) {
  const GemmConstants& c = constants;
  if (!std::isfinite(c.floor_s) || c.floor_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm_constants.floor_s: must be finite and >= 0 (got ", c.floor_s, ")"));
  }
  if (!(c.overlap_exponent >= 1) || std::isnan(c.overlap_exponent)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gemm_constants.overlap_exponent: must be >= 1 (got ", c.overlap_exponent, ")"));
  }
  if (!(c.unaligned_bandwidth_fraction > 0 && c.unaligned_bandwidth_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm_constants.unaligned_bandwidth_fraction: must be in (0, 1] (got ",
                     c.unaligned_bandwidth_fraction, ")"));
  }
  if (hw.sm_count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hardware.sm_count: must be >= 0 (got ", hw.sm_count, ")"));
  }
  GemmModel model;
  model.constants_ = c;
  // The combine table costs 2 x 257 pow() calls: computed once for the default exponent (every
  // prediction builds a model), per model otherwise.
  auto fill = [](std::array<double, kCombineSteps + 2>& t, double p) {
    for (int i = 0; i <= kCombineSteps; ++i) {
      const double r = static_cast<double>(i) / kCombineSteps;
      t[i] = std::pow(1.0 + std::pow(r, p), 1.0 / p);
    }
    t[kCombineSteps + 1] = t[kCombineSteps];
  };
  static const std::shared_ptr<const CombineTable> kDefaultCombine = [&] {
    auto t = std::make_shared<CombineTable>();
    fill(*t, GemmConstants{}.overlap_exponent);
    return std::shared_ptr<const CombineTable>(std::move(t));
  }();
  if (c.overlap_exponent == GemmConstants{}.overlap_exponent) {
    model.combine_ = kDefaultCombine;
  } else {
    auto t = std::make_shared<CombineTable>();
    fill(*t, c.overlap_exponent);
    model.combine_ = std::move(t);
  }
  model.sm_count_ = hw.sm_count;
  model.hbm_bytes_per_s_ = profile.hbm_bandwidth_bytes_per_s > 0 ? profile.hbm_bandwidth_bytes_per_s
                                                                 : hw.hbm_bandwidth_bytes_per_s;
  if (!(model.hbm_bytes_per_s_ > 0) || !std::isfinite(model.hbm_bytes_per_s_)) {
    return absl::InvalidArgumentError(
        "profile.hbm_bandwidth_bytes_per_s: must be > 0 (and hardware.hbm_bandwidth_bytes_per_s "
        "is not set either)");
  }

  // Flat rates and per-shape points by dtype.
  std::array<double, kDTypes> best{};
  std::vector<GemmMeasurement> points;
  for (size_t i = 0; i < profile.gemm.size(); ++i) {
    const GemmRatePoint& p = profile.gemm[i];
    const int d = static_cast<int>(p.dtype);
    if (d < 0 || d >= kDTypes) continue;
    if (!(p.flops_per_s > 0) || !std::isfinite(p.flops_per_s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile.gemm[", i, "].flops_per_s: must be > 0 (got ", p.flops_per_s, ")"));
    }
    if (p.m == 0 && p.n == 0 && p.k == 0) {
      if (model.flat_[d] == 0) model.flat_[d] = p.flops_per_s;  // the first flat rate wins
      continue;
    }
    if (p.m <= 0 || p.n <= 0 || p.k <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile.gemm[", i, "]: give all of m, n, k > 0 or none (a flat rate)"));
    }
    GemmMeasurement g;
    g.shape = {p.dtype, 1, static_cast<double>(p.m), static_cast<double>(p.n),
               static_cast<double>(p.k)};
    g.time_s = 2.0 * g.shape.m * g.shape.n * g.shape.k / p.flops_per_s;
    points.push_back(g);
    best[d] = std::max(best[d], p.flops_per_s);
  }
  // A dtype measured only per shape: its best measured rate stands for its flat rate.
  for (int d = 0; d < kDTypes; ++d) {
    if (model.flat_[d] == 0) model.flat_[d] = best[d];
  }
  // Borrowing: the bf16/fp16 twin (same tensor-core rate on every listed GPU), else another
  // dtype's flat rate scaled by the ratio of the datasheet peaks.
  const auto own = model.flat_;
  for (DType d : kAllDTypes) {
    const int i = static_cast<int>(d);
    if (own[i] > 0) continue;
    if (HasTwin(d) && own[static_cast<int>(Twin(d))] > 0) {
      model.flat_[i] = own[static_cast<int>(Twin(d))];
      model.flat_borrowed_[i] = true;
      continue;
    }
    const double peak_d = hw.PeakFlops(d);
    if (!(peak_d > 0)) continue;
    for (DType s : kAllDTypes) {
      const double peak_s = hw.PeakFlops(s);
      if (own[static_cast<int>(s)] > 0 && peak_s > 0) {
        model.flat_[i] = own[static_cast<int>(s)] * peak_d / peak_s;
        model.flat_borrowed_[i] = true;
        break;
      }
    }
  }
  bool any = false;
  for (double r : model.flat_) any = any || r > 0;
  if (!any) {
    return absl::InvalidArgumentError(
        "profile.gemm: no GEMM rate (neither a flat rate nor a per-shape point)");
  }
  for (int d = 0; d < kDTypes; ++d) {
    model.inv_flat_[d] = model.flat_[d] > 0 ? 1.0 / model.flat_[d] : 0.0;
  }
  // fp8 split accumulation (GemmShape::split_accumulation): the profile's fraction of the flat
  // fp8 rate, unless the profile measured fp8 shapes (a sweep's backward shapes carry it).
  const double split = profile.fp8_split_accumulation_fraction;
  if (!(split >= 0 && split <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profile.fp8_split_accumulation_fraction: must be in (0, 1], or 0 for none (got ", split, ")"));
  }
  model.inv_fp8_split_profile_ = split > 0 ? 1.0 / split : 1.0;
  model.inv_fp8_split_ = model.inv_fp8_split_profile_;  // WithTable: 1 once fp8 shapes are measured
  model.inv_hbm_ = 1.0 / model.hbm_bytes_per_s_;
  model.inv_hbm_unaligned_ = 1.0 / (model.hbm_bytes_per_s_ * c.unaligned_bandwidth_fraction);
  model.inv_sms_ = model.sm_count_ > 0 ? 1.0 / static_cast<double>(model.sm_count_) : 0.0;
  if (points.empty()) return model;
  return model.WithTable(points);
}

absl::StatusOr<GemmModel> GemmModel::WithTable(std::span<const GemmMeasurement> points) const {
  GemmModel out = *this;
  // Measured fp8 shapes carry their own accumulation mode (GemmShape::split_accumulation); without
  // them the profile's fraction applies to the flat rate.
  out.inv_fp8_split_ = out.inv_fp8_split_profile_;
  for (const GemmMeasurement& p : points) {
    if (p.shape.dtype == DType::kFP8) out.inv_fp8_split_ = 1;
  }
  out.table_.clear();
  out.table_.reserve(points.size());
  for (auto& by_kind : out.ranges_) by_kind.fill(Range{});
  for (size_t i = 0; i < points.size(); ++i) {
    const GemmMeasurement& g = points[i];
    const std::string prefix = absl::StrCat("points[", i, "].shape");
    if (absl::Status s = CheckShape(g.shape, prefix); !s.ok()) return s;
    if (!(g.time_s > 0) || !std::isfinite(g.time_s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("points[", i, "].time_s: must be a finite number > 0 (got ", g.time_s, ")"));
    }
    if (!(flat_[static_cast<int>(g.shape.dtype)] > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, ".dtype: no GEMM rate for ", DTypeName(g.shape.dtype), " to compare against"));
    }
    const GemmEstimate a = Analytic(g.shape);
    TablePoint t;
    t.f[0] = static_cast<float>(std::log2(g.shape.m));
    t.f[1] = static_cast<float>(std::log2(g.shape.n));
    t.f[2] = static_cast<float>(std::log2(g.shape.k));
    t.f[3] = static_cast<float>(std::log2(g.shape.batch));
    t.log_ratio = static_cast<float>(std::log(g.time_s / a.time_s));
    t.dtype = static_cast<uint8_t>(g.shape.dtype);
    t.kernel = static_cast<uint8_t>(a.kernel);
    t.shape = g.shape;
    t.time_s = g.time_s;
    out.table_.push_back(t);
    for (int kind : {static_cast<int>(t.kernel), kKinds}) {
      Range& r = out.ranges_[t.dtype][kind];
      for (int j = 0; j < 4; ++j) {
        r.lo[j] = r.count == 0 ? t.f[j] : std::min(r.lo[j], t.f[j]);
        r.hi[j] = r.count == 0 ? t.f[j] : std::max(r.hi[j], t.f[j]);
      }
      ++r.count;
    }
  }
  return out;
}

void GemmModel::AnalyticInto(const GemmShape& s, GemmEstimate* out) const {
  const GemmConstants& c = constants_;
  const int d = static_cast<int>(s.dtype);
  const double e_in = BytesPerElement(s.dtype);
  const double flops = 2.0 * s.batch * s.m * s.n * s.k;
  const double c_bytes = s.c_bytes_per_element > 0 ? s.c_bytes_per_element : OutputBytes(s.dtype);
  const double bytes = s.batch * ((s.m * s.k + s.k * s.n) * e_in + s.m * s.n * c_bytes);
  const double inv_rate = inv_flat_[d] * (s.split_accumulation && s.dtype == DType::kFP8 ? inv_fp8_split_ : 1.0) /
                          Fp8ScalingRateFraction(s);

  GemmEstimate& e = *out;
  e = GemmEstimate{};
  e.floor_s = c.floor_s;
  e.dtype_borrowed = flat_borrowed_[d];
  double inv_bw = inv_hbm_;
  if (s.m == 1 || s.n == 1) {
    e.kernel = GemmKernel::kGemv;
    e.compute_s = flops * inv_rate;
  } else {
    const int64_t e_bytes = static_cast<int64_t>(e_in);
    const bool aligned = Aligned16(s.n, e_bytes) && Aligned16(s.k, e_bytes);
    e.kernel = aligned ? GemmKernel::kTiled : GemmKernel::kUnalignedFallback;
    e.unaligned_fallback = !aligned;
    if (!aligned) inv_bw = inv_hbm_unaligned_;
    if (sm_count_ <= 0) {
      // No SM count: no wave quantization.
      e.tile_m = e.tile_n = 128;
      e.compute_s = flops * inv_rate;
    } else {
      const double sms = static_cast<double>(sm_count_);
      // Integer tile counts: ceil(m / tm) = (m + tm - 1) >> log2(tm) on the ceil'd dimensions
      // (a fractional dimension is an average: rounded up).
      const int64_t mi = static_cast<int64_t>(CeilPos(std::min(s.m, 4.0e15)));
      const int64_t ni = static_cast<int64_t>(CeilPos(std::min(s.n, 4.0e15)));
      const double batch = CeilPos(std::min(s.batch, 4.0e15));
      auto tiles = [&](const Tile& t) {
        return batch * static_cast<double>((mi + t.m - 1) >> t.shift_m) *
               static_cast<double>((ni + t.n - 1) >> t.shift_n);
      };
      // ceil(tiles / sms) without a division: the product rounds up by at most an ulp, which
      // only matters when tiles is a multiple of sms.
      // Under 2^40 tiles (every real GEMM) the same ceiling from the truncated product: tiles is
      // an integer and tiles / sms lies at least 1/sms from any integer it is not, far more than
      // the product's rounding (2^-13 there), so the truncation is floor(tiles / sms), or one
      // less when tiles / sms is an integer and the product rounded down; one exact multiply
      // and compare then give the ceiling, as the general form does.
      auto waves = [&](double n_tiles) {
        if (n_tiles < 0x1p40) {
          const double q = static_cast<double>(static_cast<int64_t>(n_tiles * inv_sms_));
          return q * sms < n_tiles ? q + 1 : q;
        }
        double w = CeilPos(n_tiles * inv_sms_);
        if ((w - 1) * sms >= n_tiles) w -= 1;
        return w;
      };
      Tile best = kLargeTiles[2];  // 128x128
      const double tiles128 = tiles(best);
      const double waves128 = waves(tiles128);
      double best_waves = waves128;
      if (aligned) {
        // Least quantized work, larger tiles first (they win ties); the small tiles only when
        // the 128x128 grid is under one wave or m or n is under 128.
        double best_work = std::numeric_limits<double>::infinity();
        auto consider = [&](const Tile& t, double w) {
          const double work = w * t.m * t.n;
          if (work < best_work) {
            best_work = work;
            best = t;
            best_waves = w;
          }
        };
        consider(kLargeTiles[0], waves(tiles(kLargeTiles[0])));
        consider(kLargeTiles[1], waves(tiles(kLargeTiles[1])));
        consider(kLargeTiles[2], waves128);
        if (tiles128 < sms || s.m < 128 || s.n < 128) {
          for (const Tile& t : kSmallTiles) consider(t, waves(tiles(t)));
        }
      }
      e.tile_m = best.m;
      e.tile_n = best.n;
      e.waves = best_waves;
      e.compute_s = best_waves * 2.0 * best.m * best.n * s.k * sms * inv_rate;
    }
  }
  e.memory_s = bytes * inv_bw;
  // (T_c^p + T_m^p)^(1/p) = max x (1 + (min/max)^p)^(1/p), the factor from the sampled curve.
  const double hi = std::max(e.compute_s, e.memory_s), lo = std::min(e.compute_s, e.memory_s);
  const double body = hi > 0 ? hi * CombineFactor(lo / hi) : 0.0;
  e.time_s = c.floor_s + body;
  e.flops_per_s = flops / e.time_s;
  if (c.floor_s > hi) {
    e.bound = GemmBound::kLatency;
  } else {
    e.bound = e.compute_s >= e.memory_s ? GemmBound::kCompute : GemmBound::kMemory;
  }
}

absl::Status GemmModel::Check(const GemmShape& s) const {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const bool fine = s.batch > 0 && s.batch < kInf && s.m > 0 && s.m < kInf && s.n > 0 &&
                    s.n < kInf && s.k > 0 && s.k < kInf &&
                    static_cast<unsigned>(s.dtype) < static_cast<unsigned>(kDTypes);
  if (!fine) {
    if (absl::Status st = CheckShape(s, "gemm"); !st.ok()) return st;
  }
  if (!(flat_[static_cast<int>(s.dtype)] > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm.dtype: no GEMM rate for ", DTypeName(s.dtype),
                     " (no flat rate or measured shape in the profile, and no datasheet peak to "
                     "scale another dtype's rate by)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<GemmEstimate> GemmModel::EstimateAnalytic(const GemmShape& shape) const {
  if (absl::Status st = Check(shape); !st.ok()) return st;
  return Analytic(shape);
}

absl::StatusOr<GemmEstimate> GemmModel::Estimate(const GemmShape& s) const {
  if (absl::Status st = Check(s); !st.ok()) return st;
  GemmEstimate e;
  Estimated(s, &e);
  return e;
}

bool GemmModel::TryEstimate(const GemmShape& s, GemmEstimate* out) const {
  // Check()'s conditions, without building its error.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const bool fine = s.batch > 0 && s.batch < kInf && s.m > 0 && s.m < kInf && s.n > 0 && s.n < kInf && s.k > 0 &&
                    s.k < kInf && static_cast<unsigned>(s.dtype) < static_cast<unsigned>(kDTypes) &&
                    flat_[static_cast<int>(s.dtype)] > 0;
  if (!fine) return false;
  Estimated(s, out);
  return true;
}

void GemmModel::Estimated(const GemmShape& s, GemmEstimate* out) const {
  GemmEstimate& e = *out;
  AnalyticInto(s, out);
  if (table_.empty()) return;

  // Which dtype's points answer: the shape's own, else its bf16/fp16 twin (flagged); which kind:
  // the estimate's own kernel kind when the table has points of it, else any (flagged).
  int d = static_cast<int>(s.dtype);
  if (ranges_[d][kKinds].count == 0 && HasTwin(s.dtype)) {
    d = static_cast<int>(Twin(s.dtype));
    if (ranges_[d][kKinds].count > 0) e.dtype_borrowed = true;
  }
  if (ranges_[d][kKinds].count == 0) return;
  const int own_kind = static_cast<int>(e.kernel);
  const bool have_kind = ranges_[d][own_kind].count > 0;
  const Range& range = ranges_[d][have_kind ? own_kind : kKinds];

  // One pass: an exact measured shape, else the 3 nearest (Euclidean in the log2 features).
  const float q[4] = {static_cast<float>(std::log2(s.m)), static_cast<float>(std::log2(s.n)),
                      static_cast<float>(std::log2(s.k)), static_cast<float>(std::log2(s.batch))};
  constexpr int kNearest = 3;
  float best_d[kNearest], best_r[kNearest];
  int found = 0;
  for (const TablePoint& p : table_) {
    if (p.dtype != d || (have_kind && p.kernel != own_kind)) continue;
    const float x0 = p.f[0] - q[0], x1 = p.f[1] - q[1], x2 = p.f[2] - q[2], x3 = p.f[3] - q[3];
    const float dist = x0 * x0 + x1 * x1 + x2 * x2 + x3 * x3;
    if (dist == 0 && p.shape.batch == s.batch && p.shape.m == s.m && p.shape.n == s.n &&
        p.shape.k == s.k) {
      e.time_s = p.time_s / Fp8ScalingRateFraction(s);
      e.flops_per_s = 2.0 * s.batch * s.m * s.n * s.k / e.time_s;
      e.from_table = true;
      return;
    }
    if (found == kNearest && dist >= best_d[kNearest - 1]) continue;
    int pos = found < kNearest ? found++ : kNearest - 1;
    while (pos > 0 && best_d[pos - 1] > dist) {
      best_d[pos] = best_d[pos - 1];
      best_r[pos] = best_r[pos - 1];
      --pos;
    }
    best_d[pos] = dist;
    best_r[pos] = p.log_ratio;
  }
  float sum = 0;
  for (int i = 0; i < found; ++i) sum += best_r[i];
  e.time_s *= std::exp(static_cast<double>(sum) / found);
  e.flops_per_s = 2.0 * s.batch * s.m * s.n * s.k / e.time_s;
  e.table_scaled = true;
  bool outside = !have_kind;
  for (int j = 0; j < 4; ++j) outside = outside || q[j] < range.lo[j] || q[j] > range.hi[j];
  e.outside_table = outside;
}

}  // namespace stepcast
