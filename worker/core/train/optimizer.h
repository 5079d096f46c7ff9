// The optimizer interface of the LoRA training: kohya sd-scripts' optimizer_type choices
// (train_util.get_optimizer) behind one class that steps the LoRA parameters with an externally
// scheduled lr, keeps kohya's per-parameter lr groups (unet_lr, text_encoder_lr, LoRA+,
// block-wise) as lr multipliers, steps half-precision parameters (full_fp16 / full_bf16)
// through float32 copies, and saves / restores its whole state bit for bit for resume.
//
// The algorithms live one per file under train/optim/; make_optimizer.h builds one by kohya's
// name. clip_grad_norm is in train/grad_clip.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>  // torch::Tensor

namespace lf {

class LoRAOptimizer {
 public:
  virtual ~LoRAOptimizer();
  LoRAOptimizer(const LoRAOptimizer&) = delete;
  LoRAOptimizer& operator=(const LoRAOptimizer&) = delete;

  // One optimizer step: parameter i moves with lr x multiplier i (a multiplier of 0 leaves it
  // frozen for the lr-free parts of the algorithm too, as a torch param group with lr 0).
  // Parameters without a grad are skipped (the worker's all-reduce gives every parameter one;
  // a skipped parameter still counts the step, unlike torch's per-parameter count). Half params
  // are copied to float32, stepped there with float32 state, and rounded back once.
  void step(double lr);
  // Resets every parameter's grad to undefined (set_to_none, like torch's default); grads may
  // be views (e.g. of a flat all-reduce buffer).
  void zero_grad();
  // Optimizer steps taken so far (0 before the first step).
  int64_t step_count() const { return steps_; }

  // kohya's optimizer_type spelling of this algorithm ("AdamW", "Prodigy", ...).
  virtual std::string type() const = 0;
  // The lr kohya logs after the last step, given `lr`, the scheduled lr of the group the run
  // reports: `lr` itself for most, d x lr for Prodigy / D-Adaptation, the relative step size of
  // the first parameter for Adafactor's relative_step (transformers AdafactorSchedule).
  virtual double logged_lr(double lr) const { return lr; }

  // Schedule-free optimizers keep two sequences: training steps y, evaluation uses x. These
  // swap the parameters to x (before a LoRA file or checkpoint is written, as kohya calls
  // optimizer.eval() before saving) and back to y (optimizer.train()). A no-op elsewhere.
  virtual void use_eval_weights() {}
  virtual void use_train_weights() {}

  // The whole state as named tensors: "<param_names[i]>.<slot>" per parameter (float32 for
  // half params; the params' device), the optimizer's scalars as 0-dim float64 / int64
  // tensors, "step" (0-dim int64) and "optimizer.<type()>" (a 0-dim marker, so that a resume
  // with another optimizer_type is refused). Throws std::invalid_argument if param_names.size()
  // differs from the parameter count.
  std::map<std::string, torch::Tensor> state_dict(
      const std::vector<std::string>& param_names) const;
  // Restores a state_dict() exactly (bit for bit, moved to each parameter's device), so that
  // the following steps equal an uninterrupted run. A state without a marker is AdamW's (the
  // format before other optimizers existed). Throws std::runtime_error naming the optimizer of
  // the checkpoint when it differs, and the missing keys or mismatched shapes.
  void load_state_dict(const std::map<std::string, torch::Tensor>& state,
                       const std::vector<std::string>& param_names);
  // The type() a state_dict() was saved by: its marker, or "AdamW" for a state without one.
  static std::string saved_type(const std::map<std::string, torch::Tensor>& state);

  const std::vector<torch::Tensor>& params() const { return params_; }
  const std::vector<double>& lr_multipliers() const { return multipliers_; }

 protected:
  // `params` are the trainable tensors (LoRANetwork::parameters()), one lr multiplier each
  // (empty = all 1). Throws std::invalid_argument if params is empty, a tensor does not require
  // grad, or the multiplier count differs from the parameter count.
  LoRAOptimizer(std::vector<torch::Tensor> params, std::vector<double> lr_multipliers);

  // The algorithm's step over targets() (the params, or their float32 copies), whose grads
  // are set; lrs[i] = lr x multiplier i. Called with steps_ already counting this step.
  virtual void update(const std::vector<double>& lrs) = 0;
  // The algorithm's state in and out; "step" and the marker are handled here. load_state
  // throws std::runtime_error listing what is missing or mismatched.
  virtual void save_state(const std::vector<std::string>& param_names,
                          std::map<std::string, torch::Tensor>& out) const = 0;
  virtual void load_state(const std::map<std::string, torch::Tensor>& state,
                          const std::vector<std::string>& param_names) = 0;

  // What update() steps: params_ themselves, or float32 copies of half params_.
  std::vector<torch::Tensor>& targets() { return targets_; }
  const std::vector<torch::Tensor>& targets() const { return targets_; }
  // Copies the params into the float32 targets (half params only), and rounds them back.
  void pull_targets();
  void push_targets();

 private:
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> targets_;
  std::vector<double> multipliers_;
  bool half_ = false;
  int64_t steps_ = 0;
};

// Per-parameter tensors and global scalars of an algorithm, saved as "<name>.<slot>" and
// "<scalar>" (float64): the state of every optimizer under train/optim/ but AdamW (which keeps
// torch::optim::AdamW's).
struct OptimizerSlots {
  // slots[i]: parameter i's state, empty until its first step (as torch's lazy state).
  std::vector<std::map<std::string, torch::Tensor>> slots;
  std::map<std::string, double> scalars;

  void save(const std::vector<std::string>& param_names,
            std::map<std::string, torch::Tensor>& out) const;
  // Reads back what save() wrote for `param_names` and the scalars named in `scalars` (their
  // current values are the defaults of a fresh optimizer and must all be present), every
  // tensor onto `like[i]`'s device. A parameter with any state must have every `required`
  // slot, and the parameter-shaped slots (exp_avg, exp_avg_sq, z, momentum_buffer) its shape.
  // Throws std::runtime_error listing what is missing or mismatched.
  void load(const std::map<std::string, torch::Tensor>& state,
            const std::vector<std::string>& param_names, const std::vector<torch::Tensor>& like,
            const std::vector<std::string>& required);
};

// An optimizer whose state is OptimizerSlots (every one under train/optim/): saves and loads it,
// requiring `required_slots` of every parameter that has state.
class SlotStateOptimizer : public LoRAOptimizer {
 protected:
  SlotStateOptimizer(std::vector<torch::Tensor> params, std::vector<double> lr_multipliers,
                     std::vector<std::string> required_slots);

  OptimizerSlots state_;

 private:
  void save_state(const std::vector<std::string>& param_names,
                  std::map<std::string, torch::Tensor>& out) const override;
  void load_state(const std::map<std::string, torch::Tensor>& state,
                  const std::vector<std::string>& param_names) override;

  std::vector<std::string> required_slots_;
};

// Throws std::invalid_argument unless every multiplier is the largest one or 0: Prodigy and
// D-Adaptation estimate one d for all groups ("Setting different lr values in different
// parameter groups is only supported for values of 0", prodigyopt / dadaptation).
void require_one_lr_or_zero(const std::string& type, const std::vector<double>& lr_multipliers);

}  // namespace lf
