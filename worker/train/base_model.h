// The user's base checkpoint, loaded for training: the family detected from the file's keys and
// shapes (or the named preset checked against them), every network built and loaded through one
// path, with one summary line. Real SD 1.x / 2.x / XL files and the generated tiny checkpoints
// go through the same code.
#pragma once

#include <string>

#include "common/config/job_config.h"
#include "worker/core/model/sd_models.h"

namespace lf {

struct BaseModel {
  SDModels models;      // frozen, eval mode, on the CPU (the caller moves them)
  std::string summary;  // "sdxl checkpoint: UNet 2,567,463,684 parameters, ..." for the log
};

// Loads model.pretrained_model_name_or_path with model.architecture:
//  - "auto": detect_model_family() picks sd15, sd2 or sdxl (full size), or the family's tiny
//    preset when the UNet's width is the tiny one (lorafleet-make-checkpoint's test models);
//  - a preset name: that preset, which must be of the detected family.
// The networks are built in `dtypes` (kohya's weight_dtype / vae_dtype). The file is
// memory-mapped unless model.disable_mmap_load_safetensors, and each tensor is converted to its
// parameter's dtype only as it is copied into it, so a checkpoint is never held twice in
// memory. The VAE decoder is built only `with_decoder` (sample images; training only encodes).
// Throws std::runtime_error whose message starts with the file's path: missing file, a .ckpt
// pickle (refused, with a hint to convert it), not safetensors, no UNet keys, an unsupported
// variant (inpaint, refiner), a preset of another family, or the loader's missing / unexpected
// keys and shape mismatches.
BaseModel load_base_model(const ModelSection& model, const SDModelDtypes& dtypes = {},
                          bool with_decoder = false);

}  // namespace lf
