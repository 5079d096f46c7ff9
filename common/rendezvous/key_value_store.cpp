// In-memory rendezvous store (see header).
#include "common/rendezvous/key_value_store.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <stdexcept>

namespace lf {

void KeyValueStore::check_key(const std::string& key) const {
  if (key.size() > kMaxKeyBytes) {
    throw std::length_error("rendezvous store: key of " + std::to_string(key.size()) +
                            " bytes (at most " + std::to_string(kMaxKeyBytes) + ")");
  }
}

void KeyValueStore::store(const std::string& key, const std::string& value) {
  check_key(key);
  if (value.size() > kMaxValueBytes) {
    throw std::length_error("rendezvous store: value of " + std::to_string(value.size()) +
                            " bytes for key '" + key + "' (at most " +
                            std::to_string(kMaxValueBytes) + ")");
  }
  auto it = values_.find(key);
  if (it == values_.end()) {
    if (values_.size() >= max_keys_) {
      throw std::length_error("rendezvous store: already " + std::to_string(values_.size()) +
                              " keys (at most " + std::to_string(max_keys_) + ")");
    }
    values_.emplace(key, value);
  } else {
    it->second = value;
  }
  changed_.notify_all();
}

bool KeyValueStore::all_present(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(),
                     [&](const std::string& k) { return values_.count(k) > 0; });
}

void KeyValueStore::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  store(key, value);
}

std::string KeyValueStore::compare_set(const std::string& key, const std::string& expected,
                                       const std::string& desired) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_key(key);
  const auto it = values_.find(key);
  if (it == values_.end()) {
    if (!expected.empty()) return expected;  // as c10d's TCPStore: nothing to compare with
    store(key, desired);
    return desired;
  }
  if (it->second != expected) return it->second;
  store(key, desired);
  return desired;
}

std::optional<std::string> KeyValueStore::get(const std::string& key,
                                              std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  check_key(key);
  const bool present =
      changed_.wait_for(lock, timeout, [&] { return closed_ || values_.count(key) > 0; });
  if (!present || values_.count(key) == 0) return std::nullopt;
  return values_.at(key);
}

std::int64_t KeyValueStore::add(const std::string& key, std::int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_key(key);
  std::int64_t current = 0;
  if (const auto it = values_.find(key); it != values_.end()) {
    const std::string& text = it->second;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
    if (ec != std::errc() || end != text.data() + text.size()) {
      throw std::invalid_argument("rendezvous store: add to key '" + key +
                                  "', which holds no integer");
    }
  }
  if ((delta > 0 && current > std::numeric_limits<std::int64_t>::max() - delta) ||
      (delta < 0 && current < std::numeric_limits<std::int64_t>::min() - delta)) {
    throw std::invalid_argument("rendezvous store: add to key '" + key + "' overflows int64");
  }
  current += delta;
  store(key, std::to_string(current));
  return current;
}

bool KeyValueStore::remove(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return values_.erase(key) > 0;
}

bool KeyValueStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  return all_present(keys);
}

std::int64_t KeyValueStore::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<std::int64_t>(values_.size());
}

bool KeyValueStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (const std::string& k : keys) check_key(k);
  return changed_.wait_for(lock, timeout, [&] { return closed_ || all_present(keys); }) &&
         all_present(keys);
}

void KeyValueStore::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  changed_.notify_all();
}

}  // namespace lf
