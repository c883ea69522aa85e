#include "calibrate/gemm_shapes.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stepcast::calibrate {

const char* GemmLayoutName(GemmLayout l) {
  switch (l) {
    case GemmLayout::kTN: return "TN";
    case GemmLayout::kNN: return "NN";
    case GemmLayout::kNT: return "NT";
  }
  return "?";
}

std::vector<GemmShape> TransformerShapes(bool quick) {
  std::vector<GemmShape> out;
  const std::vector<int64_t> hidden = quick ? std::vector<int64_t>{8192} : std::vector<int64_t>{4096, 8192, 16384};
  const std::vector<int64_t> tokens = quick ? std::vector<int64_t>{8192} : std::vector<int64_t>{4096, 8192, 16384};
  const std::vector<int64_t> tps = quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 2, 4, 8};
  for (int64_t h : hidden) {
    const int64_t ffn = h * 7 / 2;  // Llama-style SwiGLU (14336 for 4096)
    for (int64_t t : tokens) {
      const bool backward = quick || t == 4096 || t == 16384;
      for (int64_t tp : tps) {
        const std::string tag = absl::StrFormat("h=%d tokens=%d tp=%d", h, t, tp);
        // (name, out features, in features) of each linear layer on one TP rank.
        const struct {
          const char* name;
          int64_t out, in;
        } linears[] = {{"QKV (GQA 8 groups)", (h + 2 * h / 8) / tp, h},
                       {"attention output", h, h / tp},
                       {"MLP up (gate+up)", 2 * ffn / tp, h},
                       {"MLP down", h, ffn / tp}};
        for (const auto& l : linears) {
          out.push_back({t, l.out, l.in, GemmPass::kForward, absl::StrCat(l.name, " ", tag, " forward")});
          if (!backward) continue;
          out.push_back({t, l.in, l.out, GemmPass::kDgrad, absl::StrCat(l.name, " ", tag, " dgrad")});
          out.push_back({l.out, l.in, t, GemmPass::kWgrad, absl::StrCat(l.name, " ", tag, " wgrad")});
        }
      }
    }
  }
  for (int64_t s : quick ? std::vector<int64_t>{4096, 8192} : std::vector<int64_t>{1024, 2048, 4096, 8192, 16384}) {
    out.push_back({s, s, s, GemmPass::kSquare, absl::StrCat("square ", s)});
  }
  return out;
}

GemmRun RunFor(DType dtype, const GemmShape& s) {
  GemmRun r;
  if (dtype == DType::kFP8) {
    r.layout = GemmLayout::kTN;
    r.fast_accum = s.pass == GemmPass::kForward;
    return r;
  }
  r.layout = s.pass == GemmPass::kDgrad ? GemmLayout::kNN : s.pass == GemmPass::kWgrad ? GemmLayout::kNT : GemmLayout::kTN;
  return r;
}

bool SweepRuns(DType dtype, const GemmShape& s) {
  switch (dtype) {
    case DType::kBF16:
    case DType::kFP8: return true;
    case DType::kFP16: return s.pass == GemmPass::kForward || s.pass == GemmPass::kSquare;
    default: return s.pass == GemmPass::kSquare;
  }
}

}  // namespace stepcast::calibrate
