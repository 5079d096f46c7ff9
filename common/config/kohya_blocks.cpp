// kohya's block-wise network_args (see header).
#include "common/config/kohya_blocks.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "common/config/job_config.h"

namespace lf {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// Python's str.split(","): empty entries are kept.
std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = s.find(',', start);
    out.push_back(trim(s.substr(start, comma - start)));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

[[noreturn]] void bad_value(const std::string& key, const std::string& expected,
                            const std::string& got) {
  throw std::invalid_argument("network." + key + ": expected " + expected + ", got '" + got + "'");
}

// Python float() of one entry.
double to_double(const std::string& key, const std::string& entry, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(entry.c_str(), &end);
  if (entry.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(d)) {
    bad_value(key, "comma-separated numbers", value);
  }
  return d;
}

// kohya's lr weight lists: float(s) if s else 0.0.
std::vector<double> lr_list(const std::string& key, const std::string& value) {
  std::vector<double> out;
  for (const std::string& e : split_commas(value)) {
    out.push_back(e.empty() ? 0.0 : to_double(key, e, value));
  }
  return out;
}

// down_lr_weight / up_lr_weight: comma-separated numbers, or "<preset>[+<offset>]".
std::vector<double> down_up_weights(const std::string& key, const std::string& value, bool sdxl) {
  if (value.find(',') != std::string::npos) return lr_list(key, value);
  const auto plus = value.find('+');
  const std::string name = trim(value.substr(0, plus));
  const double offset =
      plus == std::string::npos ? 0.0 : to_double(key, trim(value.substr(plus + 1)), value);
  try {
    return kohya_lr_weight_preset(name, offset, kohya_down_up_blocks(sdxl));
  } catch (const std::invalid_argument&) {
    bad_value(key,
              "a preset (sine, cosine, linear, reverse_linear or zeros, optionally with "
              "+offset) or comma-separated numbers",
              value);
  }
}

// kohya's length rule: a longer list is cut, a shorter one filled with 1.
void fit_length(std::vector<double>& w, std::size_t n, const std::string& key,
                std::vector<std::string>& notes) {
  if (w.size() == n) return;
  notes.push_back("network." + key + ": " + std::to_string(w.size()) + " values for " +
                  std::to_string(n) + " blocks; " +
                  (w.size() > n ? "the values after the " + std::to_string(n) + "th are ignored"
                                : "the missing ones are 1") +
                  ", as kohya");
  w.resize(n, 1.0);
}

std::vector<int> int_list(const std::string& key, const std::string& value, std::size_t n) {
  std::vector<int> out;
  for (const std::string& e : split_commas(value)) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(e.c_str(), &end, 10);
    if (e.empty() || *end != '\0' || errno == ERANGE || v < 0 || v > 1 << 20) {
      bad_value(key, "comma-separated integers >= 0", value);
    }
    out.push_back(static_cast<int>(v));
  }
  if (out.size() != n) {
    bad_value(key, std::to_string(n) + " comma-separated integers (one per block)", value);
  }
  return out;
}

std::vector<double> number_list(const std::string& key, const std::string& value, std::size_t n) {
  std::vector<double> out;
  for (const std::string& e : split_commas(value)) out.push_back(to_double(key, e, value));
  if (out.size() != n) {
    bad_value(key, std::to_string(n) + " comma-separated numbers (one per block)", value);
  }
  return out;
}

bool any_lr_weight(const NetworkSection& n) {
  return !n.down_lr_weight.empty() || !n.mid_lr_weight.empty() || !n.up_lr_weight.empty();
}

}  // namespace

int kohya_down_up_blocks(bool sdxl) { return sdxl ? 9 : 12; }
int kohya_mid_blocks(bool sdxl) { return sdxl ? 3 : 1; }
int kohya_total_blocks(bool sdxl) {
  return 2 * kohya_down_up_blocks(sdxl) + kohya_mid_blocks(sdxl) + (sdxl ? 2 : 0);
}

std::vector<double> kohya_lr_weight_preset(const std::string& name, double offset, int n) {
  std::vector<double> w(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const double x = static_cast<double>(i) / (n - 1);
    const double rx = static_cast<double>(n - 1 - i) / (n - 1);
    double v;
    if (name == "sine") {
      v = std::sin(kPi * x / 2);
    } else if (name == "cosine") {
      v = std::sin(kPi * rx / 2);
    } else if (name == "linear") {
      v = x;
    } else if (name == "reverse_linear") {
      v = rx;
    } else if (name == "zeros") {
      v = 0.0;
    } else {
      throw std::invalid_argument("unknown lr weight preset '" + name + "'");
    }
    w[static_cast<std::size_t>(i)] = v + offset;
  }
  return w;
}

