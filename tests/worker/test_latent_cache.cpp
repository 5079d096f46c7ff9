// LatentCache over real scanned files, with a stand-in "VAE" (8x8 average pooling, three colour
// channels plus their mean, no noise) whose output can be checked exactly: disk entries are
// reused by a new cache, an image overwritten with other content of the same size is
// re-encoded (issue 3), a corrupt entry names the cache file and the image, flipping the image
// flips the latents, and alpha_mask gives the area-averaged alpha at latent size.
#include "worker/train/latent_cache.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "common/data/dataset.h"
#include "tests/common/fixtures.h"
#include "worker/train/latent_disk_cache.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

// [1,3,H,W] in [-1,1] -> [1,4,H/8,W/8]: per-channel 8x8 means, then their mean as channel 4.
at::Tensor pool_encoder(const at::Tensor& pixels, std::uint64_t /*noise_seed*/) {
  at::Tensor rgb = torch::avg_pool2d(pixels, 8);
  return torch::cat({rgb, rgb.mean(1, /*keepdim=*/true)}, 1);
}

// A 512x512 RGB PNG whose pixels depend on `salt`.
void write_image(const fs::path& path, int salt) {
  std::vector<std::uint16_t> s;
  for (int y = 0; y < 512; ++y) {
    for (int x = 0; x < 512; ++x) {
      s.push_back(static_cast<std::uint16_t>((x * 3 + salt) % 256));
      s.push_back(static_cast<std::uint16_t>((y + salt * 7) % 256));
      s.push_back(static_cast<std::uint16_t>((x ^ y) % 256));
    }
  }
  test::write_png(path.string(), 512, 512, 2, 8, s);
}

Dataset scan(const fs::path& root, bool alpha_mask = false, int resolution = 512) {
  DatasetConfig d;
  d.train_data_dir = root.string();
  d.buckets.resolution_w = d.buckets.resolution_h = resolution;
  d.buckets.min_bucket_reso = 64;
  d.folder_defaults.alpha_mask = alpha_mask;
  d.folder_defaults.flip_aug = true;
  ScanOptions o;
  o.datasets = {d};
  return scan_dataset(o);
}

