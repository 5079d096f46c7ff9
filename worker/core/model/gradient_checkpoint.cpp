// Recompute-in-backward autograd Function (see header).
#include "model/gradient_checkpoint.h"

#include <memory>
#include <optional>

#include <torch/torch.h>

#include "model/lora_compatible.h"
#include "model/lora_dropout.h"
#include "train/autocast.h"

namespace lf {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs, kept alive by the autograd node (a capsule in saved_data).
struct CheckpointState : torch::CustomClassHolder {
  CheckpointBody body;
  std::shared_ptr<const CheckpointHooks> hooks;
  std::vector<torch::Tensor> inputs;  // the forward's inputs (kept: the checkpoint's memory)
  std::vector<bool> input_requires_grad;
  std::vector<torch::Tensor> params;
  // Index in the Function's tensor arguments of inputs[i] (-1: undefined, not an argument), and
  // the number of tensor arguments (defined inputs, then params).
  std::vector<int> input_slot;
  std::size_t num_tensor_args = 0;
  AutocastState cpu_autocast;
  AutocastState cuda_autocast;
  // The LoRA dropout stream: the forward draws from it, the recompute replays its saved state.
  LoRADropoutReplay dropout;
};

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  // tensors = the defined inputs, then params; the state holds them for the body.
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<CheckpointState> state,
                               at::TensorList tensors) {
    (void)tensors;
    torch::Tensor out;
    if (state->hooks && state->hooks->begin) state->hooks->begin(false);
    {
      torch::NoGradGuard no_grad;
      std::optional<LoRADropoutScope> dropout;
      if (state->dropout.live) dropout.emplace(*state->dropout.live, /*ignore_grad_mode=*/true);
      out = state->body(state->inputs);
    }
    if (state->hooks && state->hooks->end) state->hooks->end(false);
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(
        ctx->saved_data["state"].toCapsule());
    const std::size_t n_in = state->inputs.size();
    // One gradient per argument: the state, then every tensor argument.
    variable_list grads(1 + state->num_tensor_args);
    if (!grad_outputs[0].defined()) return grads;
    std::vector<torch::Tensor> detached(n_in);
    std::vector<torch::Tensor> wrt;
    std::vector<std::size_t> slot;  // grads index of each wrt entry
    for (std::size_t i = 0; i < n_in; ++i) {
      if (state->input_slot[i] < 0) continue;
      detached[i] = state->inputs[i].detach().requires_grad_(state->input_requires_grad[i]);
      if (state->input_requires_grad[i]) {
        wrt.push_back(detached[i]);
        slot.push_back(1 + static_cast<std::size_t>(state->input_slot[i]));
      }
    }
    const std::size_t first_param = state->num_tensor_args - state->params.size();
    for (std::size_t j = 0; j < state->params.size(); ++j) {
      if (!state->params[j].requires_grad()) continue;
      wrt.push_back(state->params[j]);
      slot.push_back(1 + first_param + j);
    }
    if (state->hooks && state->hooks->begin) state->hooks->begin(true);
    torch::Tensor out;
    {
      torch::AutoGradMode grad_mode(true);
      AutocastScope cpu(c10::DeviceType::CPU, state->cpu_autocast);
      AutocastScope cuda(c10::DeviceType::CUDA, state->cuda_autocast);
      // A fresh copy of the state the forward started from: the same masks again.
      std::optional<LoRADropoutScope> dropout;
      if (state->dropout.saved) dropout.emplace(state->dropout.saved->clone());
      out = state->body(detached);
    }
    if (out.requires_grad() && !wrt.empty()) {
      const variable_list g = torch::autograd::grad({out}, wrt, {grad_outputs[0]},
                                                    /*retain_graph=*/false,
                                                    /*create_graph=*/false,
                                                    /*allow_unused=*/true);
      for (std::size_t k = 0; k < g.size(); ++k) grads[slot[k]] = g[k];
    }
    out = torch::Tensor();
    if (state->hooks && state->hooks->end) state->hooks->end(true);
    return grads;
  }
};

}  // namespace

