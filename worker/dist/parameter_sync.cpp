// Parameter synchronisation (see header). Tensors are moved to where the backend works (CUDA
// for NCCL, CPU for MPI) and back, so the training device and the backend can differ.
#include "worker/dist/parameter_sync.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

#include "common/io/sha256.h"

namespace lf {
namespace {

// Runs `op` on a copy of `t` placed where the backend needs it, then copies the result back.
template <typename Op>
void on_backend_device(Communicator& comm, at::Tensor& t, const at::Device& cuda_device, Op op) {
  const bool want_cuda = comm.backend() == "nccl";
  if (want_cuda == t.is_cuda()) {
    op(t);
    return;
  }
  at::Tensor staged = (want_cuda ? t.to(cuda_device) : t.to(at::kCPU)).contiguous();
  op(staged);
  t.copy_(staged);
}

at::Device cuda_device_of(const std::vector<at::Tensor>& params) {
  for (const auto& p : params) {
    if (p.is_cuda()) return p.device();
  }
  return at::Device(at::kCUDA, 0);
}

at::Tensor flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> parts;
  parts.reserve(tensors.size());
  for (const auto& t : tensors) parts.push_back(t.reshape({-1}));
  return torch::cat(parts).contiguous();
}

// The collectives' buffer dtype: float32 for half-precision parameters (full_fp16 / full_bf16),
// which every backend can reduce and which converts both ways exactly; the parameters' own
// otherwise.
at::TensorOptions wire_options(const std::vector<at::Tensor>& params) {
  const at::TensorOptions o = params[0].options();
  return o.dtype() == at::kHalf || o.dtype() == at::kBFloat16 ? o.dtype(at::kFloat) : o;
}

}  // namespace

void broadcast_parameters(Communicator& comm, const std::vector<at::Tensor>& params, int root) {
  if (params.empty()) return;
  torch::NoGradGuard no_grad;
  at::Tensor flat = flatten(params).detach().to(wire_options(params).dtype());
  on_backend_device(comm, flat, cuda_device_of(params),
                    [&](at::Tensor& t) { comm.broadcast(t, root); });
  int64_t offset = 0;
  for (const auto& p : params) {
    p.detach().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
}

bool allreduce_gradients(Communicator& comm, const std::vector<at::Tensor>& params,
                         StepSums& sums, double unscale) {
  if (params.empty()) throw std::invalid_argument("allreduce_gradients: no parameters");
  torch::NoGradGuard no_grad;
  const at::TensorOptions wire = wire_options(params);
  std::vector<at::Tensor> parts;
  parts.reserve(params.size() + 3);
  for (const auto& p : params) {
    parts.push_back((p.grad().defined() ? p.grad() : torch::zeros_like(p)).to(wire.dtype()));
  }
  std::int64_t numel = 0;
  for (const auto& p : params) numel += p.numel();
  auto scalar = [&](double v) { return torch::full({1}, v, wire); };
  parts.push_back(scalar(sums.loss_sum));
  if (sums.votes) {
    parts.push_back(scalar(sums.votes->preempt));
    parts.push_back(scalar(sums.votes->operator_stop));
    parts.push_back(scalar(sums.votes->sample_now));
  }
  if (sums.check_finite) parts.push_back(scalar(0.0));
  at::Tensor flat = flatten(parts);
  if (sums.check_finite) {  // one check of the whole local buffer, before it is reduced
    const bool local_bad = !std::isfinite(sums.loss_sum) ||
                           !at::isfinite(flat.narrow(0, 0, numel)).all().item<bool>();
    flat[flat.numel() - 1] = local_bad ? 1.0 : 0.0;
  }
  on_backend_device(comm, flat, cuda_device_of(params),
                    [&](at::Tensor& t) { comm.allreduce_sum(t); });
  at::Tensor grads = flat.narrow(0, 0, numel);
  // The scalars after the gradients, read in one device-to-host copy.
  const at::Tensor tail = flat.narrow(0, numel, flat.numel() - numel).to(at::kCPU, at::kDouble);
  const double* scalars = tail.data_ptr<double>();
  std::int64_t slot = 0;
  sums.loss_sum = scalars[slot++];
  if (sums.votes) {
    sums.votes->preempt = scalars[slot++];
    sums.votes->operator_stop = scalars[slot++];
    sums.votes->sample_now = scalars[slot++];
  }
  bool finite = true;
  if (sums.check_finite) {
    sums.nonfinite_ranks = scalars[slot++];
    finite = sums.nonfinite_ranks == 0 && std::isfinite(sums.loss_sum) &&
             at::isfinite(grads).all().item<bool>();
    if (finite && unscale != 1.0) grads.mul_(unscale);
  }
  std::int64_t offset = 0;
  for (auto p : params) {
    at::Tensor g = grads.narrow(0, offset, p.numel()).view_as(p);
    if (p.grad().defined()) {
      p.mutable_grad().copy_(g);
    } else {
      p.mutable_grad() = g.to(p.scalar_type()).clone();
    }
    offset += p.numel();
  }
  return finite;
}

std::vector<double> allreduce_scalars(Communicator& comm, const std::vector<double>& values,
                                      const std::vector<at::Tensor>& params) {
  at::Tensor t = torch::tensor(std::vector<float>(values.begin(), values.end()), torch::kFloat);
  on_backend_device(comm, t, cuda_device_of(params), [&](at::Tensor& x) { comm.allreduce_sum(x); });
  const at::Tensor cpu = t.to(at::kCPU).to(torch::kDouble).contiguous();
  const double* p = cpu.data_ptr<double>();
  return std::vector<double>(p, p + values.size());
}

std::string verify_parameters_in_sync(Communicator& comm, const std::vector<at::Tensor>& params) {
  at::Tensor all = flatten(params).detach().to(at::kCPU).contiguous();
  const std::string digest = sha256_hex(all.data_ptr(), all.nbytes());
  at::Tensor mine = torch::from_blob(const_cast<char*>(digest.data()),
                                     {static_cast<int64_t>(digest.size())}, torch::kByte)
                        .clone();
  at::Tensor root = mine.clone();
  on_backend_device(comm, root, cuda_device_of(params),
                    [&](at::Tensor& t) { comm.broadcast(t, 0); });
  if (!torch::equal(mine, root.to(at::kCPU))) {
    throw std::runtime_error("rank " + std::to_string(comm.rank()) +
                             " holds LoRA weights that differ from rank 0's (digest " + digest +
                             ")");
  }
  return digest;
}

}  // namespace lf
