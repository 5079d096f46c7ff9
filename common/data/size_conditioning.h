// SDXL's micro-conditioning of one training sample: the six integers (original_size,
// crop_coords_top_left, target_size) that the UNet receives as sinusoidal embeddings beside the
// pooled text embedding (sgm ConcatTimestepEmbedderND; diffusers add_time_ids).
//
// kohya approximates the crop with a letterbox formula from the original size and ignores
// random_crop (sd-scripts library/train_util.py BaseDataset.__getitem__, crop_ltrb from
// BucketManager.get_crop_ltrb); lorafleet knows each sample's real crop from the epoch
// plan, so it sends what SDXL was trained on: the true pixel offset of the bucket window inside
// the resized image.
#pragma once

#include <array>

#include "common/data/dataset.h"
#include "common/image/prepared_image.h"

namespace lf {

// {original_h, original_w, crop_top, crop_left, target_h, target_w}, in pixels:
//   original = the image's decoded size after EXIF orientation (before any resize);
//   crop     = the top-left corner of the bucket window in the resized image (centre when
//              crop_flip says -1), mirrored when flipped: left' = resized_w - (left + bucket_w),
//              the offset of the same window in the flipped image;
//   target   = the bucket.
// Throws std::invalid_argument when the crop does not fit the resized image.
std::array<float, 6> sdxl_size_conditioning(const ImageRecord& image, const CropFlip& crop_flip);

}  // namespace lf
