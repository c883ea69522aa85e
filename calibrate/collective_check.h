// File: calibrate/collective_check.h
//
// What a rank's receive buffer must hold after one collective on the pattern of kernels/pattern.h
// (plain C++, shared by the NCCL and MPI backends and tested on CPU). count = S / 4 floats, S as
// nccl-tests counts it (per-rank buffer for all-reduce and send/recv, the total for all-gather,
// reduce-scatter and all-to-all); chunk = count / n.
//   all-reduce      send count;  recv[j] = sum_r P(r, j)
//   all-gather      send chunk;  recv[j] = P(j / chunk, j % chunk)
//   reduce-scatter  send count;  recv[j] = sum_r P(r, rank x chunk + j),   j < chunk
//   all-to-all      send count;  recv[p x chunk + j] = P(p, rank x chunk + j)
//   send/recv ring  send count;  recv[j] = P(rank - 1 mod n, j)
#ifndef STEPCAST_CALIBRATE_COLLECTIVE_CHECK_H_
#define STEPCAST_CALIBRATE_COLLECTIVE_CHECK_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/hardware.h"

namespace stepcast::calibrate {

// Elements of the send and receive buffers of `c` for count floats over n ranks.
size_t SendCount(Collective c, int n, size_t count);
size_t ReceiveCount(Collective c, int n, size_t count);
// Send element j of `rank`.
float SendElement(Collective c, int rank, int salt, size_t j);
// Receive element j of `rank`.
float ExpectedElement(Collective c, int n, int rank, int salt, size_t count, size_t j);
// Indices checked: every CheckStride-th element (all of them up to 65536 elements; else a stride
// that leaves at most 65536) plus the last one, so a GPU copies them with one strided memcpy.
size_t CheckStride(size_t receive_count);
std::vector<size_t> CheckIndices(size_t receive_count);
// `got[i]` is element idx[i] of the receive buffer (poisoned with NaN before the run, so an
// element never written fails). DataLoss "<gpu>: <collective> element j is x, not y".
absl::Status CheckReceived(Collective c, int n, int rank, int salt, size_t count, const std::vector<size_t>& idx,
                           const std::vector<float>& got, const std::string& gpu);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_COLLECTIVE_CHECK_H_
