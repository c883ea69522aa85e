#include "calibrate/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace stepcast::calibrate {

// The NVML entry points used, by their C ABI (nvml.h: nvmlReturn_t is an int enum, 0 = success;
// nvmlDevice_t an opaque pointer).
struct Nvml::Api {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*driver)(char*, unsigned) = nullptr;
  int (*by_bus)(const char*, void**) = nullptr;
  int (*uuid)(void*, char*, unsigned) = nullptr;
  int (*name)(void*, char*, unsigned) = nullptr;
  int (*clock)(void*, int, unsigned*) = nullptr;        // nvmlClockType_t: 1 SM, 2 MEM
  int (*temperature)(void*, int, unsigned*) = nullptr;  // nvmlTemperatureSensors_t: 0 GPU
  int (*power)(void*, unsigned*) = nullptr;             // mW
  int (*power_limit)(void*, unsigned*) = nullptr;       // mW
  int (*reasons)(void*, unsigned long long*) = nullptr;
  int (*pcie_gen)(void*, unsigned*) = nullptr;
  int (*pcie_width)(void*, unsigned*) = nullptr;
};

namespace {
constexpr int kClockSm = 1, kClockMem = 2, kTempGpu = 0;
template <typename F>
void Sym(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
}
}  // namespace

std::unique_ptr<Nvml> Nvml::Load(const std::string& library, std::string* why) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    if (why) *why = absl::StrCat("cannot load ", library, ": ", dlerror());
    return nullptr;
  }
  std::unique_ptr<Nvml> n(new Nvml());
  n->lib_ = lib;
  n->api_ = std::make_unique<Api>();
  Api& a = *n->api_;
  Sym(lib, "nvmlInit_v2", &a.init);
  Sym(lib, "nvmlShutdown", &a.shutdown);
  Sym(lib, "nvmlSystemGetDriverVersion", &a.driver);
  Sym(lib, "nvmlDeviceGetHandleByPciBusId_v2", &a.by_bus);
  Sym(lib, "nvmlDeviceGetUUID", &a.uuid);
  Sym(lib, "nvmlDeviceGetName", &a.name);
  Sym(lib, "nvmlDeviceGetClockInfo", &a.clock);
  Sym(lib, "nvmlDeviceGetTemperature", &a.temperature);
  Sym(lib, "nvmlDeviceGetPowerUsage", &a.power);
  Sym(lib, "nvmlDeviceGetEnforcedPowerLimit", &a.power_limit);
  // The r535+ name first, then the older one of the same function.
  Sym(lib, "nvmlDeviceGetCurrentClocksEventReasons", &a.reasons);
  if (a.reasons == nullptr) Sym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", &a.reasons);
  Sym(lib, "nvmlDeviceGetCurrPcieLinkGeneration", &a.pcie_gen);
  Sym(lib, "nvmlDeviceGetCurrPcieLinkWidth", &a.pcie_width);
  if (!a.init || !a.by_bus || !a.clock) {
    if (why) *why = absl::StrCat(library, " lacks nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2 or nvmlDeviceGetClockInfo");
    return nullptr;
  }
  if (int rc = a.init(); rc != 0) {
    if (why) *why = absl::StrCat("nvmlInit_v2 returned ", rc);
    a.shutdown = nullptr;  // nothing to shut down
    return nullptr;
  }
  return n;
}

Nvml::~Nvml() {
  if (api_ && api_->shutdown) api_->shutdown();
  if (lib_) dlclose(lib_);
}

std::string Nvml::DriverVersion() const {
  char v[96] = {0};
  if (api_->driver && api_->driver(v, sizeof(v)) == 0) return v;
  return "";
}

absl::StatusOr<void*> Nvml::Handle(const std::string& bus) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = handles_.find(bus);
  if (it != handles_.end()) return it->second;
  void* h = nullptr;
  if (int rc = api_->by_bus(bus.c_str(), &h); rc != 0 || h == nullptr) {
    return absl::NotFoundError(absl::StrCat("NVML has no GPU at PCI bus id ", bus, " (nvmlReturn ", rc, ")"));
  }
  handles_[bus] = h;
  return h;
}

absl::StatusOr<NvmlDeviceInfo> Nvml::Info(const std::string& bus) {
  absl::StatusOr<void*> h = Handle(bus);
  if (!h.ok()) return h.status();
  NvmlDeviceInfo i;
  char buf[96] = {0};
  if (api_->uuid && api_->uuid(*h, buf, sizeof(buf)) == 0) i.uuid = buf;
  char name[96] = {0};
  if (api_->name && api_->name(*h, name, sizeof(name)) == 0) i.name = name;
  unsigned x = 0;
  if (api_->power_limit && api_->power_limit(*h, &x) == 0) i.power_limit_w = x / 1000.0;  // mW
  if (api_->pcie_gen && api_->pcie_gen(*h, &x) == 0) i.pcie_link_gen = static_cast<int>(x);
  if (api_->pcie_width && api_->pcie_width(*h, &x) == 0) i.pcie_link_width = static_cast<int>(x);
  return i;
}

