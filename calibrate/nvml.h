// File: calibrate/nvml.h
//
// NVML, loaded at run time (dlopen of libnvidia-ml.so.1, by its C ABI; no nvml.h needed to build),
// so the tool starts where NVML is absent, and testable with a fake library on a CPU
// (tests/fake_nvml.c). Devices are found by PCI bus id, never by index: NVML numbers GPUs in PCI
// order, CUDA by CUDA_DEVICE_ORDER / CUDA_VISIBLE_DEVICES. Units: NVML reports power in mW (here
// W), clocks in MHz, temperatures in C. The sampler reads every GPU every `period_s` on a thread
// while a part runs, so that the clocks, power and throttle reasons of the measurements are the
// ones under load, not idle ones (an idle H100 reads 345 MHz).
#ifndef STEPCAST_CALIBRATE_NVML_H_
#define STEPCAST_CALIBRATE_NVML_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "stepcast/v1/calibration.pb.h"

namespace stepcast::calibrate {

struct NvmlReading {
  double t_s = 0;  // the sampler's clock (steady, seconds)
  int sm_clock_mhz = 0, memory_clock_mhz = 0, temperature_c = 0;
  double power_w = 0;
  uint64_t clocks_event_reasons = 0;
};

struct NvmlDeviceInfo {
  std::string uuid, name;
  double power_limit_w = 0;
  int pcie_link_gen = 0, pcie_link_width = 0;
};

class Nvml {
 public:
  // Loads the library (default "libnvidia-ml.so.1") and calls nvmlInit_v2. nullptr with `why` set
  // when it cannot.
  static std::unique_ptr<Nvml> Load(const std::string& library, std::string* why);
  ~Nvml();
  std::string DriverVersion() const;
  // By PCI bus id ("0000:1B:00.0" as CUDA prints it; NVML accepts %x:%x:%x.%x). NotFound naming
  // the bus id and NVML's return code.
  absl::StatusOr<NvmlDeviceInfo> Info(const std::string& pci_bus_id);
  absl::StatusOr<NvmlReading> Read(const std::string& pci_bus_id);

 private:
  Nvml() = default;
  absl::StatusOr<void*> Handle(const std::string& pci_bus_id);
  struct Api;
  std::unique_ptr<Api> api_;
  void* lib_ = nullptr;
  std::mutex mu_;
  std::map<std::string, void*> handles_;
};

// Names of the clocks-event (throttle) bits that slow a GPU under load (nvml.h
// nvmlClocksEventReason*: sw_power_cap 0x4, hw_slowdown 0x8, sync_boost 0x10, sw_thermal_slowdown
// 0x20, hw_thermal_slowdown 0x40, hw_power_brake_slowdown 0x80); gpu_idle 0x1,
// applications_clocks_setting 0x2 and display_clock_setting 0x100 are left out.
std::vector<std::string> ClocksEventReasonNames(uint64_t reasons);

// Summary of readings: count, SM clock min and median, memory clock median, power mean and max,
// temperature max, the OR of the reasons and their names.
v1::ClockWindow SummarizeReadings(const std::vector<NvmlReading>& readings);

class NvmlSampler {
 public:
  // Samples `bus_ids` every period_s until Stop() or destruction. `nvml` may be null (no samples).
  NvmlSampler(Nvml* nvml, std::vector<std::string> bus_ids, double period_s);
  ~NvmlSampler();
  void Stop();
  // Seconds on the sampler's clock.
  static double Now();
  // Summary of the readings of `bus_id` in [t0_s, t1_s]; a window shorter than the period takes
  // the first reading after t0 (or the last before it).
  v1::ClockWindow Window(const std::string& bus_id, double t0_s, double t1_s) const;

 private:
  void Loop();
  Nvml* nvml_;
  std::vector<std::string> bus_ids_;
  double period_s_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::map<std::string, std::vector<NvmlReading>> readings_;
  std::thread thread_;
};

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_NVML_H_
