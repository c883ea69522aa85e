#include "calibrate/collective_check.h"

#include "absl/strings/str_cat.h"
#include "kernels/pattern.h"

namespace stepcast::calibrate {

using kernels::PatternValue;

size_t SendCount(Collective c, int n, size_t count) {
  return c == Collective::kAllGather ? count / n : count;
}

size_t ReceiveCount(Collective c, int n, size_t count) {
  if (c == Collective::kReduceScatter) return count / n;
  if (c == Collective::kAllGather || c == Collective::kAllToAll) return (count / n) * n;
  return count;
}

float SendElement(Collective, int rank, int salt, size_t j) { return PatternValue(rank, salt, j); }

float ExpectedElement(Collective c, int n, int rank, int salt, size_t count, size_t j) {
  const size_t chunk = count / n;
  switch (c) {
    case Collective::kAllReduce: {
      float s = 0;
      for (int r = 0; r < n; ++r) s += PatternValue(r, salt, j);
      return s;
    }
    case Collective::kAllGather: return PatternValue(static_cast<int>(j / chunk), salt, j % chunk);
    case Collective::kReduceScatter: {
      float s = 0;
      for (int r = 0; r < n; ++r) s += PatternValue(r, salt, rank * chunk + j);
      return s;
    }
    case Collective::kAllToAll: return PatternValue(static_cast<int>(j / chunk), salt, rank * chunk + j % chunk);
    case Collective::kSendRecv: return PatternValue((rank + n - 1) % n, salt, j);
  }
  return 0;
}

size_t CheckStride(size_t count) { return count <= 65536 ? 1 : (count + 65535) / 65536; }

std::vector<size_t> CheckIndices(size_t count) {
  std::vector<size_t> idx;
  const size_t stride = CheckStride(count);
  for (size_t j = 0; j < count; j += stride) idx.push_back(j);
  if (!idx.empty() && idx.back() != count - 1) idx.push_back(count - 1);
  return idx;
}

absl::Status CheckReceived(Collective c, int n, int rank, int salt, size_t count, const std::vector<size_t>& idx,
                           const std::vector<float>& got, const std::string& gpu) {
  for (size_t i = 0; i < idx.size() && i < got.size(); ++i) {
    const float want = ExpectedElement(c, n, rank, salt, count, idx[i]);
    if (!(got[i] == want)) {
      return absl::DataLossError(absl::StrCat(gpu, ": ", CollectiveName(c), " element ", idx[i], " of ",
                                              ReceiveCount(c, n, count), " is ", got[i], ", not ", want));
    }
  }
  return absl::OkStatus();
}

}  // namespace stepcast::calibrate
