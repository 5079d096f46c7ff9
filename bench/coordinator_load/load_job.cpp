// write_load_job: PNGs through common/image/png_encode.h, captions and the job YAML.
#include "bench/coordinator_load/load_job.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "common/image/png_encode.h"

namespace lf::load {
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f.flush()) throw std::runtime_error("cannot write " + path.string());
}

// A smooth gradient offset by the image's index: distinct content (and content hash) per image
// that compresses to a few kilobytes.
std::string gradient_png(int index, int width, int height) {
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      std::uint8_t* p = &rgb[(static_cast<std::size_t>(y) * width + x) * 3];
      p[0] = static_cast<std::uint8_t>(x + index);
      p[1] = static_cast<std::uint8_t>(y + index / 256);
      p[2] = static_cast<std::uint8_t>((x + y) / 2);
    }
  }
  return encode_png_rgb(rgb, width, height, {});
}

// kohya-style tags: the trigger word first (keep_tokens 1), then 6 of 40 tags.
std::string caption(int index) {
  std::string text = "sks load";
  for (int t = 0; t < 6; ++t) text += ", tag" + std::to_string((index * 7 + t * 13) % 40);
  return text;
}

std::string job_yaml(const fs::path& dir, const LoadJobOptions& o) {
  const std::string d = dir.string();
  return "model:\n"
         "  pretrained_model_name_or_path: " +
         d +
         "/model.safetensors\n"
         "  tokenizer_vocab: " +
         d +
         "/vocab.txt.gz\n"
         "dataset:\n"
         "  train_data_dir: " +
         d +
         "/train\n"
         "  resolution: 128\n"
         "  min_bucket_reso: 64\n"
         "  max_bucket_reso: 256\n"
         "  bucket_reso_steps: 64\n"
         "  caption_extension: .txt\n"
         "  shuffle_caption: " +
         (o.shuffle_caption ? "true" : "false") +
         "\n"
         "  keep_tokens: 1\n"
         "training:\n"
         "  seed: " +
         std::to_string(o.seed) +
         "\n"
         "  train_batch_size: " +
         std::to_string(o.batch_size) +
         "\n"
         "  max_train_steps: " +
         std::to_string(o.max_train_steps) +
         "\n"
         "output:\n"
         "  output_dir: " +
         d +
         "/out\n"
         "coordinator:\n"
         "  listen_address: 127.0.0.1:0\n"
         "  metrics_address: 127.0.0.1:0\n"
         "  worker_timeout_seconds: " +
         std::to_string(o.worker_timeout_seconds) +
         "\n"
         "  linger_seconds: " +
         std::to_string(o.linger_seconds) + "\n";
}

}  // namespace

std::string write_load_job(const std::string& dir, const LoadJobOptions& o) {
  if (o.images < 1 || o.num_repeats < 1) {
    throw std::invalid_argument("load job: images and num_repeats must be >= 1, got " +
                                std::to_string(o.images) + " and " + std::to_string(o.num_repeats));
  }
  const fs::path root(dir);
  const fs::path images = root / "train" / (std::to_string(o.num_repeats) + "_load");
  fs::create_directories(images);
  // Square, 3:1 and 1:3: the buckets 128x128, 192x64 and 64x192 of 128 px at 64 px steps.
  const int sizes[3][2] = {{128, 128}, {192, 64}, {64, 192}};
  for (int i = 0; i < o.images; ++i) {
    char stem[32];
    std::snprintf(stem, sizeof stem, "img-%05d", i);
    write_text(images / (std::string(stem) + ".png"),
               gradient_png(i, sizes[i % 3][0], sizes[i % 3][1]));
    write_text(images / (std::string(stem) + ".txt"), caption(i) + "\n");
  }
  // An empty safetensors file (8-byte header length, "{}" padded) and a vocabulary stand-in.
  write_text(root / "model.safetensors", std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  write_text(root / "vocab.txt.gz", "placeholder");
  const fs::path yaml = root / "job.yaml";
  write_text(yaml, job_yaml(root, o));
  return yaml.string();
}

}  // namespace lf::load
