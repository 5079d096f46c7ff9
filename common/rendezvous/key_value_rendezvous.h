// The key-value store a process group rendezvous needs: the operations of c10d's Store
// (torch/csrc/distributed/c10d/Store.hpp: set, compareSet, get, add, deleteKey, check,
// getNumKeys, wait), without LibTorch, so that the coordinator can host one and the workers can
// reach it over the coordinator's authenticated gRPC service (worker/rpc/coordinator_rendezvous.h).
// worker/dist/c10d_store.h adapts any implementation to c10d for ProcessGroupGloo.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lf {

class KeyValueRendezvous {
 public:
  virtual ~KeyValueRendezvous() = default;

  // Values are arbitrary bytes (Gloo stores serialised addresses).
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Sets `key` to `desired` when its value is `expected`, or when it is missing and `expected`
  // is empty; returns the value it holds afterwards (c10d's compareSet: the current value when
  // the swap did not happen).
  virtual std::string compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) = 0;
  // The value of `key`, waiting up to `timeout` for it to be set; nullopt when it was not.
  virtual std::optional<std::string> get(const std::string& key,
                                         std::chrono::milliseconds timeout) = 0;
  // Adds `delta` to the integer held in `key` (a missing key counts as 0; the value is stored
  // as decimal text, as c10d's TCPStore does) and returns the new value. Throws
  // std::invalid_argument when the key holds something that is not an integer.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  // Removes `key`; whether it existed.
  virtual bool remove(const std::string& key) = 0;
  // Whether every key exists (no waiting).
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Keys held.
  virtual std::int64_t size() = 0;
  // Waits up to `timeout` for every key to exist; false when one is still missing then.
  virtual bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
};

}  // namespace lf