torch::Tensor checkpointed(const CheckpointBody& body, const std::vector<torch::Tensor>& inputs,
                           const std::vector<torch::Tensor>& params,
                           std::shared_ptr<const CheckpointHooks> hooks) {
  auto state = c10::make_intrusive<CheckpointState>();
  state->body = body;
  state->hooks = std::move(hooks);
  state->inputs = inputs;
  state->params = params;
  state->cpu_autocast = autocast_state(c10::DeviceType::CPU);
  state->cuda_autocast = autocast_state(c10::DeviceType::CUDA);
  state->dropout = capture_lora_dropout();
  // Undefined inputs are no autograd arguments (the Function would reject them).
  std::vector<torch::Tensor> tensors;
  tensors.reserve(inputs.size() + params.size());
  for (const auto& x : inputs) {
    state->input_requires_grad.push_back(x.defined() && x.requires_grad());
    state->input_slot.push_back(x.defined() ? static_cast<int>(tensors.size()) : -1);
    if (x.defined()) tensors.push_back(x);
  }
  for (const auto& p : params) tensors.push_back(p);
  state->num_tensor_args = tensors.size();
  return CheckpointFunction::apply(std::move(state), at::TensorList(tensors))[0];
}

torch::Tensor CheckpointableBlock::run_block(const torch::nn::Module& self,
                                             const CheckpointBody& body,
                                             const std::vector<torch::Tensor>& inputs) const {
  if (!torch::GradMode::is_enabled()) {
    // Inference (e.g. a no-grad forward): nothing to recompute, but streamed weights still
    // have to come onto the device for the call.
    if (hooks_ && hooks_->begin) hooks_->begin(false);
    torch::Tensor out = body(inputs);
    if (hooks_ && hooks_->end) hooks_->end(false);
    return out;
  }
  if (checkpointing_) return checkpointed(body, inputs, attached_lora_tensors(self), hooks_);
  // Without checkpointing the block's inputs pass through one alias each, so that the
  // gradients of an input's uses inside the block are summed there first, then added to its
  // uses elsewhere: the same association as the checkpointed block, whose backward returns one
  // gradient per input. Floating-point sums are not associative, and with this the two give
  // bit-identical gradients (an input used inside the block twice and by a skip connection
  // once would otherwise be summed in another order).
  std::vector<torch::Tensor> grouped = inputs;
  for (torch::Tensor& x : grouped) {
    // alias, not view_as: a view recomputes the strides of size-1 dimensions, and kernels that
    // follow would lay out their outputs differently from the checkpointed forward's.
    if (x.defined() && x.requires_grad()) x = at::alias(x);
  }
  return body(grouped);
}

std::vector<CheckpointableBlock*> checkpointable_blocks(torch::nn::Module& model) {
  std::vector<CheckpointableBlock*> out;
  for (const auto& m : model.modules(/*include_self=*/true)) {
    if (auto* block = dynamic_cast<CheckpointableBlock*>(m.get())) out.push_back(block);
  }
  return out;
}

std::size_t set_gradient_checkpointing(torch::nn::Module& model, bool on) {
  const std::vector<CheckpointableBlock*> blocks = checkpointable_blocks(model);
  for (CheckpointableBlock* block : blocks) block->set_gradient_checkpointing(on);
  return blocks.size();
}

std::vector<torch::Tensor> attached_lora_tensors(const torch::nn::Module& module) {
  std::vector<torch::Tensor> out;
  for (const auto& m : module.modules(/*include_self=*/true)) {
    const std::shared_ptr<LoRAAdapter>* adapter = nullptr;
    if (const auto* linear = m->as<LoRACompatibleLinearImpl>()) adapter = &linear->adapter();
    if (const auto* conv = m->as<LoRACompatibleConvImpl>()) adapter = &conv->adapter();
    if (adapter && *adapter) {
      out.push_back((*adapter)->down);
      out.push_back((*adapter)->up);
    }
  }
  return out;
}

}  // namespace lf
