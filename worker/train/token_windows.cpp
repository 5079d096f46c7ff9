// kohya's 75-token windows of a long caption (see header).
#include "worker/train/token_windows.h"

#include <ATen/ATen.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace lf {
namespace {

std::string shape_of(const at::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

}  // namespace

std::int64_t token_window_count(int max_token_length) {
  if (max_token_length != 75 && max_token_length != 150 && max_token_length != 225) {
    throw std::invalid_argument("training.max_token_length: expected 75, 150 or 225, got " +
                                std::to_string(max_token_length));
  }
  return max_token_length / kWindowTokens;
}

std::int64_t context_length(int max_token_length) {
  return token_window_count(max_token_length) * kWindowTokens + 2;
}

std::vector<std::int64_t> kohya_token_windows(const std::vector<int>& ids, int eos, int pad) {
  const auto size = static_cast<std::int64_t>(ids.size());
  const std::int64_t n = (size - 2) / kWindowTokens;
  if (size < kWindowLength || (size - 2) % kWindowTokens != 0 || n > 3) {
    throw std::invalid_argument("kohya_token_windows: " + std::to_string(size) +
                                " ids, expected 77, 152 or 227 (max_token_length + 2)");
  }
  if (n == 1) return std::vector<std::int64_t>(ids.begin(), ids.end());
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(n * kWindowLength));
  for (std::int64_t k = 0; k < n; ++k) {
    const std::size_t begin = out.size();
    out.push_back(ids.front());  // BOS
    out.insert(out.end(), ids.begin() + 1 + k * kWindowTokens,
               ids.begin() + 1 + (k + 1) * kWindowTokens);
    out.push_back(ids.back());  // EOS, or pad when the caption ended earlier
    if (pad == eos) continue;   // SD 1.x, SDXL's CLIP-L: every window already ends in EOS
    const std::int64_t last_slot = out[out.size() - 2];
    if (last_slot != eos && last_slot != pad) out.back() = eos;  // a full window: close it
    if (out[begin + 1] == pad) out[begin + 1] = eos;             // an empty window: BOS EOS pad...
  }
  return out;
}

at::Tensor join_window_states(const at::Tensor& hidden, std::int64_t windows) {
  if (windows < 1 || !hidden.defined() || hidden.dim() != 3 || hidden.size(1) != kWindowLength ||
      hidden.size(0) % windows != 0) {
    throw std::invalid_argument("join_window_states: hidden states " + shape_of(hidden) + " for " +
                                std::to_string(windows) +
                                " windows, expected [B * windows, 77, D]");
  }
  if (windows == 1) return hidden;
  const std::int64_t b = hidden.size(0) / windows;
  const at::Tensor h = hidden.reshape({b, windows * kWindowLength, hidden.size(2)});
  std::vector<at::Tensor> parts{h.narrow(1, 0, 1)};  // the first window's BOS
  for (std::int64_t k = 0; k < windows; ++k) {
    parts.push_back(h.narrow(1, k * kWindowLength + 1, kWindowTokens));
  }
  parts.push_back(h.narrow(1, windows * kWindowLength - 1, 1));  // the last window's end
  return at::cat(parts, 1);
}

at::Tensor first_window_pooled(const at::Tensor& pooled, std::int64_t windows) {
  if (windows < 1 || !pooled.defined() || pooled.dim() != 2 || pooled.size(0) % windows != 0) {
    throw std::invalid_argument("first_window_pooled: pooled output " + shape_of(pooled) +
                                ", expected [B * " + std::to_string(windows) + ", P]");
  }
  if (windows == 1) return pooled;
  return pooled.reshape({pooled.size(0) / windows, windows, pooled.size(1)}).select(1, 0);
}

}  // namespace lf
