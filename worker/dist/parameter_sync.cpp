// Parameter synchronisation (see header). Tensors are moved to where the backend works (CUDA
// for NCCL, CPU for MPI) and back, so the training device and the backend can differ.
#include "worker/dist/parameter_sync.h"

#include <torch/torch.h>

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

}  // namespace

void broadcast_parameters(Communicator& comm, const std::vector<at::Tensor>& params, int root) {
  if (params.empty()) return;
  torch::NoGradGuard no_grad;
  at::Tensor flat = flatten(params).detach();
  on_backend_device(comm, flat, cuda_device_of(params),
                    [&](at::Tensor& t) { comm.broadcast(t, root); });
  int64_t offset = 0;
  for (const auto& p : params) {
    p.detach().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
}

double allreduce_gradients(Communicator& comm, const std::vector<at::Tensor>& params,
                           double local_loss_sum, double* stop_votes) {
  if (params.empty()) throw std::invalid_argument("allreduce_gradients: no parameters");
  std::vector<at::Tensor> parts;
  parts.reserve(params.size() + 1);
  for (const auto& p : params) {
    parts.push_back(p.grad().defined() ? p.grad() : torch::zeros_like(p));
  }
  parts.push_back(torch::full({1}, local_loss_sum, params[0].options()));
  if (stop_votes != nullptr) parts.push_back(torch::full({1}, *stop_votes, params[0].options()));
  at::Tensor flat = flatten(parts);
  on_backend_device(comm, flat, cuda_device_of(params),
                    [&](at::Tensor& t) { comm.allreduce_sum(t); });
  int64_t offset = 0;
  for (auto p : params) {
    at::Tensor g = flat.narrow(0, offset, p.numel()).view_as(p);
    if (p.grad().defined()) {
      p.mutable_grad().copy_(g);
    } else {
      p.mutable_grad() = g.clone();
    }
    offset += p.numel();
  }
  if (stop_votes != nullptr) *stop_votes = flat[offset + 1].item<double>();
  return flat[offset].item<double>();
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