absl::StatusOr<NvmlReading> Nvml::Read(const std::string& bus) {
  absl::StatusOr<void*> h = Handle(bus);
  if (!h.ok()) return h.status();
  NvmlReading r;
  r.t_s = NvmlSampler::Now();
  unsigned x = 0;
  if (api_->clock(*h, kClockSm, &x) == 0) r.sm_clock_mhz = static_cast<int>(x);
  if (api_->clock(*h, kClockMem, &x) == 0) r.memory_clock_mhz = static_cast<int>(x);
  if (api_->temperature && api_->temperature(*h, kTempGpu, &x) == 0) r.temperature_c = static_cast<int>(x);
  if (api_->power && api_->power(*h, &x) == 0) r.power_w = x / 1000.0;  // mW
  unsigned long long reasons = 0;
  if (api_->reasons && api_->reasons(*h, &reasons) == 0) r.clocks_event_reasons = reasons;
  return r;
}

std::vector<std::string> ClocksEventReasonNames(uint64_t reasons) {
  static const std::pair<uint64_t, const char*> kNames[] = {
      {0x4, "sw_power_cap"},          {0x8, "hw_slowdown"},          {0x10, "sync_boost"},
      {0x20, "sw_thermal_slowdown"}, {0x40, "hw_thermal_slowdown"}, {0x80, "hw_power_brake_slowdown"}};
  std::vector<std::string> out;
  for (const auto& [bit, name] : kNames) {
    if (reasons & bit) out.push_back(name);
  }
  return out;
}

v1::ClockWindow SummarizeReadings(const std::vector<NvmlReading>& r) {
  v1::ClockWindow w;
  if (r.empty()) return w;
  std::vector<int> sm, mem;
  double power = 0, power_max = 0;
  int temp = 0;
  uint64_t reasons = 0;
  for (const auto& x : r) {
    sm.push_back(x.sm_clock_mhz);
    mem.push_back(x.memory_clock_mhz);
    power += x.power_w;
    power_max = std::max(power_max, x.power_w);
    temp = std::max(temp, x.temperature_c);
    reasons |= x.clocks_event_reasons;
  }
  std::sort(sm.begin(), sm.end());
  std::sort(mem.begin(), mem.end());
  w.set_samples(static_cast<int32_t>(r.size()));
  w.set_sm_clock_mhz_min(sm.front());
  w.set_sm_clock_mhz_median(sm[sm.size() / 2]);
  w.set_memory_clock_mhz_median(mem[mem.size() / 2]);
  w.set_power_w_mean(power / r.size());
  w.set_power_w_max(power_max);
  w.set_temperature_c_max(temp);
  w.set_clocks_event_reasons(reasons);
  for (const auto& n : ClocksEventReasonNames(reasons)) w.add_clocks_event_reason_names(n);
  return w;
}

NvmlSampler::NvmlSampler(Nvml* nvml, std::vector<std::string> bus_ids, double period_s)
    : nvml_(nvml), bus_ids_(std::move(bus_ids)), period_s_(period_s) {
  if (nvml_ == nullptr || bus_ids_.empty()) return;
  // One reading of every GPU before the thread starts, so a window always has a nearest reading
  // even when the sampling thread has not run yet (a short run, a loaded host).
  for (const std::string& bus : bus_ids_) {
    absl::StatusOr<NvmlReading> r = nvml_->Read(bus);
    if (r.ok()) readings_[bus].push_back(*r);
  }
  thread_ = std::thread([this] { Loop(); });
}

NvmlSampler::~NvmlSampler() { Stop(); }

void NvmlSampler::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

double NvmlSampler::Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void NvmlSampler::Loop() {
  while (!stop_) {
    for (const std::string& bus : bus_ids_) {
      absl::StatusOr<NvmlReading> r = nvml_->Read(bus);
      if (!r.ok()) continue;
      std::lock_guard<std::mutex> l(mu_);
      readings_[bus].push_back(*r);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(period_s_);
    while (!stop_ && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

v1::ClockWindow NvmlSampler::Window(const std::string& bus, double t0, double t1) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = readings_.find(bus);
  if (it == readings_.end() || it->second.empty()) return {};
  const auto& all = it->second;
  std::vector<NvmlReading> in;
  for (const auto& r : all) {
    if (r.t_s >= t0 && r.t_s <= t1) in.push_back(r);
  }
  if (in.empty()) {
    auto after = std::find_if(all.begin(), all.end(), [&](const NvmlReading& r) { return r.t_s >= t0; });
    in.push_back(after != all.end() ? *after : all.back());
  }
  return SummarizeReadings(in);
}

}  // namespace stepcast::calibrate
