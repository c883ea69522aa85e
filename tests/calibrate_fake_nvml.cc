// A fake libnvidia-ml.so.1 for the CPU tests of calibrate/nvml.cc: the NVML entry points it
// loads, with nvml.h's C signatures and canned values, and checks of what callers pass (the PCI
// bus-id format "%x:%x:%x.%x", the clock and sensor enums), so a wrong argument order or format
// shows up as an error. Two GPUs, at buses 0x18 and 0x28 (tests/calibrate_fakes.h numbers its
// GPUs' buses the same way). Values: SM clock 1755 + index MHz, memory 2619 MHz, 61 C, 512345 mW
// drawn of a 700000 mW limit, clocks-event reasons gpu_idle | sw_power_cap, PCIe gen 5 x16.
#include <cstdio>

extern "C" {

typedef int nvmlReturn_t;  // NVML_SUCCESS 0, INVALID_ARGUMENT 2, NOT_FOUND 6
struct FakeDevice {
  int index;
};
static struct FakeDevice devices[2] = {{0}, {1}};
static int initialized = 0;

nvmlReturn_t nvmlInit_v2(void) {
  initialized = 1;
  return 0;
}
nvmlReturn_t nvmlShutdown(void) {
  initialized = 0;
  return 0;
}
nvmlReturn_t nvmlSystemGetDriverVersion(char* v, unsigned len) {
  if (!initialized || len < 16) return 2;
  snprintf(v, len, "580.65.06");
  return 0;
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus, void** h) {
  unsigned domain, b, dev, fn;
  char extra;
  if (!initialized || !bus || !h) return 2;
  if (sscanf(bus, "%x:%x:%x.%x%c", &domain, &b, &dev, &fn, &extra) != 4) return 2;
  for (int i = 0; i < 2; ++i) {
    if (domain == 0 && b == (unsigned)(0x18 + 0x10 * i) && dev == 0 && fn == 0) {
      *h = &devices[i];
      return 0;
    }
  }
  return 6;
}
static int Index(void* h) {
  return (h == &devices[0]) ? 0 : (h == &devices[1]) ? 1 : -1;
}
nvmlReturn_t nvmlDeviceGetUUID(void* h, char* s, unsigned len) {
  if (Index(h) < 0 || len < 48) return 2;
  snprintf(s, len, "GPU-fa4e0000-0000-0000-0000-00000000000%d", Index(h));
  return 0;
}
nvmlReturn_t nvmlDeviceGetName(void* h, char* s, unsigned len) {
  if (Index(h) < 0 || len < 32) return 2;
  snprintf(s, len, "NVIDIA H100 80GB HBM3");
  return 0;
}
nvmlReturn_t nvmlDeviceGetClockInfo(void* h, int type, unsigned* v) {
  if (Index(h) < 0 || !v) return 2;
  if (type == 1) { // NVML_CLOCK_SM
    *v = 1755 + Index(h);
    return 0;
  }
  if (type == 2) { // NVML_CLOCK_MEM
    *v = 2619;
    return 0;
  }
  return 2;
}
nvmlReturn_t nvmlDeviceGetTemperature(void* h, int sensor, unsigned* v) {
  if (Index(h) < 0 || sensor != 0 || !v) return 2; // NVML_TEMPERATURE_GPU
  *v = 61;
  return 0;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(void* h, unsigned* mw) {
  if (Index(h) < 0 || !mw) return 2;
  *mw = 512345;
  return 0;
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(void* h, unsigned* mw) {
  if (Index(h) < 0 || !mw) return 2;
  *mw = 700000;
  return 0;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(void* h, unsigned long long* r) {
  if (Index(h) < 0 || !r) return 2;
  *r = 0x1ull | 0x4ull; // gpu_idle | sw_power_cap
  return 0;
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(void* h, unsigned* v) {
  if (Index(h) < 0 || !v) return 2;
  *v = 5;
  return 0;
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(void* h, unsigned* v) {
  if (Index(h) < 0 || !v) return 2;
  *v = 16;
  return 0;
}

}  // extern "C"
