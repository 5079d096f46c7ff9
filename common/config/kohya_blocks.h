// kohya's block-wise network_args of networks.lora (kohya-ss/sd-scripts networks/lora.py):
// down_lr_weight / mid_lr_weight / up_lr_weight with their presets and block_lr_zero_threshold
// (parse_block_lr_kwargs, get_block_lr_weight), and block_dims / block_alphas / conv_block_dims /
// conv_block_alphas (get_block_dims_and_alphas, remove_block_dims_and_alphas). The values are
// kohya's strings ("sine+0.5", "1,1,0.5,...") as the job's network section holds them; the
// results are indexed by kohya's block index (get_block_index, worker/core/lora/lora_blocks.h):
//   SD 1.x/2.x: 25 blocks, 0-11 down (0 is conv_in, no LoRA), 12 mid, 13-24 up;
//   SDXL:       23 blocks, 0 time/label embedding, 1-9 input, 10-12 middle, 13-21 output, 22 out.
// Torch-free: the coordinator checks the syntax at start-up, the worker expands the values once
// it knows the model family.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lf {

struct NetworkSection;

// kohya LoRANetwork.NUM_OF_BLOCKS / NUM_OF_MID_BLOCKS (SD) and SDXL_NUM_OF_BLOCKS /
// SDXL_NUM_OF_MID_BLOCKS: the length of down_lr_weight / up_lr_weight and of mid_lr_weight.
int kohya_down_up_blocks(bool sdxl);  // 12 / 9
int kohya_mid_blocks(bool sdxl);      // 1 / 3
// The length of block_dims and the other per-block lists: 25 (12 + 1 + 12) / 23 (1 + 9 + 3 + 9 +
// 1).
int kohya_total_blocks(bool sdxl);

// kohya get_block_lr_weight's presets for n (>= 2) blocks, i = 0 .. n-1, each plus `offset`
// (the "+number" suffix): sine sin(pi/2 * i/(n-1)), cosine the same reversed, linear i/(n-1),
// reverse_linear reversed, zeros 0. Throws std::invalid_argument for another name.
std::vector<double> kohya_lr_weight_preset(const std::string& name, double offset, int n);

// The per-block lr weights (kohya_total_blocks entries) of down/mid/up_lr_weight, as kohya
// get_block_lr_weight: a preset or comma-separated numbers (an empty entry is 0), a list that
// is too long cut and one too short filled with 1 (a note says so), weights not above
// block_lr_zero_threshold set to 0, a part not given all 1, and SDXL's embedding and out
// blocks 1. `weights` is empty when none of the three keys is given.
struct KohyaBlockLrWeights {
  std::vector<double> weights;
  std::vector<std::string> notes;  // kohya's warnings (cut / filled lists), for the log
};
// Throws std::invalid_argument "network.<key>: ..." for a value that is neither form.
KohyaBlockLrWeights kohya_block_lr_weights(const NetworkSection& n, bool sdxl);

// The per-block ranks and alphas of the UNet's modules, as kohya create_network resolves them
// once block_dims or a block lr weight is given (else `active` is false and all are empty):
// dims / alphas from block_dims / block_alphas (else network_dim / network_alpha for every
// block), conv_dims / conv_alphas from conv_block_dims / conv_block_alphas (else conv_dim /
// conv_alpha when conv_dim > 0, else empty: no LoCon), and every block whose lr weight is 0
// gets rank 0 (no modules), as remove_block_dims_and_alphas. Alphas of 0 mean the rank, as
// everywhere. Throws std::invalid_argument "network.<key>: ..." for a list of another length
// than kohya_total_blocks(sdxl) or an entry that is not a number.
struct KohyaBlockDims {
  bool active = false;
  std::vector<int> dims;
  std::vector<double> alphas;
  std::vector<int> conv_dims;  // empty: the 3x3 convs get no modules
  std::vector<double> conv_alphas;
};
KohyaBlockDims kohya_block_dims(const NetworkSection& n, bool sdxl,
                                const std::vector<double>& lr_weights);

// The start-up check of these keys for either family: the syntax of every value, list lengths
// that fit SD 1.x/2.x or SDXL, block_alphas / conv_block_* only where kohya reads them, and
// dim_from_weights (kohya create_network_from_weights) only with network_weights and without the
// options it does not take (block_dims and friends, the three dropouts). The first problem as
// {"network.<key>", problem}, or std::nullopt.
struct NetworkKeyProblem {
  std::string key;
  std::string problem;
};
std::optional<NetworkKeyProblem> check_block_network_args(const NetworkSection& n);

}  // namespace lf
