// File: core/dtype.h
//
// Element types of GEMMs and stored tensors, and their sizes.
#ifndef STEPCAST_CORE_DTYPE_H_
#define STEPCAST_CORE_DTYPE_H_



namespace stepcast {

enum class DType { kFP32, kTF32, kBF16, kFP16, kFP8, kINT8 };

// Bytes per element as stored in memory. TF32 is stored as FP32 (4 bytes).
constexpr double BytesPerElement(DType d) {
  switch (d) {
    case DType::kFP32:
    case DType::kTF32: return 4.0;
    case DType::kBF16:
    case DType::kFP16: return 2.0;
    case DType::kFP8:
    case DType::kINT8: return 1.0;
  }
  return 4.0;
}

constexpr const char* DTypeName(DType d) {
  switch (d) {
    case DType::kFP32: return "fp32";
    case DType::kTF32: return "tf32";
    case DType::kBF16: return "bf16";
    case DType::kFP16: return "fp16";
    case DType::kFP8: return "fp8";
    case DType::kINT8: return "int8";
  }
  return "?";
}

}  // namespace stepcast

#endif  // STEPCAST_CORE_DTYPE_H_
