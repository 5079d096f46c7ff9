// The coordinator's rendezvous store seen from a worker: a KeyValueRendezvous whose operations
// are lorafleet.v1 Rendezvous calls, carrying the job token (and over TLS when configured) like
// every other call, for the generation this rank registered in. Env-mode ranks form their Gloo
// group through it (worker/dist/c10d_store.h), as torchrun's c10d rendezvous uses its agent's
// store: no rank listens for the rendezvous, and only the job's token holders can read or write.
#pragma once

#include <chrono>

#include "common/rendezvous/key_value_rendezvous.h"
#include "worker/rpc/coordinator_client.h"

namespace lf {

class CoordinatorRendezvous final : public KeyValueRendezvous {
 public:
  // `client` (registered already) must outlive this. `budget`: how long one operation retries an
  // unreachable coordinator (its own timeout bounds a get / wait further). Errors are the
  // client's: GroupSupersededError when the generation is over, CoordinatorError otherwise.
  CoordinatorRendezvous(CoordinatorClient& client, int rank, std::chrono::milliseconds budget);

  void set(const std::string& key, const std::string& value) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  // Asks again (each call held up to 10 s by the coordinator) until `timeout`.
  std::optional<std::string> get(const std::string& key,
                                 std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  bool remove(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  std::int64_t size() override;
  bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

 private:
  RendezvousResult call(RendezvousOp op);
  // kGet / kWait repeated until found or `timeout` passed.
  RendezvousResult poll(RendezvousOp op, std::chrono::milliseconds timeout);

  CoordinatorClient& client_;
  int rank_;
  std::chrono::milliseconds budget_;
};

}  // namespace lf
