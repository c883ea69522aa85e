#include "calibrate/cupti_timer.h"

#include <cuda_runtime.h>
#include <cupti.h>

#include <cmath>
#include <cstdlib>
#include <mutex>

namespace stepcast::calibrate {
namespace {

std::mutex g_mu;
std::vector<std::pair<std::string, double>> g_kernels;

void CUPTIAPI Requested(uint8_t** buf, size_t* size, size_t* max_records) {
  *size = 4 << 20;
  *buf = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
      g_kernels.emplace_back(k->name ? k->name : "", (k->end - k->start) * 1e-9);
    }
  }
  std::free(buf);
}

}  // namespace

CuptiTimer::CuptiTimer() {
  CUptiResult r = cuptiActivityRegisterCallbacks(Requested, Completed);
  if (r != CUPTI_SUCCESS) {
    const char* s = nullptr;
    cuptiGetResultString(r, &s);
    why_ = s ? s : "CUPTI unavailable";
    return;
  }
  enabled_ = true;
}

void CuptiTimer::Begin() {
  if (!enabled_) return;
  cudaDeviceSynchronize();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_kernels.clear();
  }
  if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    enabled_ = false;
    why_ = "cannot enable CUPTI kernel activity (another profiler attached?)";
  }
}

std::vector<double> CuptiTimer::End(const std::string& skip) {
  std::vector<double> out;
  if (!enabled_) return out;
  cudaDeviceSynchronize();
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mu);
  for (const auto& [name, t] : g_kernels) {
    if (skip.empty() || name.find(skip) == std::string::npos) out.push_back(t);
  }
  return out;
}

double Disagreement(double cupti, double event) { return event > 0 ? std::fabs(cupti - event) / event : 0; }

}  // namespace stepcast::calibrate
