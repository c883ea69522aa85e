// File: kernels/stream.h
//
// CUDA kernels the calibration needs that no library provides. Launchers only; timing is the
// caller's (CUDA events, CUPTI).
//   copy   c[i] = a[i]            float4 (16-byte) loads and stores; bytes = 2 x array
//   triad  a[i] = b[i] + s * c[i] float4; bytes = 3 x array   (STREAM / BabelStream kernels)
//   fill   random values in [-1, 1) of a dtype (never zeros: zeros draw less power and run
//          faster, mamf-finder's note), or a constant (collective result checks)
//   flush  writes a buffer at least twice the L2 so the next kernel starts cold
//   pattern the collective checks' data (kernels/pattern.h)
//   gate   one thread that holds its stream until the host opens a flag in mapped host memory, so
//          that work enqueued behind it starts only once everything is enqueued: the host's
//          enqueue time stays out of the events around it (nvbandwidth's spin kernel). It opens
//          itself after `timeout_ns` (%globaltimer) and says so, so it can never hang a stream.
#ifndef STEPCAST_KERNELS_STREAM_H_
#define STEPCAST_KERNELS_STREAM_H_

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace stepcast::kernels {

enum class FillType { kFloat32, kBFloat16, kFloat16, kFp8E4M3 };

cudaError_t LaunchCopy(const void* a, void* c, size_t bytes, cudaStream_t stream);
cudaError_t LaunchTriad(void* a, const void* b, const void* c, float scalar, size_t bytes, cudaStream_t stream);
cudaError_t LaunchFillRandom(void* p, size_t count, FillType type, uint64_t seed, cudaStream_t stream);
cudaError_t LaunchFillConstant(float* p, size_t count, float value, cudaStream_t stream);
cudaError_t LaunchFlush(void* buffer, size_t bytes, cudaStream_t stream);
cudaError_t LaunchFillPattern(float* p, size_t count, int rank, int salt, cudaStream_t stream);
// An empty kernel, one block of one thread, and the launch's error (cudaGetLastError): what a
// framework pays per launch on the host (calibrate/gpu_bench.h BenchHostCalls times it).
cudaError_t LaunchEmptyKernel(cudaStream_t stream);
// `open` and `timed_out` are device pointers of host memory allocated with cudaHostAllocMapped.
cudaError_t LaunchGate(const volatile int* open, int* timed_out, uint64_t timeout_ns, cudaStream_t stream);

}  // namespace stepcast::kernels

#endif  // STEPCAST_KERNELS_STREAM_H_
