// kohya LoRA key names from ldm / HF module paths (see header).
#include "lora/lora_naming.h"

#include <sstream>
#include <stdexcept>

namespace lf {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

bool parse_index(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 6) return false;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
  }
  *out = std::stoll(s);
  return true;
}

std::string join(const std::vector<std::string>& parts, size_t from) {
  std::string s;
  for (size_t i = from; i < parts.size(); ++i) s += (s.empty() ? "" : ".") + parts[i];
  return s;
}

std::string underscored(std::string s) {
  for (char& ch : s) {
    if (ch == '.') ch = '_';
  }
  return s;
}

// ResBlock children: ldm (kohya sdxl_original_unet) <-> diffusers (kohya original_unet).
const std::pair<const char*, const char*> kResBlockChildren[] = {
    {"in_layers.2", "conv1"},
    {"emb_layers.1", "time_emb_proj"},
    {"out_layers.3", "conv2"},
    {"skip_connection", "conv_shortcut"},
};

// One ldm UNet layer path, located in the block wiring.
struct LdmLocation {
  enum Kind { kOther, kRes, kTransformer, kDown, kUp } kind = kOther;
  enum Part { kInput, kMiddle, kOutput } part = kInput;
  int64_t level = 0;  // input: level i; output: reversed level i'; middle: 0
  int64_t index = 0;  // j within the level (middle: 0 / 1 for the two ResBlocks)
  std::string rest;   // the path below the block (ResBlock child, transformer sub-path)
};

[[noreturn]] void bad_path(const std::string& path, const std::string& why) {
  throw std::invalid_argument("not a LoRA-targetable ldm UNet layer path: \"" + path + "\" (" +
                              why + ")");
}

LdmLocation locate_ldm(const std::string& path, const UNetLoRANaming& naming) {
  const std::vector<std::string> p = split(path, '.');
  const int64_t L = naming.num_res_blocks;
  const int64_t levels = static_cast<int64_t>(naming.level_has_attention.size());
  LdmLocation loc;
  if (p.empty() || (p[0] != "input_blocks" && p[0] != "middle_block" && p[0] != "output_blocks")) {
    return loc;  // time_embed, label_emb, out: no kohya target class
  }
  int64_t n = 0, s = 0;
  if (p.size() < 3 || !parse_index(p[1], &n)) bad_path(path, "expected <blocks>.<n>.<layer>");
  if (p[0] == "middle_block") {
    loc.part = LdmLocation::kMiddle;
    loc.rest = join(p, 2);
    if (n == 1) {
      loc.kind = LdmLocation::kTransformer;
    } else if (n == 0 || n == 2) {
      loc.kind = LdmLocation::kRes;
      loc.index = n / 2;
    } else {
      bad_path(path, "middle_block has children 0, 1, 2");
    }
    return loc;
  }
  if (p[0] == "input_blocks" && n == 0) return loc;  // conv_in
  if (p.size() < 4 || !parse_index(p[2], &s)) bad_path(path, "expected <blocks>.<n>.<k>.<layer>");
  loc.rest = join(p, 3);
  if (p[0] == "input_blocks") {
    loc.part = LdmLocation::kInput;
    loc.level = (n - 1) / (L + 1);
    loc.index = (n - 1) % (L + 1);
    if (loc.level >= levels) bad_path(path, "input block beyond the last level");
    if (loc.index == L) {
      if (loc.level == levels - 1 || s != 0) bad_path(path, "no downsample there");
      loc.kind = LdmLocation::kDown;
    } else if (s == 0) {
      loc.kind = LdmLocation::kRes;
    } else if (s == 1 && naming.level_has_attention[loc.level]) {
      loc.kind = LdmLocation::kTransformer;
    } else {
      bad_path(path, "no SpatialTransformer at that level");
    }
    return loc;
  }
  loc.part = LdmLocation::kOutput;
  loc.level = n / (L + 1);
  loc.index = n % (L + 1);
  if (loc.level >= levels) bad_path(path, "output block beyond the last level");
  const bool attention = naming.level_has_attention[levels - 1 - loc.level];
  const bool has_up = loc.index == L && loc.level < levels - 1;
  if (s == 0) {
    loc.kind = LdmLocation::kRes;
  } else if (s == 1 && attention) {
    loc.kind = LdmLocation::kTransformer;
  } else if (has_up && s == (attention ? 2 : 1)) {
    loc.kind = LdmLocation::kUp;
  } else {
    bad_path(path, "no such child in this output block");
  }
  return loc;
}

std::string resblock_child_to_diffusers(const std::string& child, const std::string& path) {
  for (const auto& c : kResBlockChildren) {
    if (child == c.first) return c.second;
  }
  bad_path(path, "ResBlock layers are in_layers.2, emb_layers.1, out_layers.3, skip_connection");
}

