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
  // Makes the current (compute) stream wait for the copies of `ticket` and marks them as used
  // on it, so the caching allocator does not reuse them while it still reads them.
  virtual void wait(const std::shared_ptr<void>& ticket,
                    const std::vector<at::Tensor>& device_copies) = 0;
};

// A CUDA engine for a CUDA device (throws std::runtime_error when this build has no CUDA), the
// synchronous one for the CPU.
std::unique_ptr<TransferEngine> make_transfer_engine(at::Device device);

}  // namespace lf
