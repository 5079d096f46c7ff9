// c10d::Store over a KeyValueRendezvous (see header).
#include "worker/dist/c10d_store.h"

#include <c10/util/Exception.h>

#include <string>
#include <utility>
#include <vector>

namespace lf {
namespace {

std::string text_of(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::vector<uint8_t> bytes_of(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string joined(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

class RendezvousC10dStore final : public c10d::Store {
 public:
  RendezvousC10dStore(std::shared_ptr<KeyValueRendezvous> store, std::chrono::milliseconds timeout)
      : c10d::Store(timeout), store_(std::move(store)) {}

  c10::intrusive_ptr<c10d::Store> clone() override {
    return c10::make_intrusive<RendezvousC10dStore>(store_, timeout_);
  }
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    store_->set(key, text_of(value));
  }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    return bytes_of(store_->compare_set(key, text_of(expected), text_of(desired)));
  }
  std::vector<uint8_t> get(const std::string& key) override {
    std::optional<std::string> v = store_->get(key, timeout_);
    if (!v) {
      C10_THROW_ERROR(DistStoreError, "rendezvous store: key '" + key + "' not set within " +
                                          std::to_string(timeout_.count()) + " ms");
    }
    return bytes_of(*v);
  }
  int64_t add(const std::string& key, int64_t value) override { return store_->add(key, value); }
  bool deleteKey(const std::string& key) override { return store_->remove(key); }
  bool check(const std::vector<std::string>& keys) override { return store_->check(keys); }
  int64_t getNumKeys() override { return store_->size(); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& requested) override {
    // c10d's kNoTimeout (0) means "forever" there; here it is the store's own bound.
    const std::chrono::milliseconds timeout = requested == kNoTimeout ? timeout_ : requested;
    if (!store_->wait(keys, timeout)) {
      C10_THROW_ERROR(DistStoreError, "rendezvous store: keys [" + joined(keys) +
                                          "] not all set within " +
                                          std::to_string(timeout.count()) + " ms");
    }
  }

 private:
  std::shared_ptr<KeyValueRendezvous> store_;
};

}  // namespace

c10::intrusive_ptr<c10d::Store> make_c10d_store(std::shared_ptr<KeyValueRendezvous> store,
                                                std::chrono::milliseconds timeout) {
  return c10::make_intrusive<RendezvousC10dStore>(std::move(store), timeout);
}

}  // namespace lf
