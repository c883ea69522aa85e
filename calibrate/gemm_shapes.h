// File: calibrate/gemm_shapes.h
//
// The GEMM shapes of the calibration sweep (plain C++): what a transformer layer's linear layers
// run in training, per pass (Megatron-LM / Transformer Engine's three GEMMs per linear layer):
//   forward (fprop)  Y[T, out] = X[T, in] W^T   m = T,   n = out, k = in    cuBLAS TN
//   dgrad            dX[T, in] = dY[T, out] W   m = T,   n = in,  k = out   cuBLAS NN
//   wgrad            dW[out, in] = dY^T X       m = out, n = in,  k = T     cuBLAS NT
// (T = tokens per micro-batch), for QKV (GQA, 8 KV groups), attention output, MLP up (gate + up)
// and down of Llama-style layers, hidden 4096 / 8192 / 16384 (SwiGLU FFN = 3.5 x hidden), split by
// TP 1 / 2 / 4 / 8; plus squares. FP8 runs every pass as TN (cuBLASLt's FP8 layout on Hopper and
// Ada; Transformer Engine transposes explicitly), with fast accumulation on the forward pass only
// (TE: CUBLASLT_MATMUL_DESC_FAST_ACCUM for fprop, split accumulation for dgrad and wgrad).
#ifndef STEPCAST_CALIBRATE_GEMM_SHAPES_H_
#define STEPCAST_CALIBRATE_GEMM_SHAPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace stepcast::calibrate {

enum class GemmPass { kForward, kDgrad, kWgrad, kSquare };
enum class GemmLayout { kTN, kNN, kNT };
const char* GemmLayoutName(GemmLayout l);

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  GemmPass pass = GemmPass::kForward;
  std::string what;  // "QKV (GQA 8 groups) h=8192 tokens=8192 tp=4 dgrad"
};

// The sweep's shapes: full = forward for every (hidden, tokens, TP), dgrad and wgrad for tokens
// 4096 and 16384 (wgrad's k = tokens at both ends; between them the model interpolates), squares
// 1024-16384; quick = hidden 8192, tokens 8192, TP 1 and 8, all three passes, squares 4096 and 8192.
std::vector<GemmShape> TransformerShapes(bool quick);

// How `dtype` runs a shape: its cuBLAS layout and whether fp8 fast accumulation is on.
struct GemmRun {
  GemmLayout layout = GemmLayout::kTN;
  bool fast_accum = false;
};
GemmRun RunFor(DType dtype, const GemmShape& shape);

// Whether the sweep runs `dtype` on `shape`: bf16 and fp8 everything; fp16 forward and squares;
// tf32 and fp32 squares only (they are not training GEMMs).
bool SweepRuns(DType dtype, const GemmShape& shape);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_GEMM_SHAPES_H_
