// Gloo collectives through LibTorch's c10d (see header). The wheel ships c10d's headers but not
// Gloo's; ProcessGroupGloo.hpp includes a few Gloo headers only for declarations, which come from
// Debian's libgloo-dev. Gloo objects are used only through the shared_ptr torch hands out, so the
// header version does not leak into any layout we depend on.
#include "worker/dist/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <exception>
#include <vector>

#include "common/util/host_port.h"

namespace lf {
namespace {

// The store's host and port; throws CollectiveError naming the address when either is missing.
std::pair<std::string, int> store_host_port(const std::string& address) {
  const HostPort hp = split_host_port(address);
  if (hp.host.empty() || hp.port.empty() ||
      hp.port.find_first_not_of("0123456789") != std::string::npos) {
    throw CollectiveError("gloo: store address '" + address + "' is not host:port");
  }
  return {hp.host, std::stoi(hp.port)};
}

}  // namespace

struct GlooStoreServer::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

GlooStoreServer::GlooStoreServer(int world_size, int port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = true;
  opts.numWorkers = world_size;
  opts.waitWorkers = false;  // the group forms later, once the coordinator relayed the address
  opts.timeout = timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>("0.0.0.0", opts);
  } catch (const std::exception& e) {
    throw CollectiveError("gloo: cannot start the rendezvous store on port " +
                          std::to_string(port) + ": " + e.what());
  }
}

GlooStoreServer::~GlooStoreServer() = default;

int GlooStoreServer::port() const { return impl_->store->getPort(); }

struct GlooCommunicator::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::chrono::milliseconds timeout;
  std::string store_address;

  // Waits for a collective; Gloo's own timeout (options->timeout) bounds it.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
    try {
      work->wait(timeout);
    } catch (const std::exception& e) {
      throw CollectiveError(std::string("gloo: ") + what + " failed or timed out after " +
                            std::to_string(timeout.count() / 1000.0) +
                            " s (cluster.collective_timeout): a peer is gone or the network "
                            "dropped: " +
                            e.what());
    }
  }
};

GlooCommunicator::GlooCommunicator(const GlooOptions& options, GlooStoreServer* server)
    : impl_(std::make_unique<Impl>()), rank_(options.rank), world_size_(options.world_size) {
  impl_->timeout = options.timeout;
  impl_->store_address = options.store_address;
  try {
    if (server != nullptr) {
      impl_->store = server->impl_->store;
    } else {
      const auto [host, port] = store_host_port(options.store_address);
      c10d::TCPStoreOptions opts;
      opts.port = static_cast<std::uint16_t>(port);
      opts.isServer = false;
      opts.waitWorkers = false;
      opts.timeout = options.timeout;
      impl_->store = c10::make_intrusive<c10d::TCPStore>(host, opts);
    }
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
    gloo_options->devices.push_back(
        options.local_address.empty()
            ? c10d::ProcessGroupGloo::createDefaultDevice()
            : c10d::ProcessGroupGloo::createDeviceForHostname(options.local_address));
    impl_->group =
        c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, rank_, world_size_, gloo_options);
  } catch (const CollectiveError&) {
    throw;
  } catch (const std::exception& e) {
    throw CollectiveError("gloo: rank " + std::to_string(rank_) + " could not join the group at " +
                          options.store_address + " (world_size " + std::to_string(world_size_) +
                          ") within " + std::to_string(options.timeout.count() / 1000.0) +
                          " s: " + e.what());
  }
}

GlooCommunicator::~GlooCommunicator() = default;

void GlooCommunicator::allreduce_sum(at::Tensor& tensor) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  opts.timeout = impl_->timeout;
  impl_->wait(impl_->group->allreduce(tensors, opts), "allreduce");
}

void GlooCommunicator::broadcast(at::Tensor& tensor, int root) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  opts.timeout = impl_->timeout;
  impl_->wait(impl_->group->broadcast(tensors, opts), "broadcast");
}

void GlooCommunicator::set_timeout(std::chrono::milliseconds timeout) {
  impl_->timeout = timeout;
}

void GlooCommunicator::barrier() {
  c10d::BarrierOptions opts;
  opts.timeout = impl_->timeout;
  impl_->wait(impl_->group->barrier(opts), "barrier");
}

}  // namespace lf
