// Keeping the LoRA parameters identical on every rank: rank 0's initial values are broadcast,
// each step's gradients are summed with ONE fused allreduce (all gradients and the loss sum in
// one flat buffer), and an optional digest check proves the ranks still agree.
// All functions are collective: every rank calls them in the same order.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "worker/dist/communicator.h"

namespace lf {

// Copies root's parameter values to every rank (one fused broadcast; half-precision parameters
// travel as float32, exactly, since MPI has no half types).
void broadcast_parameters(Communicator& comm, const std::vector<at::Tensor>& params, int root);

// The stop and sample votes of one step: each goes in as this rank's 0 / 1 and comes out as the
// number of ranks voting.
struct StepVotes {
  double preempt = 0.0;        // SIGTERM seen (worker/app/preemption.h)
  double operator_stop = 0.0;  // lorafleet-ctl stop or Ctrl-C (SIGINT) seen
  double sample_now = 0.0;     // an unhandled lorafleet-ctl sample-now request seen
};

// The per-step scalars that ride in the gradient allreduce: each goes in as this rank's value and
// comes out summed over ranks, so every rank agrees on them at no extra collective.
struct StepSums {
  double loss_sum = 0.0;    // this rank's loss sum -> the global one
  // This rank's votes -> the ranks voting, per kind; nullopt: not sent.
  std::optional<StepVotes> votes;
  // fp16 loss scaling: check this rank's gradients and loss for Inf / NaN and send the flag
  // (false: no check; the buffer and its reduction stay as without scaling).
  bool check_finite = false;
  double nonfinite_ranks = 0.0;  // out: the ranks whose gradients or loss held Inf / NaN
};

// Sums every parameter's .grad() over ranks in place (a rank with no samples contributes zeros;
// undefined grads become defined) together with `sums`, in one allreduce of one flat buffer:
// [grads | loss_sum | 3 votes | non-finite flag], float32 whatever the parameters' dtype (a
// half gradient is summed in float32 and rounded once). Callers scale the loss by 1 / global
// batch size before backward, so the summed gradient is the exact global-batch mean. With
// check_finite, returns whether every rank's gradients and loss and their sums are finite (the
// same answer on every rank) and, when they are, multiplies the reduced gradients by `unscale`
// (1 / the loss scale) in float32 before writing them back; without it, returns true.
bool allreduce_gradients(Communicator& comm, const std::vector<at::Tensor>& params,
                         StepSums& sums, double unscale = 1.0);

// Sums `values` over ranks in one allreduce (float32 on the wire, as the gradients), on the
// backend's device (that of `params` for NCCL). For the few scalars outside a training step,
// e.g. the validation loss sum and its count.
std::vector<double> allreduce_scalars(Communicator& comm, const std::vector<double>& values,
                                      const std::vector<at::Tensor>& params);

// SHA-256 over all parameters' bytes; compares with rank 0's digest. Returns this rank's digest;
// throws std::runtime_error naming the rank if it differs from rank 0's.
std::string verify_parameters_in_sync(Communicator& comm, const std::vector<at::Tensor>& params);

}  // namespace lf