std::string to_diffusers(const LdmLocation& loc, const std::string& path) {
  const std::string i = std::to_string(loc.level), j = std::to_string(loc.index);
  switch (loc.kind) {
    case LdmLocation::kRes: {
      const std::string child = resblock_child_to_diffusers(loc.rest, path);
      if (loc.part == LdmLocation::kMiddle) return "mid_block.resnets." + j + "." + child;
      return (loc.part == LdmLocation::kInput ? "down_blocks." : "up_blocks.") + i + ".resnets." +
             j + "." + child;
    }
    case LdmLocation::kTransformer:
      if (loc.rest != "proj_in" && loc.rest != "proj_out" &&
          loc.rest.rfind("transformer_blocks.", 0) != 0) {
        bad_path(path, "SpatialTransformer layers are proj_in, proj_out, transformer_blocks.*");
      }
      if (loc.part == LdmLocation::kMiddle) return "mid_block.attentions.0." + loc.rest;
      return (loc.part == LdmLocation::kInput ? "down_blocks." : "up_blocks.") + i +
             ".attentions." + j + "." + loc.rest;
    case LdmLocation::kDown:
      if (loc.rest != "op") bad_path(path, "a Downsample's layer is op");
      return "down_blocks." + i + ".downsamplers.0.conv";
    case LdmLocation::kUp:
      if (loc.rest != "conv") bad_path(path, "an Upsample's layer is conv");
      return "up_blocks." + i + ".upsamplers.0.conv";
    case LdmLocation::kOther: break;
  }
  bad_path(path, "not inside a ResBlock, SpatialTransformer, Downsample or Upsample");
}

}  // namespace

UNetLoRAName kohya_unet_lora_name(const std::string& ldm_layer_path, const UNetLoRANaming& naming) {
  const LdmLocation loc = locate_ldm(ldm_layer_path, naming);
  UNetLoRAName out;
  if (loc.kind == LdmLocation::kOther) return out;
  // Validates the child names in both namings (kohya's SDXL UNet has the same children).
  const std::string diffusers = to_diffusers(loc, ldm_layer_path);
  out.scope = loc.kind == LdmLocation::kTransformer ? UNetLoRAScope::kTransformer
                                                    : UNetLoRAScope::kResBlock;
  out.name = "lora_unet_" + underscored(naming.ldm_names ? ldm_layer_path : diffusers);
  return out;
}

std::string ldm_to_diffusers_unet_path(const std::string& ldm_path, const UNetLoRANaming& naming) {
  const LdmLocation loc = locate_ldm(ldm_path, naming);
  return to_diffusers(loc, ldm_path);
}

std::string diffusers_to_ldm_unet_path(const std::string& path, const UNetLoRANaming& naming) {
  const std::vector<std::string> p = split(path, '.');
  const int64_t L = naming.num_res_blocks;
  const int64_t levels = static_cast<int64_t>(naming.level_has_attention.size());
  auto fail = [&](const std::string& why) -> std::string {
    throw std::invalid_argument("cannot map diffusers UNet path \"" + path +
                                "\" to the ldm layout (" + why + ")");
  };
  auto res_child = [&](size_t from) {
    const std::string child = join(p, from);
    for (const auto& c : kResBlockChildren) {
      if (child == c.second) return std::string(c.first);
    }
    return fail("resnet layers are conv1, time_emb_proj, conv2, conv_shortcut");
  };
  int64_t i = 0, j = 0;
  if (p.size() >= 4 && p[0] == "mid_block" && parse_index(p[2], &j)) {
    if (p[1] == "attentions" && j == 0 && p.size() > 3) return "middle_block.1." + join(p, 3);
    if (p[1] == "resnets" && j <= 1)
      return "middle_block." + std::to_string(2 * j) + "." + res_child(3);
    return fail("mid_block has attentions.0 and resnets.0/1");
  }
  if (p.size() < 5 || (p[0] != "down_blocks" && p[0] != "up_blocks") || !parse_index(p[1], &i) ||
      !parse_index(p[3], &j)) {
    return fail("expected down_blocks / mid_block / up_blocks");
  }
  if (i >= levels) return fail("block index beyond the last level");
  const bool down = p[0] == "down_blocks";
  const bool attention = naming.level_has_attention[down ? i : levels - 1 - i];
  const std::string kind = p[2];
  if (down) {
    const std::string n = std::to_string(1 + i * (L + 1) + j);
    if (kind == "resnets" && j < L) return "input_blocks." + n + ".0." + res_child(4);
    if (kind == "attentions" && j < L && attention) return "input_blocks." + n + ".1." + join(p, 4);
    if (kind == "downsamplers" && j == 0 && i < levels - 1 && join(p, 4) == "conv") {
      return "input_blocks." + std::to_string((i + 1) * (L + 1)) + ".0.op";
    }
    return fail("no such down-block layer in this wiring");
  }
  const std::string n = std::to_string(i * (L + 1) + j);
  if (kind == "resnets" && j <= L) return "output_blocks." + n + ".0." + res_child(4);
  if (kind == "attentions" && j <= L && attention) return "output_blocks." + n + ".1." + join(p, 4);
  if (kind == "upsamplers" && j == 0 && i < levels - 1 && join(p, 4) == "conv") {
    return "output_blocks." + std::to_string(i * (L + 1) + L) + (attention ? ".2" : ".1") + ".conv";
  }
  return fail("no such up-block layer in this wiring");
}

bool is_text_encoder_lora_target(const std::string& path, int64_t* layer) {
  const std::vector<std::string> p = split(path, '.');
  int64_t i = 0;
  if (p.size() != 5 || p[0] != "encoder" || p[1] != "layers" || !parse_index(p[2], &i)) {
    return false;
  }
  const bool attn = p[3] == "self_attn" && (p[4] == "q_proj" || p[4] == "k_proj" ||
                                            p[4] == "v_proj" || p[4] == "out_proj");
  const bool mlp = p[3] == "mlp" && (p[4] == "fc1" || p[4] == "fc2");
  if (!attn && !mlp) return false;
  if (layer) *layer = i;
  return true;
}

std::string kohya_text_encoder_lora_name(const std::string& prefix,
                                         const std::string& text_model_layer_path) {
  return prefix + "_text_model_" + underscored(text_model_layer_path);
}

}  // namespace lf
