// Gradient checkpointing of one block: the forward runs without keeping activations and the
// backward runs it again, with gradients, to get the block's input and LoRA gradients. Mirrors
// torch.utils.checkpoint as diffusers applies it per ResBlock and transformer block (and
// transformers per CLIP encoder layer); written as a C++ autograd Function because LibTorch has
// no torch.utils.checkpoint. The recompute runs the same ops on the same values, replays the
// LoRA dropout stream from where the block's forward started (lora_dropout.h; torch's
// preserve_rng_state), re-enters the forward's autocast state, and so gives bit-identical
// results on the CPU.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

namespace lf {

// The block's computation: inputs (in the order given to checkpointed) -> one output tensor.
using CheckpointBody = std::function<torch::Tensor(const std::vector<torch::Tensor>& inputs)>;

// Called around every run of a checkpointed body (weight streaming, worker/core/offload):
// begin(recompute) before, end(recompute) after; recompute true in backward.
struct CheckpointHooks {
  std::function<void(bool recompute)> begin;
  std::function<void(bool recompute)> end;
};

// Runs body(inputs) under NoGrad and returns its output, wired into autograd so that backward
// recomputes body(detached inputs) with gradients and returns d/d inputs (those requiring grad)
// and d/d params. `params` are the trainable tensors the body uses that are not inputs (the
// block's LoRA weights): without them a block whose inputs need no gradient would get none.
// Inputs may be undefined (passed through as undefined). Only call it while grad mode is on;
// with grad mode off run the body directly.
torch::Tensor checkpointed(const CheckpointBody& body, const std::vector<torch::Tensor>& inputs,
                           const std::vector<torch::Tensor>& params,
                           std::shared_ptr<const CheckpointHooks> hooks = nullptr);

// The checkpointing switch of one block class (ResBlock, BasicTransformerBlock,
// CLIPEncoderLayer): a mix-in beside torch::nn::Module. Off by default.
class CheckpointableBlock {
 public:
  virtual ~CheckpointableBlock() = default;
  void set_gradient_checkpointing(bool on) { checkpointing_ = on; }
  bool gradient_checkpointing() const { return checkpointing_; }
  // Hooks around every run of this block's body while checkpointing (null: none).
  // The hooks stay alive for a pending backward even if they are replaced meanwhile.
  void set_checkpoint_hooks(std::shared_ptr<const CheckpointHooks> hooks) {
    hooks_ = std::move(hooks);
  }

 protected:
  // body(inputs) directly, or through checkpointed() with the LoRA tensors attached inside
  // `self` when checkpointing is on and grad mode is enabled.
  torch::Tensor run_block(const torch::nn::Module& self, const CheckpointBody& body,
                          const std::vector<torch::Tensor>& inputs) const;

 private:
  bool checkpointing_ = false;
  std::shared_ptr<const CheckpointHooks> hooks_;
};

// Every CheckpointableBlock inside `model`, in module order (for the UNet and the CLIP encoder
// this is the order the forward runs them).
std::vector<CheckpointableBlock*> checkpointable_blocks(torch::nn::Module& model);

// Turns checkpointing on or off for every block of `model`; returns how many blocks there are.
std::size_t set_gradient_checkpointing(torch::nn::Module& model, bool on);

// The down / up tensors of every LoRA adapter attached to a LoRA-compatible layer in `module`
// (the `params` of checkpointed), in module order.
std::vector<torch::Tensor> attached_lora_tensors(const torch::nn::Module& module);

}  // namespace lf
