// lorafleet-bench-scan-prepare: the per-image work of a dataset scan + latent-cache preparation
// on N threads: read the file, decode (EXIF orientation, RGB conversion), choose the kohya
// bucket (resolution 512, min 256, max 1024, steps 64), resize to cover and centre-crop.
// bench/scan_prepare_peer.py does the same the way kohya sd-scripts does (Pillow + cv2 +
// numpy); bench/run_scan_prepare_bench.sh runs both and prints the ratio (bench/README.md).
//
// usage: lorafleet-bench-scan-prepare --dir DIR [--threads N] [--repeats R] [--dump FILE]
// Prints one JSON line: images, threads, seconds (best of the repeats), images_per_s, and
// bucket_digest (identical on both sides when every image got the same bucket and resize).
// --dump writes "name bucket_w bucket_h resized_w resized_h mean_pixel" per image.
#include <opencv2/core.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "common/data/bucket_manager.h"
#include "common/image/decoded_image.h"
#include "common/image/prepared_image.h"

namespace {

struct Result {
  lf::BucketSelection sel;
  double mean = 0;
};

bool is_image(const std::filesystem::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".webp" || ext == ".bmp";
}

// One pass over all files on `threads` threads; files are handed out one at a time.
double run_once(const std::vector<std::string>& files, int threads,
                const lf::BucketManager& buckets, std::vector<Result>& results) {
  std::atomic<std::size_t> next{0};
  auto worker = [&]() {
    lf::DecodeOptions opt;
    opt.keep_alpha = false;  // the peer's convert("RGB") keeps no alpha either
    for (std::size_t i; (i = next.fetch_add(1)) < files.size();) {
      const std::vector<std::uint8_t> bytes = lf::read_file_bytes(files[i]);
      const lf::DecodedImage img = lf::decode_image(files[i], bytes, opt);
      const lf::BucketSelection sel = buckets.select(img.width, img.height);
      const lf::PreparedImage out = lf::prepare_image(img, sel, lf::CropFlip{}, false);
      std::uint64_t sum = 0;
      for (std::uint8_t v : out.rgb) sum += v;
      results[i].sel = sel;
      results[i].mean = static_cast<double>(sum) / static_cast<double>(out.rgb.size());
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, dump;
  int threads = 1, repeats = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--dir") dir = value();
    else if (a == "--threads") threads = std::stoi(value());
    else if (a == "--repeats") repeats = std::stoi(value());
    else if (a == "--dump") dump = value();
    else {
      std::cerr << "usage: lorafleet-bench-scan-prepare --dir DIR [--threads N] [--repeats R] "
                   "[--dump FILE]\n";
      return 2;
    }
  }
  if (dir.empty() || threads < 1 || repeats < 1) {
    std::cerr << "--dir DIR is required; --threads and --repeats must be >= 1\n";
    return 2;
  }
  // Parallelism comes from the N worker threads only (as the peer's N processes): OpenCV's own
  // pool inside resize/cvtColor would use cores beyond N.
  cv::setNumThreads(1);

  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && is_image(e.path())) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::cerr << dir << ": no png/jpg/jpeg/webp/bmp files\n";
    return 1;
  }
  lf::BucketOptions bo;  // resolution 512, enable_bucket, min 256, max 1024, steps 64
  const lf::BucketManager buckets(bo);

  std::vector<Result> results(files.size());
  run_once(files, threads, buckets, results);  // warm-up: page cache, allocator, codec tables
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) best = std::min(best, run_once(files, threads, buckets, results));

  std::uint64_t digest = 0;
  for (const Result& r : results) {
    digest += static_cast<std::uint64_t>(r.sel.bucket.width) * 1000003u +
              static_cast<std::uint64_t>(r.sel.bucket.height) * 1009u +
              static_cast<std::uint64_t>(r.sel.resized_width) * 31u +
              static_cast<std::uint64_t>(r.sel.resized_height);
  }
  if (!dump.empty()) {
    std::ofstream f(dump);
    for (std::size_t i = 0; i < files.size(); ++i) {
      const Result& r = results[i];
      f << std::filesystem::path(files[i]).filename().string() << ' ' << r.sel.bucket.width << ' '
        << r.sel.bucket.height << ' ' << r.sel.resized_width << ' ' << r.sel.resized_height << ' '
        << r.mean << '\n';
    }
  }
  std::printf(
      "{\"impl\": \"lorafleet\", \"images\": %zu, \"threads\": %d, \"repeats\": %d, "
      "\"seconds\": %.4f, \"images_per_s\": %.2f, \"bucket_digest\": %llu}\n",
      files.size(), threads, repeats, best, static_cast<double>(files.size()) / best,
      static_cast<unsigned long long>(digest));
  return 0;
}
