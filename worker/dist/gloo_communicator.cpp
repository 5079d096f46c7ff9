// Gloo collectives through LibTorch's c10d (see header). The wheel ships c10d's headers but not
// Gloo's; ProcessGroupGloo.hpp includes a few Gloo headers only for declarations, which come from
// Debian's libgloo-dev. Gloo objects are used only through the shared_ptr torch hands out, so the
// header version does not leak into any layout we depend on.
#include "worker/dist/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <exception>
#include <vector>

#include "worker/dist/c10d_store.h"
#include "worker/rpc/coordinator_client.h"

namespace lf {

struct GlooCommunicator::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::chrono::milliseconds timeout;

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

GlooCommunicator::GlooCommunicator(const GlooOptions& options)
    : impl_(std::make_unique<Impl>()), rank_(options.rank), world_size_(options.world_size) {
  impl_->timeout = options.timeout;
  if (options.store == nullptr || options.local_address.empty()) {
    throw CollectiveError("gloo: rank " + std::to_string(rank_) +
                          " needs a rendezvous store and a local address");
  }
  impl_->store = make_c10d_store(options.store, options.timeout);
  try {
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
    gloo_options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(options.local_address));
    impl_->group =
        c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, rank_, world_size_, gloo_options);
  } catch (const CoordinatorError&) {
    throw;  // the generation is over or the coordinator refused: its own exit code
  } catch (const std::exception& e) {
    throw CollectiveError("gloo: rank " + std::to_string(rank_) + " (bound to " +
                          options.local_address + ") could not join the group of world_size " +
                          std::to_string(world_size_) + " within " +
                          std::to_string(options.timeout.count() / 1000.0) + " s: " + e.what());
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
