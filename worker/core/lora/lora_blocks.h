// kohya's block index of a UNet LoRA module (kohya-ss/sd-scripts networks/lora.py
// get_block_index), which the block-wise options (down/mid/up_lr_weight, block_dims, ...) are
// indexed by:
//   SD 1.x/2.x (diffusers names), 25 blocks: down_blocks_i_{resnets,attentions}_j -> 1 + 3i + j,
//     down_blocks_i_downsamplers_0 -> 3 + 3i, mid_block_* -> 12,
//     up_blocks_i_{resnets,attentions}_j -> 13 + 3i + j, up_blocks_i_upsamplers_0 -> 15 + 3i;
//   SDXL (ldm names), 23 blocks: time_embed / label_emb -> 0, input_blocks_n -> 1 + n,
//     middle_block_n -> 10 + n, output_blocks_n -> 13 + n, out -> 22.
#pragma once

#include <string>

namespace lf {

// The block of kohya module `lora_name` ("lora_unet_down_blocks_1_attentions_0_proj_in"), or -1
// for a name outside these patterns (text-encoder modules).
int kohya_block_index(const std::string& lora_name, bool sdxl);

}  // namespace lf
