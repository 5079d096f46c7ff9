// Family detection and loading of the base checkpoint (see header).
#include "worker/train/base_model.h"

#include <stdexcept>

#include "worker/core/model/model_config.h"
#include "worker/core/model/unet.h"
#include "worker/io/tensor_file.h"

namespace lf {
namespace {

// architecture "auto": the family's full-size preset, or its tiny one (generated test and demo
// checkpoints) when the UNet's width says so. Shapes beyond the width are the loader's to check.
std::string preset_for(ModelFamily family, const KeyShapes& shapes) {
  const char* full = family == ModelFamily::kSD1   ? "sd15"
                     : family == ModelFamily::kSD2 ? "sd2"
                                                   : "sdxl";
  const char* tiny = family == ModelFamily::kSD1   ? "tiny"
                     : family == ModelFamily::kSD2 ? "tiny-sd2"
                                                   : "tiny-sdxl";
  auto it = shapes.find(std::string(kUNetCheckpointPrefix) + "input_blocks.0.0.weight");
  if (it != shapes.end() && !it->second.empty() &&
      it->second[0] == model_preset(tiny).unet.model_channels) {
    return tiny;
  }
  return full;
}

}  // namespace

BaseModel load_base_model(const ModelSection& model, const SDModelDtypes& dtypes,
                          bool with_decoder) {
  const std::string& path = model.pretrained_model_name_or_path;
  // Zero-copy views in the stored dtype: the conversion happens in load_sd_models' copy_.
  LoadedTensors file =
      load_safetensors(path, !model.disable_mmap_load_safetensors, kKeepStoredDtype);
  KeyShapes shapes;
  for (const auto& [key, tensor] : file.tensors) {
    shapes.emplace(key, std::vector<int64_t>(tensor.sizes().begin(), tensor.sizes().end()));
  }
  BaseModel out;
  try {
    const ModelFamily family = detect_model_family(shapes);
    const std::string preset_name =
        model.architecture == "auto" ? preset_for(family, shapes) : model.architecture;
    ModelPreset preset = model_preset(preset_name);
    if (preset.family != family) {
      throw std::runtime_error("model.architecture '" + model.architecture + "' is a " +
                               family_name(preset.family) + " preset, but the checkpoint's keys "
                               "and shapes are " + family_name(family) +
                               "'s (use architecture: auto)");
    }
    out.summary = describe_checkpoint(shapes, family) + " (preset " + preset_name + ")";
    out.models = build_sd_models(preset, with_decoder, dtypes);
    load_sd_models(out.models, file.tensors);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    // A checkpoint of no supported family, or not the one model.architecture names: bad input
    // (exit 3), every restart would load the same file.
    throw ConfigError(path + ": " + e.what());
  }
  return out;
}

}  // namespace lf
