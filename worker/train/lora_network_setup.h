// The LoRA network's options from the job's network section, as kohya train_network.py and
// networks.lora derive them: network_dim / network_alpha, conv_dim / conv_alpha, the parts that
// train, the per-block ranks of block_dims and the block lr weights (create_network with
// get_block_dims_and_alphas / remove_block_dims_and_alphas, common/config/kohya_blocks.h), the
// dropouts (--network_dropout, rank_dropout, module_dropout), and with dim_from_weights every
// module's rank and alpha from network_weights (create_network_from_weights).
#pragma once

#include <string>
#include <vector>

#include "common/config/job_config.h"
#include "worker/core/lora/lora_network.h"

namespace lf {

struct LoRANetworkSetup {
  LoRANetworkOptions options;
  std::vector<std::string> notes;  // kohya's warnings about the block lists, for the log
};

// Throws ConfigError "<source>: key 'network.<key>': ..." when a per-block list does not fit the
// model's family (25 blocks for SD 1.x/2.x, 23 for SDXL), and std::runtime_error naming the file
// when dim_from_weights cannot read network_weights.
LoRANetworkSetup lora_network_setup(const JobConfig& config, SDModels& models);

}  // namespace lf
