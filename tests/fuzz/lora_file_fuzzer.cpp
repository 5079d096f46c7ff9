// LoRA file loading (network.network_weights) over arbitrary bytes: the file is written where
// load_network_weights and network_weights_module_dims (kohya --dim_from_weights) read it, and
// loaded into a small network of the kind the first input byte picks, so every layout
// normalize_lora_state_dict accepts reaches the name and shape checks of
// LoRANetwork::load_state_dict: kohya LoRA / LoCon, LyCORIS LoHa, LoKr and DoRA, kohya OFT, and
// the PEFT / diffusers / old attention-processor spellings on SD 1.x and SDXL names. Both must
// load or throw their documented std::runtime_error naming the file; any other exception, a
// crash, a hang or a sanitizer report is a finding. A load that succeeds must account for every
// module of the network (loaded or reported missing).
//
// Input: [network byte][the .safetensors file's bytes]. With bit 7 of the network byte set,
// the file's data_offsets are first made consistent with each entry's dtype and shape
// (consistent_offsets), so that mutated names, dtypes and shapes get past the safetensors size
// checks into the loaders. The low 7 bits % 6 pick the network:
//   0 tiny SD 1.x LoRA, network_dim 4 / alpha 2, LoCon conv_dim 2 / alpha 1, text encoder
//   1 tiny SD 1.x LyCORIS LoHa (rank 4, LoCon rank 2), UNet only
//   2 tiny SD 1.x LyCORIS LoKr (rank 2, factor 4, decompose_both, LoCon rank 2), UNet only
//   3 tiny SD 1.x kohya OFT (4 blocks, alpha 0.01, enable_conv), UNet only
//   4 tiny SDXL LoRA (ldm names, text encoders lora_te1 / lora_te2), rank 4 / alpha 2
//   5 tiny SD 1.x LoRA with LyCORIS dora_wd (dora_scale), rank 4 / alpha 2, text encoder
// The networks are built once (torch default init of the tiny presets); a load changes their
// adapter values only, which no check depends on.
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lora/lora_network.h"
#include "model/model_config.h"
#include "model/sd_models.h"
#include "tests/fuzz/fuzz_target.h"
#include "train/seeding.h"
#include "worker/io/lora_file.h"

namespace fs = std::filesystem;