KohyaBlockLrWeights kohya_block_lr_weights(const NetworkSection& n, bool sdxl) {
  KohyaBlockLrWeights out;
  if (!any_lr_weight(n)) return out;
  const auto down_up = static_cast<std::size_t>(kohya_down_up_blocks(sdxl));
  const auto mid_n = static_cast<std::size_t>(kohya_mid_blocks(sdxl));
  // One part: the given values, cut or filled, thresholded; or all 1 when not given.
  auto part = [&](const std::string& key, const std::string& value, std::size_t len, bool mid) {
    if (value.empty()) return std::vector<double>(len, 1.0);
    std::vector<double> w = mid ? lr_list(key, value) : down_up_weights(key, value, sdxl);
    fit_length(w, len, key, out.notes);
    for (double& x : w) x = x > n.block_lr_zero_threshold ? x : 0.0;
    return w;
  };
  const std::vector<double> down = part("down_lr_weight", n.down_lr_weight, down_up, false);
  const std::vector<double> mid = part("mid_lr_weight", n.mid_lr_weight, mid_n, true);
  const std::vector<double> up = part("up_lr_weight", n.up_lr_weight, down_up, false);
  if (sdxl) out.weights.push_back(1.0);  // time / label embedding
  out.weights.insert(out.weights.end(), down.begin(), down.end());
  out.weights.insert(out.weights.end(), mid.begin(), mid.end());
  out.weights.insert(out.weights.end(), up.begin(), up.end());
  if (sdxl) out.weights.push_back(1.0);  // out
  return out;
}

KohyaBlockDims kohya_block_dims(const NetworkSection& n, bool sdxl,
                                const std::vector<double>& lr_weights) {
  KohyaBlockDims d;
  if (n.block_dims.empty() && lr_weights.empty()) return d;
  d.active = true;
  const auto total = static_cast<std::size_t>(kohya_total_blocks(sdxl));
  d.dims = n.block_dims.empty() ? std::vector<int>(total, n.network_dim)
                                : int_list("block_dims", n.block_dims, total);
  d.alphas = n.block_alphas.empty() ? std::vector<double>(total, n.network_alpha)
                                    : number_list("block_alphas", n.block_alphas, total);
  if (!n.conv_block_dims.empty()) {
    d.conv_dims = int_list("conv_block_dims", n.conv_block_dims, total);
    d.conv_alphas = n.conv_block_alphas.empty()
                        ? std::vector<double>(total, n.conv_alpha)
                        : number_list("conv_block_alphas", n.conv_block_alphas, total);
  } else if (n.conv_dim > 0) {
    d.conv_dims.assign(total, n.conv_dim);
    d.conv_alphas.assign(total, n.conv_alpha);
  }
  for (std::size_t i = 0; i < lr_weights.size() && i < total; ++i) {
    if (lr_weights[i] != 0) continue;
    d.dims[i] = 0;
    if (!d.conv_dims.empty()) d.conv_dims[i] = 0;
  }
  return d;
}

std::optional<NetworkKeyProblem> check_block_network_args(const NetworkSection& n) {
  auto problem = [](const std::string& key, const std::string& text) {
    return NetworkKeyProblem{"network." + key, text};
  };
  const bool block_mode = !n.block_dims.empty() || any_lr_weight(n);
  if (n.dim_from_weights) {
    if (n.network_weights.empty()) {
      return problem("dim_from_weights", "needs network.network_weights (the ranks come from it)");
    }
    const std::pair<const char*, bool> not_taken[] = {
        {"block_dims", !n.block_dims.empty()},
        {"block_alphas", !n.block_alphas.empty()},
        {"conv_block_dims", !n.conv_block_dims.empty()},
        {"conv_block_alphas", !n.conv_block_alphas.empty()},
        {"network_dropout", n.network_dropout.value_or(0) > 0},
        {"rank_dropout", n.rank_dropout.value_or(0) > 0},
        {"module_dropout", n.module_dropout.value_or(0) > 0}};
    for (const auto& [key, given] : not_taken) {
      if (given) {
        return problem(key, std::string("is not taken with network.dim_from_weights (kohya "
                                        "create_network_from_weights builds the modules from "
                                        "the file alone)"));
      }
    }
  }
  if (!n.block_alphas.empty() && !block_mode) {
    return problem("block_alphas",
                   "needs block_dims or a block lr weight (kohya reads it only then)");
  }
  if (!n.conv_block_dims.empty() && !block_mode) {
    return problem("conv_block_dims",
                   "needs block_dims or a block lr weight (kohya reads it only then)");
  }
  if (!n.conv_block_alphas.empty() && n.conv_block_dims.empty()) {
    return problem("conv_block_alphas", "needs conv_block_dims (kohya reads it only then)");
  }
  // Syntax and lengths: whichever family the model turns out to be, one must fit.
  try {
    for (bool sdxl : {false, true}) {
      try {
        kohya_block_dims(n, sdxl, kohya_block_lr_weights(n, sdxl).weights);
        return std::nullopt;
      } catch (const std::invalid_argument&) {
        if (sdxl) throw;
      }
    }
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    const auto colon = what.find(": ");
    std::string text = what.substr(colon + 2);
    if (text.find("one per block") != std::string::npos) {
      text += " (25 blocks for SD 1.x/2.x, 23 for SDXL)";
    }
    return NetworkKeyProblem{what.substr(0, colon), text};
  }
  return std::nullopt;
}

}  // namespace lf
