// Shared by the C++ side of the Python oracle (tests/oracle/): reading a fixture while recording
// which tensors a comparison used (so nothing is skipped silently), the tolerance check, and the
// exact bytes of lorafleet-make-checkpoint's output that the oracle hashed.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "worker/io/tensor_file.h"

namespace lf::test {

// tests/fixtures/oracle/ in the source tree.
extern const std::string kOracleFixtureDir;

class OracleFixture {
 public:
  // Loads `path`; throws std::runtime_error saying to run tests/oracle/regen.sh if missing.
  explicit OracleFixture(const std::string& path);
  // The tensor `key` (marked used); throws std::runtime_error "fixture lacks <key>".
  const at::Tensor& get(const std::string& key);
  bool has(const std::string& key) const { return loaded_.tensors.count(key) != 0; }
  // __metadata__[key], "" when absent.
  std::string meta(const std::string& key) const;
  // Tensors no get() asked for, sorted.
  std::vector<std::string> unused() const;

 private:
  LoadedTensors loaded_;
  std::set<std::string> used_;
};

// max |a - b| in float64.
double max_abs_diff(const at::Tensor& a, const at::Tensor& b);

// Expects `got` to have the fixture tensor `key`'s shape and max |got - want| <= atol; prints
// both magnitudes so a regression's size shows in the log.
void expect_close(OracleFixture& fx, const std::string& key, const at::Tensor& got, double atol);

// SHA-256 hex of make_random_checkpoint(model_preset(preset), seed) serialised exactly as
// lorafleet-make-checkpoint writes it (its metadata included).
std::string random_checkpoint_sha256(const std::string& preset,
                                     const std::unordered_map<std::string, at::Tensor>& weights,
                                     uint64_t seed);

}  // namespace lf::test
