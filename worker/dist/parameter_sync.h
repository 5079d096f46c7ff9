// Keeping the LoRA parameters identical on every rank: rank 0's initial values are broadcast,
// each step's gradients are summed with ONE fused allreduce (all gradients and the loss sum in
// one flat buffer), and an optional digest check proves the ranks still agree.
// All functions are collective: every rank calls them in the same order.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "worker/dist/communicator.h"

namespace lf {

// Copies root's parameter values to every rank (one fused broadcast).
void broadcast_parameters(Communicator& comm, const std::vector<at::Tensor>& params, int root);

// Sums every parameter's .grad() over ranks in place (a rank with no samples contributes zeros;
// undefined grads become defined) together with local_loss_sum, in one allreduce. Returns the
// global loss sum. Callers scale the loss by 1 / global batch size before backward, so the
// summed gradient is the exact global-batch mean. With `stop_votes`, this rank's vote (0 or 1:
// SIGTERM seen) rides in the same buffer and is replaced by the sum over ranks, so every rank
// agrees on the step to stop after at no extra collective.
double allreduce_gradients(Communicator& comm, const std::vector<at::Tensor>& params,
                           double local_loss_sum, double* stop_votes = nullptr);

// SHA-256 over all parameters' bytes; compares with rank 0's digest. Returns this rank's digest;
// throws std::runtime_error naming the rank if it differs from rank 0's.
std::string verify_parameters_in_sync(Communicator& comm, const std::vector<at::Tensor>& params);

}  // namespace lf
