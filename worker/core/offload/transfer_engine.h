// Moving frozen weights between host memory and the training device for weight streaming. On
// CUDA, host copies are pinned and device copies are made on a side stream, so they overlap the
// compute stream's work, and the compute stream waits only when it needs them. On the CPU (the
// tests of the streaming logic) copies are synchronous clones.
#pragma once

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace lf {

class TransferEngine {
 public:
  virtual ~TransferEngine() = default;
  // The host copy a streamed weight lives in between its uses (pinned memory on CUDA).
  virtual at::Tensor host_copy(const at::Tensor& weight) = 0;
  // Starts copying `host` onto the device; the copies are usable once wait() returned.
  // Returns an opaque ticket for wait().
  virtual std::shared_ptr<void> start(const std::vector<at::Tensor>& host,
                                      std::vector<at::Tensor>* device_copies) = 0;
  // Makes the current (compute) stream wait for the copies of `ticket` (none when null: they
  // were waited for already) and marks them as used on it, so the caching allocator does not
  // reuse them while it still reads them.
  virtual void wait(const std::shared_ptr<void>& ticket,
                    const std::vector<at::Tensor>& device_copies) = 0;
  // The compute stream is done with one unit's copies once its queued work so far has run (the
  // caller drops them next). The caching allocator can only reuse their memory after that, so
  // a host running ahead of the device would allocate fresh memory for every next copy.
  virtual void released() = 0;
  // Blocks the host until at most `n` released units may still be in use on the device: with
  // `streams` units the bound of device memory the weights take, as the planner reserved it.
  virtual void wait_for_released(std::size_t n) = 0;
  // Returns the allocator's cached, unused device memory to the device. After the streamed
  // weights moved to host memory their old device blocks stay cached for the compute stream,
  // where the side stream's copies cannot use them.
  virtual void release_cached_memory() = 0;
};

// A CUDA engine for a CUDA device (throws std::runtime_error when this build has no CUDA), the
// synchronous one for the CPU.
std::unique_ptr<TransferEngine> make_transfer_engine(at::Device device);

}  // namespace lf
