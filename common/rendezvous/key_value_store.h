// KeyValueStore: an in-memory KeyValueRendezvous (thread-safe; get and wait block on a condition
// variable). The coordinator keeps one per generation for its workers' Gloo rendezvous
// (coordinator/service.h, lorafleet.v1.Coordinator/Rendezvous); tests use it in-process.
//
// Bounded, because the coordinator serves it to whatever an authenticated worker sends: keys of
// at most kMaxKeyBytes, values of at most kMaxValueBytes, at most `max_keys` keys. A request
// beyond them throws std::length_error naming the limit, and the store is unchanged.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>

#include "common/rendezvous/key_value_rendezvous.h"

namespace lf {

class KeyValueStore final : public KeyValueRendezvous {
 public:
  static constexpr std::size_t kMaxKeyBytes = 1024;
  static constexpr std::size_t kMaxValueBytes = 1 << 20;  // 1 MiB

  explicit KeyValueStore(std::size_t max_keys = 65536) : max_keys_(max_keys) {}

  void set(const std::string& key, const std::string& value) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  std::optional<std::string> get(const std::string& key,
                                 std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  bool remove(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  std::int64_t size() override;
  bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

  // Wakes every blocked get / wait, which then return as timed out, and makes later ones return
  // at once: the store's generation is over.
  void close();

 private:
  // Both require mutex_ held; throw std::length_error when `key` / `value` / one more key would
  // exceed the limits.
  void check_key(const std::string& key) const;
  void store(const std::string& key, const std::string& value);
  bool all_present(const std::vector<std::string>& keys) const;

  const std::size_t max_keys_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
  bool closed_ = false;
};

}  // namespace lf