int count_files(const fs::path& dir) {
  int n = 0;
  if (!fs::exists(dir)) return 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

TEST(LatentCache, DiskEntriesAreReusedAndAnOverwrittenImageIsReencoded) {
  test::TempDir dir("latent_cache");
  fs::create_directories(dir.path() / "data/1_x");
  const fs::path image = dir.path() / "data/1_x/a.png";
  write_image(image, 1);
  const std::string cache_dir = dir.str("cache");
  int calls = 0;
  auto counting = [&](const at::Tensor& p, std::uint64_t seed) {
    ++calls;
    return pool_encoder(p, seed);
  };
  LatentCache::Options o;
  o.disk_dir = cache_dir;
  o.vae_identity = "pool8";

  const Dataset before = scan(dir.path() / "data");
  at::Tensor first;
  {
    LatentCache cache(before, o, counting);
    first = cache.get(0, {}).latents;
    EXPECT_EQ(first.sizes(), (at::IntArrayRef{4, 64, 64}));
    EXPECT_EQ(calls, 1);
    EXPECT_TRUE(torch::equal(cache.get(0, {}).latents, first));  // memory hit
    EXPECT_EQ(calls, 1);
  }
  EXPECT_EQ(count_files(cache_dir), 1);
  {
    LatentCache again(before, o, counting);  // a later run: read from disk, not encoded
    EXPECT_TRUE(torch::equal(again.get(0, {}).latents, first));
    EXPECT_EQ(calls, 1);
  }

  write_image(image, 2);  // same size, other content
  const Dataset after = scan(dir.path() / "data");
  ASSERT_NE(after.images[0].content_sha256, before.images[0].content_sha256);
  LatentCache rescanned(after, o, counting);
  const at::Tensor second = rescanned.get(0, {}).latents;
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(torch::equal(second, first));
  EXPECT_EQ(count_files(cache_dir), 2);
  // The stand-in encoder is exact, so the entry equals the new image's pooled pixels.
  EXPECT_TRUE(torch::allclose(second, pool_encoder(LatentCache::image_tensors(
                                                       after.images[0], {}, false)
                                                       .first,
                                                   0)
                                          .squeeze(0)));
}

// dataset.max_image_pixels reaches the worker's decode: the coordinator's scan accepted the
// images under the job's limit, so a worker with the default limit must not refuse them later.
TEST(LatentCache, DecodesWithTheJobsMaxImagePixels) {
  test::TempDir dir("latent_cache_pixels");
  fs::create_directories(dir.path() / "data/1_x");
  write_image(dir.path() / "data/1_x/a.png", 1);  // 512 x 512 = 262144 pixels
  const Dataset d = scan(dir.path() / "data");
  LatentCache::Options o;
  o.max_image_pixels = 262143;
  LatentCache below(d, o, pool_encoder);
  try {
    below.get(0, {});
    ADD_FAILURE() << "a 512x512 image passed a limit of 262143 pixels";
  } catch (const DatasetError& e) {
    EXPECT_NE(std::string(e.what()).find("above the limit of 262143"), std::string::npos)
        << e.what();
  }
  o.max_image_pixels = 262144;
  LatentCache at_limit(d, o, pool_encoder);
  EXPECT_EQ(at_limit.get(0, {}).latents.sizes(), (at::IntArrayRef{4, 64, 64}));
}

TEST(LatentCache, CorruptEntryNamesTheCacheFileAndTheImage) {
  test::TempDir dir("latent_cache_corrupt");
  fs::create_directories(dir.path() / "data/1_x");
  write_image(dir.path() / "data/1_x/a.png", 3);
  const Dataset ds = scan(dir.path() / "data");
  LatentCache::Options o;
  o.disk_dir = dir.str("cache");
  o.vae_identity = "pool8";
  {
    LatentCache cache(ds, o, pool_encoder);
    cache.get(0, {});
  }
  fs::path entry;
  for (const auto& e : fs::recursive_directory_iterator(o.disk_dir)) {
    if (e.is_regular_file()) entry = e.path();
  }
  ASSERT_FALSE(entry.empty());
  fs::resize_file(entry, fs::file_size(entry) / 2);
  LatentCache cache(ds, o, pool_encoder);
  try {
    cache.get(0, {});
    FAIL() << "a truncated cache entry was accepted";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(entry.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(ds.images[0].path), std::string::npos) << msg;
  }
}

TEST(LatentCache, FlipMirrorsTheLatentsAndShardsCoverEveryEntry) {
  test::TempDir dir("latent_cache_flip");
  fs::create_directories(dir.path() / "data/1_x");
  write_image(dir.path() / "data/1_x/a.png", 4);
  write_image(dir.path() / "data/1_x/b.png", 5);
  const Dataset ds = scan(dir.path() / "data");
  LatentCache::Options o;
  o.disk_dir = dir.str("cache");
  o.vae_identity = "pool8";
  // Two "ranks" share the work: 2 images x {unflipped, flipped} = 4 entries, 2 each.
  LatentCache rank0(ds, o, pool_encoder);
  LatentCache rank1(ds, o, pool_encoder);
  const LatentCache::ShardStats s0 = rank0.precompute_shard(0, 2);
  const LatentCache::ShardStats s1 = rank1.precompute_shard(1, 2);
  EXPECT_EQ(s0.encoded, 2);
  EXPECT_EQ(s1.encoded, 2);
  EXPECT_EQ(count_files(o.disk_dir), 4);
  EXPECT_EQ(rank0.precompute_shard(0, 2).reused, 2);
  CropFlip flip;
  flip.flip = true;
  const at::Tensor plain = rank0.get(1, {}).latents;
  const at::Tensor mirrored = rank0.get(1, flip).latents;
  // 8x8 pooling commutes with a horizontal flip of a width divisible by 8.
  EXPECT_TRUE(torch::allclose(mirrored, plain.flip({2}), 1e-6, 1e-6));
  EXPECT_FALSE(torch::equal(mirrored, plain));
}

TEST(LatentCache, AlphaMaskIsTheAreaAveragedAlpha) {
  test::TempDir dir("latent_cache_alpha");
  fs::create_directories(dir.path() / "data/1_x");
  // 64x64 RGBA: left half opaque, right half fully transparent, one 8x8 block half alpha.
  std::vector<std::uint16_t> s;
  for (int y = 0; y < 64; ++y) {
    for (int x = 0; x < 64; ++x) {
      int a = x < 32 ? 255 : 0;
      if (x < 8 && y < 8) a = (x + y) % 2 == 0 ? 255 : 0;  // checkerboard: mean 0.5
      s.insert(s.end(), {200, 100, 50, static_cast<std::uint16_t>(a)});
    }
  }
  test::write_png(dir.str("data/1_x/a.png"), 64, 64, 6, 8, s);
  const Dataset ds = scan(dir.path() / "data", /*alpha_mask=*/true, /*resolution=*/64);
  ASSERT_TRUE(ds.images[0].has_alpha);
  LatentCache cache(ds, LatentCache::Options{}, pool_encoder);
  const LatentCache::Entry e = cache.get(0, {});
  ASSERT_TRUE(e.mask.defined());
  EXPECT_EQ(e.mask.sizes(), (at::IntArrayRef{1, 8, 8}));
  EXPECT_FLOAT_EQ(e.mask[0][0][0].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(e.mask[0][3][3].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(e.mask[0][3][4].item<float>(), 0.0f);
  // With alpha_mask the colour is the stored one, not composited on white: (200,100,50) even
  // where alpha is 0, i.e. (200/127.5 - 1) in the pooled red channel everywhere.
  EXPECT_NEAR(e.latents[0][5][7].item<float>(), 200 / 127.5 - 1, 1e-5);
}

// Random crops change every epoch: encoded each time, never written to the disk cache.
TEST(LatentCache, RandomCropsAreNotWrittenToDisk) {
  test::TempDir dir("latent_cache_random_crop");
  fs::create_directories(dir.path() / "data/1_x");
  std::vector<std::uint16_t> s;
  for (int i = 0; i < 640 * 512 * 3; ++i) s.push_back(static_cast<std::uint16_t>(i % 251));
  test::write_png(dir.str("data/1_x/wide.png"), 640, 512, 2, 8, s);
  const Dataset ds = scan(dir.path() / "data");
  // 640x512 goes to bucket 576x448 resized 576x461: 13 rows to crop.
  const BucketSelection& sel = ds.images[0].bucket;
  ASSERT_EQ(sel.resized_height - sel.bucket.height, 13);
  LatentCache::Options o;
  o.disk_dir = dir.str("cache");
  o.vae_identity = "pool8";
  LatentCache cache(ds, o, pool_encoder);
  const CropFlip top{0, 0, false};
  const CropFlip bottom{0, 13, false};
  EXPECT_FALSE(torch::equal(cache.get(0, top).latents, cache.get(0, bottom).latents));
  EXPECT_EQ(count_files(o.disk_dir), 0);
  cache.get(0, {});  // the centre crop is cached
  EXPECT_EQ(count_files(o.disk_dir), 1);
}

// Bytes that no longer match the scan's hash are never encoded under the scan's key.
TEST(LatentCache, ImageChangedSinceTheScanIsRefused) {
  test::TempDir dir("latent_cache_changed");
  fs::create_directories(dir.path() / "data/1_x");
  const fs::path image = dir.path() / "data/1_x/a.png";
  write_image(image, 6);
  const Dataset ds = scan(dir.path() / "data");
  write_image(image, 7);
  LatentCache::Options o;
  o.disk_dir = dir.str("cache");
  o.vae_identity = "pool8";
  LatentCache cache(ds, o, pool_encoder);
  try {
    cache.get(0, {});
    FAIL() << "latents of changed bytes were encoded";
  } catch (const DatasetError& e) {
    EXPECT_NE(std::string(e.what()).find(image.string() + ": the file changed after the dataset "
                                                          "was scanned"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(count_files(o.disk_dir), 0);
}

}  // namespace
}  // namespace lf

namespace lf {
namespace {

// Memory-only caching before training (what lets the VAE leave a GPU): every entry an epoch can
// need is encoded once, and later gets encode nothing; a latent holding NaN (an fp16 VAE
// overflowing) is refused naming the image, on both paths.
TEST(LatentCache, PrecomputeAllCachesEveryEntryAndNaNLatentsNameTheImage) {
  test::TempDir dir("latent_cache_precompute");
  fs::create_directories(dir.path() / "data/1_x");
  write_image(dir.path() / "data/1_x/a.png", 1);
  write_image(dir.path() / "data/1_x/b.png", 2);
  const Dataset ds = scan(dir.path() / "data");  // flip_aug: 2 images x 2 = 4 entries
  int calls = 0;
  auto counting = [&calls](const at::Tensor& x, std::uint64_t seed) {
    ++calls;
    return pool_encoder(x, seed);
  };
  LatentCache cache(ds, LatentCache::Options{}, counting);
  EXPECT_TRUE(cache.fully_cacheable());
  EXPECT_EQ(cache.precompute_all(), 4);
  EXPECT_EQ(calls, 4);
  CropFlip flip;
  flip.flip = true;
  cache.get(0, {});
  cache.get(1, flip);
  EXPECT_EQ(calls, 4);  // served from memory
  EXPECT_EQ(cache.precompute_all(), 0);

  auto overflowing = [](const at::Tensor& x, std::uint64_t seed) {
    at::Tensor z = pool_encoder(x, seed);
    z[0][0][0][0] = std::numeric_limits<float>::quiet_NaN();
    return z;
  };
  LatentCache nan_cache(ds, LatentCache::Options{}, overflowing);
  try {
    nan_cache.get(0, {});
    FAIL() << "a NaN latent was cached";
  } catch (const DatasetError& e) {
    EXPECT_EQ(std::string(e.what()), ds.images[0].path +
                                         ": its latents hold NaN or Inf values (an fp16 VAE "
                                         "overflows, SDXL's in particular: set model.vae_dtype: "
                                         "fp32)");
  }
  EXPECT_THROW(nan_cache.precompute_all(), DatasetError);
}

}  // namespace
}  // namespace lf
