// kohya LoRAModule's dropouts on a seeded stream (see header).
#include "model/lora_dropout.h"

#include <utility>
#include <vector>

#include <torch/torch.h>

namespace lf {
namespace {

struct DropoutStream {
  std::optional<at::Generator> generator;
  bool ignore_grad_mode = false;
};

DropoutStream& this_thread_stream() {
  thread_local DropoutStream stream;
  return stream;
}

// U[0, 1) draws of `sizes`, float32 on the CPU stream, then on `like`'s device.
at::Tensor uniform(at::Generator& gen, at::IntArrayRef sizes, const at::Tensor& like) {
  return at::rand(sizes, gen, at::TensorOptions().dtype(at::kFloat)).to(like.device());
}

}  // namespace

LoRADropoutScope::LoRADropoutScope(at::Generator generator, bool ignore_grad_mode) {
  DropoutStream& s = this_thread_stream();
  previous_ = std::move(s.generator);
  previous_ignore_grad_mode_ = s.ignore_grad_mode;
  s.generator = std::move(generator);
  s.ignore_grad_mode = ignore_grad_mode;
}

LoRADropoutScope::~LoRADropoutScope() {
  DropoutStream& s = this_thread_stream();
  s.generator = std::move(previous_);
  s.ignore_grad_mode = previous_ignore_grad_mode_;
}

std::optional<at::Generator> active_lora_dropout_generator() {
  const DropoutStream& s = this_thread_stream();
  if (!s.generator || !(s.ignore_grad_mode || torch::GradMode::is_enabled())) return std::nullopt;
  return s.generator;
}

bool skip_lora_module(const LoRADropout& d) {
  if (!(d.module_dropout > 0)) return false;
  std::optional<at::Generator> gen = active_lora_dropout_generator();
  if (!gen) return false;
  return at::rand({1}, *gen, at::TensorOptions().dtype(at::kFloat)).item<float>() <
         d.module_dropout;
}

at::Tensor apply_lora_dropout(const LoRADropout& d, const at::Tensor& h, bool conv, double* scale) {
  if (!(d.dropout > 0) && !(d.rank_dropout > 0)) return h;
  std::optional<at::Generator> gen = active_lora_dropout_generator();
  if (!gen) return h;
  at::Tensor out = h;
  if (d.dropout > 0) {  // torch.nn.functional.dropout(lx, p)
    const at::Tensor keep = uniform(*gen, h.sizes(), h) > d.dropout;
    out = out * (keep.to(at::kFloat) * (1.0 / (1.0 - d.dropout))).to(h.scalar_type());
  }
  if (d.rank_dropout > 0) {
    const int64_t batch = h.size(0);
    const int64_t rank = conv ? h.size(1) : h.size(-1);
    std::vector<int64_t> shape(static_cast<std::size_t>(h.dim()), 1);
    shape[0] = batch;
    shape[conv ? 1 : shape.size() - 1] = rank;
    const at::Tensor keep = uniform(*gen, {batch, rank}, h) > d.rank_dropout;
    out = out * keep.to(h.scalar_type()).view(shape);
    *scale = *scale * (1.0 / (1.0 - d.rank_dropout));  // kohya: as if the rank had changed
  }
  return out;
}

LoRADropoutReplay capture_lora_dropout() {
  LoRADropoutReplay r;
  r.live = active_lora_dropout_generator();
  if (r.live) r.saved = r.live->clone();
  return r;
}

}  // namespace lf
