// The training-time dropouts of a LoRA module, as kohya networks.lora LoRAModule.forward applies
// them (kohya-ss/sd-scripts networks/lora.py), in its order: module dropout (the module is
// skipped for this call), dropout of lora_down's output (torch.nn.functional.dropout), then rank
// dropout (one mask per sample over the ranks, the scale divided by 1 - p).
//
// Determinism: the random numbers come from a CPU generator the training step installs with a
// LoRADropoutScope (seeded per step, worker/train/rng_streams.h), so they do not depend on the
// device, the thread or the global generator. Dropout acts only while such a scope is installed
// and grad mode is on: an inference or no-grad forward drops nothing. Gradient checkpointing
// (gradient_checkpoint.h) keeps the generator's state at the start of each checkpointed block
// and replays it in the backward recompute, as torch.utils.checkpoint's preserve_rng_state
// does, so the recompute draws the forward's masks.
#pragma once

#include <optional>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace lf {

// The dropout probabilities of one module, each in [0, 1); 0 is off (kohya's None).
struct LoRADropout {
  double dropout = 0.0;         // kohya --network_dropout (kohya's neuron_dropout)
  double rank_dropout = 0.0;    // kohya network_args rank_dropout
  double module_dropout = 0.0;  // kohya network_args module_dropout
  bool any() const { return dropout > 0 || rank_dropout > 0 || module_dropout > 0; }
};

// Installs `generator` (a CPU generator) as this thread's dropout stream until destruction, then
// restores the one before. With ignore_grad_mode the stream is active under no-grad too (the
// forward of a checkpointed block, which runs without grad but is part of a training step).
class LoRADropoutScope {
 public:
  explicit LoRADropoutScope(at::Generator generator, bool ignore_grad_mode = false);
  ~LoRADropoutScope();
  LoRADropoutScope(const LoRADropoutScope&) = delete;
  LoRADropoutScope& operator=(const LoRADropoutScope&) = delete;

 private:
  std::optional<at::Generator> previous_;
  bool previous_ignore_grad_mode_;
};

// The stream the dropouts draw from now: the innermost scope's generator while grad mode is on
// (or the scope ignores it); std::nullopt when dropout is off.
std::optional<at::Generator> active_lora_dropout_generator();

// kohya module dropout: true when this call should skip the module (one U[0, 1) draw, below
// d.module_dropout). False, drawing nothing, when module_dropout is 0 or dropout is off.
bool skip_lora_module(const LoRADropout& d);

// kohya's dropout and rank dropout of lora_down's output h: [B, r, H, W] for a conv module
// (`conv`), [B, r] or [B, T, r] for a Linear one (rank axis last). Dropout draws a U[0, 1) per
// element of h, keeps those above p and scales them by 1 / (1 - p); rank dropout draws [B, r],
// keeps the ranks above p (broadcast over T or H, W) and multiplies *scale by
// 1 / (1 - rank_dropout). Draws are float32 on the CPU, moved to h's device; the masks take h's
// dtype. Returns h itself (and leaves *scale) when neither acts.
at::Tensor apply_lora_dropout(const LoRADropout& d, const at::Tensor& h, bool conv, double* scale);

// The dropout stream at the start of a checkpointed block: `live` is the stream the forward
// draws from (it advances as without checkpointing), `saved` a copy of its state before the
// block, which the backward recompute replays. Both unset when dropout is off.
struct LoRADropoutReplay {
  std::optional<at::Generator> live;
  std::optional<at::Generator> saved;
};
LoRADropoutReplay capture_lora_dropout();

}  // namespace lf
