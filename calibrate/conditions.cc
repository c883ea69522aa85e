#include "calibrate/conditions.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "calibrate/nccl_backend.h"
#include "google/protobuf/util/time_util.h"

namespace stepcast::calibrate {
namespace {

// The few NVML entry points used, by their C ABI (nvml.h is not needed at build time).
using NvmlDevice = void*;
struct Nvml {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*handle)(const char*, NvmlDevice*) = nullptr;
  int (*power_limit)(NvmlDevice, unsigned*) = nullptr;
  int (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  int (*driver)(char*, unsigned) = nullptr;
  bool Load() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
    // By PCI bus id: NVML's indices follow PCI order, CUDA's need not (CUDA_VISIBLE_DEVICES,
    // CUDA_DEVICE_ORDER).
    handle = reinterpret_cast<int (*)(const char*, NvmlDevice*)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    power_limit = reinterpret_cast<int (*)(NvmlDevice, unsigned*)>(dlsym(lib, "nvmlDeviceGetEnforcedPowerLimit"));
    clock = reinterpret_cast<int (*)(NvmlDevice, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    temperature = reinterpret_cast<int (*)(NvmlDevice, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetTemperature"));
    driver = reinterpret_cast<int (*)(char*, unsigned)>(dlsym(lib, "nvmlSystemGetDriverVersion"));
    return init && handle && clock && temperature && driver && init() == 0;
  }
  ~Nvml() {
    if (lib) {
      if (shutdown) shutdown();
      dlclose(lib);
    }
  }
};
constexpr int kClockSm = 1, kClockMem = 2, kTempGpu = 0;  // NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU

}  // namespace

v1::CalibrationConditions Conditions(int argc, char** argv, const std::vector<int>& gpus) {
  v1::CalibrationConditions c;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  c.set_host(host);
  *c.mutable_time() = google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(absl::Now()));
  c.set_command_line(absl::StrJoin(argv, argv + argc, " "));
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) c.set_cuda_runtime_version(absl::StrCat(v / 1000, ".", (v % 1000) / 10));
  c.set_cublas_version(absl::StrCat(cublasLtGetVersion()));
  c.set_nccl_version(NcclVersion());
  c.set_gpu_count(static_cast<int32_t>(gpus.size()));
  Nvml nvml;
  const bool have_nvml = nvml.Load();
  if (have_nvml) {
    char drv[96] = {0};
    if (nvml.driver(drv, sizeof(drv)) == 0) c.set_driver_version(drv);
  } else if (cudaDriverGetVersion(&v) == cudaSuccess) {
    c.set_driver_version(absl::StrCat("CUDA driver API ", v / 1000, ".", (v % 1000) / 10, " (NVML not loadable)"));
  }
  for (int g : gpus) {
    v1::GpuCondition* gc = c.add_gpus();
    gc->set_index(g);
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, g) == cudaSuccess) {
      gc->set_name(p.name);
      if (c.gpu_name().empty()) c.set_gpu_name(p.name);
    }
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), g) == cudaSuccess) gc->set_pci_bus_id(bus);
    NvmlDevice d = nullptr;
    if (have_nvml && bus[0] != 0 && nvml.handle(bus, &d) == 0) {
      unsigned x = 0;
      if (nvml.clock(d, kClockSm, &x) == 0) gc->set_sm_clock_mhz(x);
      if (nvml.clock(d, kClockMem, &x) == 0) gc->set_memory_clock_mhz(x);
      if (nvml.temperature(d, kTempGpu, &x) == 0) gc->set_temperature_c(x);
      if (nvml.power_limit && nvml.power_limit(d, &x) == 0) gc->set_power_limit_w(x / 1000.0);  // mW
    }
  }
  return c;
}

}  // namespace stepcast::calibrate
