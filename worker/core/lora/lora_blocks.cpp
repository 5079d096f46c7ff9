// kohya get_block_index (see header).
#include "lora/lora_blocks.h"

#include <regex>

namespace lf {
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// The integer after `prefix` at the start of `s` ("input_blocks_4_1_..." -> 4).
int number_after(const std::string& s, const std::string& prefix) {
  return std::stoi(s.substr(prefix.size()));
}

int sd_block_index(const std::string& name) {
  // kohya RE_UPDOWN, searched anywhere in the name.
  static const std::regex re(
      R"((up|down)_blocks_(\d+)_(resnets|upsamplers|downsamplers|attentions)_(\d+)_)");
  std::smatch m;
  if (std::regex_search(name, m, re)) {
    const int i = std::stoi(m[2]);
    const int j = std::stoi(m[4]);
    const bool sampler = m[3] == "upsamplers" || m[3] == "downsamplers";
    const int idx = 3 * i + (sampler ? 2 : j);
    return m[1] == "down" ? 1 + idx : 12 + 1 + idx;
  }
  return name.find("mid_block_") != std::string::npos ? 12 : -1;
}

int sdxl_block_index(const std::string& lora_name) {
  const std::string unet = "lora_unet_";
  if (!starts_with(lora_name, unet)) return -1;
  const std::string name = lora_name.substr(unet.size());
  if (starts_with(name, "time_embed_") || starts_with(name, "label_emb_")) return 0;
  if (starts_with(name, "input_blocks_")) return 1 + number_after(name, "input_blocks_");
  if (starts_with(name, "middle_block_")) return 10 + number_after(name, "middle_block_");
  if (starts_with(name, "output_blocks_")) return 13 + number_after(name, "output_blocks_");
  if (starts_with(name, "out_")) return 22;
  return -1;
}

}  // namespace

int kohya_block_index(const std::string& lora_name, bool sdxl) {
  return sdxl ? sdxl_block_index(lora_name) : sd_block_index(lora_name);
}

}  // namespace lf