namespace {

constexpr int kNetworks = 6;

struct FuzzNetwork {
  lf::SDModels models;
  std::unique_ptr<lf::LoRANetwork> lora;
};

lf::LoRANetworkOptions network_options(int kind) {
  lf::LoRANetworkOptions o;
  o.network_dim = 4;
  o.network_alpha = 2.0;
  switch (kind) {
    case 0:
      o.conv_dim = 2;
      o.conv_alpha = 1.0;
      break;
    case 1:
    case 2:
      o.algo = kind == 1 ? lf::LoRAAlgo::kLoHa : lf::LoRAAlgo::kLoKr;
      o.conv_dim = 2;
      o.conv_alpha = 1.0;
      o.train_text_encoder = false;
      if (kind == 2) {
        o.network_dim = 2;
        o.network_alpha = 1.0;
        o.lokr_factor = 4;
        o.decompose_both = true;
      }
      break;
    case 3:
      o.algo = lf::LoRAAlgo::kOFT;
      o.network_alpha = 0.01;
      o.oft_enable_conv = true;
      o.train_text_encoder = false;
      break;
    case 5: o.dora_wd = true; break;
    default: break;
  }
  return o;
}

FuzzNetwork& network(int kind) {
  static std::array<std::unique_ptr<FuzzNetwork>, kNetworks> networks;
  if (!networks[kind]) {
    auto n = std::make_unique<FuzzNetwork>();
    n->models = lf::build_sd_models(lf::model_preset(kind == 4 ? "tiny-sdxl" : "tiny"),
                                    /*with_decoder=*/false);
    const lf::LoRANetworkOptions options = network_options(kind);
    at::Generator init = lf::make_cpu_generator(static_cast<std::uint64_t>(kind) + 1);
    const std::vector<lf::LoRATextEncoderTarget> te =
        options.train_text_encoder ? lf::kohya_text_encoder_targets(n->models)
                                   : std::vector<lf::LoRATextEncoderTarget>{};
    n->lora = std::make_unique<lf::LoRANetwork>(
        n->models.unet, lf::unet_lora_naming(n->models.unet, /*ldm_names=*/kind == 4), te, options,
        init);
    networks[kind] = std::move(n);
  }
  return *networks[kind];
}

// Bytes per element of a safetensors dtype name (common/io/safetensors.h), 0 if unknown.
std::uint64_t dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, std::uint64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

// The safetensors image with every entry's data_offsets recomputed from its dtype and shape
// (contiguous, in header key order) and its bytes taken cyclically from the original data
// section. Left as given: a header that is not a JSON object, an entry without a known dtype and
// a shape of non-negative integers, and an image needing more than 1 MiB of data.
std::vector<std::uint8_t> consistent_offsets(const std::uint8_t* p, std::size_t n) {
  constexpr std::uint64_t kMaxData = 1 << 20;
  std::vector<std::uint8_t> same(p, p + n);
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0 && n >= 8; --i) header_len = header_len << 8 | p[i];
  if (n < 8 || header_len > n - 8) return same;
  nlohmann::json header = nlohmann::json::parse(p + 8, p + 8 + header_len, nullptr, false);
  if (!header.is_object()) return same;
  const std::uint8_t* source = p + 8 + header_len;
  const std::size_t source_len = n - 8 - header_len;
  std::vector<std::uint8_t> data;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__" || !entry.is_object() || !entry.contains("dtype") ||
        !entry["dtype"].is_string() || !entry.contains("shape") || !entry["shape"].is_array()) {
      continue;
    }
    std::uint64_t bytes = dtype_bytes(entry["dtype"].get<std::string>());
    bool ok = bytes != 0;
    for (const auto& dim : entry["shape"]) {
      ok = ok && dim.is_number_unsigned() && dim.get<std::uint64_t>() <= kMaxData;
      if (ok) bytes *= dim.get<std::uint64_t>();
      ok = ok && bytes <= kMaxData;
    }
    if (!ok) continue;
    if (data.size() + bytes > kMaxData) return same;
    entry["data_offsets"] = nlohmann::json::array({data.size(), data.size() + bytes});
    for (std::uint64_t i = 0; i < bytes; ++i) {
      data.push_back(source_len ? source[data.size() % source_len] : 0);
    }
  }
  const std::string text = header.dump();
  std::vector<std::uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(text.size() >> (8 * i));
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// A file of this process (the loaders take a path).
const std::string& input_path() {
  static const std::string path = [] {
    const fs::path dir = fs::temp_directory_path() / ("lf_fuzz_lora_" + std::to_string(getpid()));
    fs::create_directories(dir);
    return (dir / "network_weights.safetensors").string();
  }();
  return path;
}

// The documented refusal: a std::runtime_error whose message starts with the path.
void require_names_the_file(const std::runtime_error& e, const std::string& path) {
  if (std::getenv("LF_FUZZ_VERBOSE")) std::fprintf(stderr, "refused: %s\n", e.what());
  lf::fuzz::require(std::string(e.what()).rfind(path, 0) == 0, "a refusal names the file");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int kind = (data[0] & 0x7f) % kNetworks;
  FuzzNetwork& n = network(kind);
  const std::string& path = input_path();
  {
    const std::vector<std::uint8_t> file = (data[0] & 0x80)
                                               ? consistent_offsets(data + 1, size - 1)
                                               : std::vector<std::uint8_t>(data + 1, data + size);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(file.data()),
              static_cast<std::streamsize>(file.size()));
  }
  try {
    const lf::LoRALoadReport report = lf::load_network_weights(*n.lora, path);
    lf::fuzz::require(
        report.loaded_modules + report.missing_modules.size() == n.lora->module_names().size(),
        "a load accounts for every module of the network");
    if (std::getenv("LF_FUZZ_VERBOSE")) {
      std::fprintf(stderr, "network %d: loaded %zu modules (%s)\n", kind, report.loaded_modules,
                   report.variants.c_str());
    }
  } catch (const std::runtime_error& e) {
    require_names_the_file(e, path);
  }
  try {
    const auto dims = lf::network_weights_module_dims(path, n.lora->key_context());
    if (std::getenv("LF_FUZZ_VERBOSE")) std::fprintf(stderr, "dims of %zu modules\n", dims.size());
  } catch (const std::runtime_error& e) {
    require_names_the_file(e, path);
  }
  return 0;
}
