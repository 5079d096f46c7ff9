// On-disk latent cache: key rendering and file names, bit-exact round trip, stale entries
// (nullopt + reason) versus corrupt ones (error naming the cache file and the image), atomic
// concurrent stores.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>
#include <vector>

#include "worker/core/train/seeding.h"
#include "worker/train/cache_file.h"
#include "worker/train/latent_disk_cache.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

LatentCacheKey base_key() {
  LatentCacheKey k;
  k.content_sha256 = std::string(32 * 2, 'a');
  for (size_t i = 1; i < k.content_sha256.size(); i += 2) k.content_sha256[i] = 'b';  // "abab.."
  k.bucket_width = 512;
  k.bucket_height = 384;
  k.resized_width = 600;
  k.resized_height = 384;
  k.crop_left = 44;
  k.crop_top = 0;
  k.flip = false;
  k.alpha_mask = false;
  k.vae_identity = "vae";
  return k;
}

// Latents with awkward bit patterns (negative zero, a denormal, extremes) so a lossy path shows.
LatentEntry make_entry(const LatentCacheKey& key) {
  LatentEntry e;
  e.latents = torch::randn({4, key.bucket_height / 8, key.bucket_width / 8}, make_cpu_generator(7));
  auto* p = e.latents.data_ptr<float>();
  p[0] = -0.0f;
  p[1] = 1.0e-40f;
  p[2] = 3.4e38f;
  p[3] = -1.17549435e-38f;
  if (key.alpha_mask) {
    e.alpha_mask = torch::arange(key.bucket_height * key.bucket_width, torch::kLong)
                       .remainder(256)
                       .to(torch::kByte)
                       .reshape({key.bucket_height, key.bucket_width});
  }
  return e;
}

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

class LatentDiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("lf_latcache_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    dir_ = (root_ / "cache").string();
  }
  void TearDown() override { fs::remove_all(root_); }

  // The message of the std::runtime_error load() throws ("" if it does not throw that).
  std::string load_error(const LatentDiskCache& cache, const LatentCacheKey& key) {
    try {
      cache.load(key, "/data/img/cat.png");
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }

  fs::path root_;
  std::string dir_;
};

TEST_F(LatentDiskCacheTest, RenderingIsExactAndFileNameIsItsDigest) {
  const LatentCacheKey k = base_key();
  ASSERT_EQ(k.content_sha256.size(), 64u);
  ASSERT_EQ(k.content_sha256.substr(0, 6), "ababab");
  EXPECT_EQ(k.rendering(),
            "lorafleet latent cache key\n"
            "content_sha256=64:" +
                k.content_sha256 +
                "\n"
                "bucket_width=512\nbucket_height=384\nresized_width=600\nresized_height=384\n"
                "crop_left=44\ncrop_top=0\nflip=false\nalpha_mask=false\nvae_identity=3:vae\n");
  // sha256 of the rendering above, computed independently with Python's hashlib.
  EXPECT_EQ(k.digest(), "c26f874d05c1a9b66fa67af41dbdb5050c3ca974cf25e05b8f7b07d6eecb243b");
  EXPECT_EQ(k.file_name(),
            "c26f874d05c1a9b66fa67af41dbdb5050c3ca974cf25e05b8f7b07d6eecb243b.safetensors");
  LatentDiskCache cache(dir_);
  EXPECT_EQ(cache.path_for(k), dir_ + "/c2/" + k.file_name());
  EXPECT_EQ(latent_noise_seed(k), 0xc26f874d05c1a9b6ull);
}

TEST_F(LatentDiskCacheTest, FileNameStableForEqualKeysAndDiffersForEveryField) {
  const LatentCacheKey a = base_key(), b = base_key();
  EXPECT_EQ(a.file_name(), b.file_name());
  EXPECT_EQ(latent_noise_seed(a), latent_noise_seed(b));

  const std::vector<std::pair<const char*, std::function<void(LatentCacheKey&)>>> changes = {
      {"content_sha256", [](LatentCacheKey& k) { k.content_sha256[63] = 'c'; }},
      {"bucket_width", [](LatentCacheKey& k) { k.bucket_width = 520; }},
      {"bucket_height", [](LatentCacheKey& k) { k.bucket_height = 392; }},
      {"resized_width", [](LatentCacheKey& k) { k.resized_width = 601; }},
      {"resized_height", [](LatentCacheKey& k) { k.resized_height = 385; }},
      {"crop_left", [](LatentCacheKey& k) { k.crop_left = 45; }},
      {"crop_top", [](LatentCacheKey& k) { k.crop_top = 1; }},
      {"flip", [](LatentCacheKey& k) { k.flip = true; }},
      {"alpha_mask", [](LatentCacheKey& k) { k.alpha_mask = true; }},
      {"vae_identity", [](LatentCacheKey& k) { k.vae_identity = "vae2"; }},
  };
  std::set<std::string> names{a.file_name()};
  std::set<std::uint64_t> seeds{latent_noise_seed(a)};
  for (const auto& [field, change] : changes) {
    LatentCacheKey k = base_key();
    change(k);
    EXPECT_NE(k.file_name(), a.file_name()) << field;
    names.insert(k.file_name());
    seeds.insert(latent_noise_seed(k));
  }
  EXPECT_EQ(names.size(), changes.size() + 1);
  EXPECT_EQ(seeds.size(), changes.size() + 1);

  // Length-prefixed strings: moving a character between two string fields changes the name.
  LatentCacheKey x = base_key(), y = base_key();
  x.content_sha256 = "ab";
  x.vae_identity = "c";
  y.content_sha256 = "a";
  y.vae_identity = "bc";
  EXPECT_NE(x.file_name(), y.file_name());
}

TEST_F(LatentDiskCacheTest, MissingFileIsNulloptWithoutReason) {
  LatentDiskCache cache(dir_);
  std::string reason = "left over";
  EXPECT_FALSE(cache.load(base_key(), "/data/img/cat.png", &reason).has_value());
  EXPECT_EQ(reason, "");
  EXPECT_FALSE(fs::exists(dir_));  // load never creates folders
}

TEST_F(LatentDiskCacheTest, RoundTripIsBitExact) {
  LatentDiskCache cache(dir_);
  for (bool alpha : {false, true}) {
    LatentCacheKey k = base_key();
    k.alpha_mask = alpha;
    const LatentEntry e = make_entry(k);
    cache.store(k, e);
    EXPECT_TRUE(fs::is_regular_file(cache.path_for(k)));
    std::string reason = "x";
    const auto got = cache.load(k, "/data/img/cat.png", &reason);
    ASSERT_TRUE(got.has_value()) << alpha;
    EXPECT_EQ(reason, "");
    EXPECT_TRUE(same_bytes(got->latents, e.latents)) << alpha;
    EXPECT_EQ(got->latents.device().type(), at::kCPU);
    EXPECT_EQ(got->alpha_mask.defined(), alpha);
    if (alpha) {
      EXPECT_TRUE(same_bytes(got->alpha_mask, e.alpha_mask));
    }
  }
  // Both keys live in the cache folder's sub-folders, and no temp file is left.
  int files = 0;
  for (const auto& p : fs::recursive_directory_iterator(dir_)) {
    if (p.is_regular_file()) {
      ++files;
      EXPECT_EQ(p.path().extension(), ".safetensors") << p.path();
    }
  }
  EXPECT_EQ(files, 2);
}

TEST_F(LatentDiskCacheTest, StoreReplacesAnExistingEntry) {
  LatentDiskCache cache(dir_);
  const LatentCacheKey k = base_key();
  LatentEntry e = make_entry(k);
  cache.store(k, e);
  e.latents = e.latents + 1.0f;
  cache.store(k, e);
  const auto got = cache.load(k, "img");
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(same_bytes(got->latents, e.latents));
}

TEST_F(LatentDiskCacheTest, TruncatedFileThrowsNamingCacheFileAndImage) {
  LatentDiskCache cache(dir_);
  const LatentCacheKey k = base_key();
  cache.store(k, make_entry(k));
  const std::string path = cache.path_for(k);
  fs::resize_file(path, fs::file_size(path) / 2);
  const std::string msg = load_error(cache, k);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("/data/img/cat.png"), std::string::npos) << msg;
  EXPECT_NE(msg.find("corrupt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("delete this file"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir_), std::string::npos) << msg;
}

TEST_F(LatentDiskCacheTest, UnparsableHeaderThrows) {
  LatentDiskCache cache(dir_);
  const LatentCacheKey k = base_key();
  const std::string path = cache.path_for(k);
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << "this is not a safetensors file at all";
  const std::string msg = load_error(cache, k);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("/data/img/cat.png"), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid safetensors"), std::string::npos) << msg;
}

TEST_F(LatentDiskCacheTest, WrongShapeOrDtypeUnderValidKeyThrows) {
  LatentDiskCache cache(dir_);
  const LatentCacheKey k = base_key();
  const std::string path = cache.path_for(k);
  // Shape of another bucket.
  write_cache_file(path, {{"latents", torch::zeros({4, 48, 72})}}, kLatentCacheFormat,
                   k.rendering());
  std::string msg = load_error(cache, k);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("/data/img/cat.png"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'latents' is F32 [4, 48, 72], expected F32 [4, 48, 64]"), std::string::npos)
      << msg;
  // Right shape, wrong dtype.
  write_cache_file(path, {{"latents", torch::zeros({4, 48, 64}, torch::kHalf)}}, kLatentCacheFormat,
                   k.rendering());
  msg = load_error(cache, k);
  EXPECT_NE(msg.find("'latents' is F16 [4, 48, 64]"), std::string::npos) << msg;
  // No latents at all.
  write_cache_file(path, {{"other", torch::zeros({1})}}, kLatentCacheFormat, k.rendering());
  EXPECT_NE(load_error(cache, k).find("no 'latents' tensor"), std::string::npos);
  // NaN latents.
  write_cache_file(path, {{"latents", torch::full({4, 48, 64}, NAN)}}, kLatentCacheFormat,
                   k.rendering());
  EXPECT_NE(load_error(cache, k).find("NaN"), std::string::npos);
}

TEST_F(LatentDiskCacheTest, AlphaMaskMustMatchTheKey) {
  LatentDiskCache cache(dir_);
  LatentCacheKey off = base_key();
  const at::Tensor lat = torch::zeros({4, 48, 64});
  const at::Tensor mask = torch::zeros({384, 512}, torch::kByte);
  write_cache_file(cache.path_for(off), {{"latents", lat}, {"alpha_mask", mask}},
                   kLatentCacheFormat, off.rendering());
  EXPECT_NE(load_error(cache, off).find("an 'alpha_mask' tensor although alpha_mask is off"),
            std::string::npos);

  LatentCacheKey on = base_key();
  on.alpha_mask = true;
  write_cache_file(cache.path_for(on), {{"latents", lat}}, kLatentCacheFormat, on.rendering());
  EXPECT_NE(load_error(cache, on).find("no 'alpha_mask' tensor"), std::string::npos);

  write_cache_file(cache.path_for(on), {{"latents", lat}, {"alpha_mask", mask.to(torch::kFloat)}},
                   kLatentCacheFormat, on.rendering());
  EXPECT_NE(load_error(cache, on).find("'alpha_mask' is F32 [384, 512], expected U8 [384, 512]"),
            std::string::npos)
      << load_error(cache, on);

  write_cache_file(cache.path_for(on),
                   {{"latents", lat}, {"alpha_mask", torch::zeros({48, 64}, torch::kByte)}},
                   kLatentCacheFormat, on.rendering());
  EXPECT_NE(load_error(cache, on).find("expected U8 [384, 512]"), std::string::npos);
}

TEST_F(LatentDiskCacheTest, OtherFormatVersionIsStale) {
  LatentDiskCache cache(dir_);
  const LatentCacheKey k = base_key();
  const std::string path = cache.path_for(k);
  write_cache_file(path, {{"latents", torch::zeros({4, 48, 64})}}, "lorafleet-latent-cache/0",
                   k.rendering());
  std::string reason;
  EXPECT_FALSE(cache.load(k, "img", &reason).has_value());
  EXPECT_EQ(reason, path + ": cache format 'lorafleet-latent-cache/0', expected '" +
                        std::string(kLatentCacheFormat) + "'");
  // The caller re-encodes and stores over it.
  const LatentEntry e = make_entry(k);
  cache.store(k, e);
  const auto got = cache.load(k, "img", &reason);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(reason, "");
  EXPECT_TRUE(same_bytes(got->latents, e.latents));
}

TEST_F(LatentDiskCacheTest, OtherKeyOrMissingMetadataIsStale) {
  LatentDiskCache cache(dir_);
  const LatentCacheKey k = base_key();
  LatentCacheKey other = base_key();
  other.crop_left = 0;
  const std::string path = cache.path_for(k);
  // As if the file name collided: the file holds another key.
  write_cache_file(path, {{"latents", torch::zeros({4, 48, 64})}}, kLatentCacheFormat,
                   other.rendering());
  std::string reason;
  EXPECT_FALSE(cache.load(k, "img", &reason).has_value());
  EXPECT_EQ(reason, path +
                        ": written for another key: the key has 'crop_left=0' where "
                        "'crop_left=44' was expected");

  // A safetensors file without our metadata (another writer) is stale too, not corrupt.
  SafetensorsWriter w;
  const float v = 0.0f;
  w.add("latents", DType::F32, {1}, &v, sizeof v);
  w.write_atomic(path);
  EXPECT_FALSE(cache.load(k, "img", &reason).has_value());
  EXPECT_EQ(reason, path + ": no 'lorafleet.cache_format' metadata (expected '" +
                        std::string(kLatentCacheFormat) + "')");
}

TEST_F(LatentDiskCacheTest, StoreRejectsEntriesThatDoNotMatchTheKey) {
  LatentDiskCache cache(dir_);
  LatentCacheKey k = base_key();
  LatentEntry e = make_entry(k);
  e.latents = torch::zeros({4, 64, 48});
  EXPECT_THROW(cache.store(k, e), std::invalid_argument);
  e.latents = torch::zeros({4, 48, 64}, torch::kDouble);
  EXPECT_THROW(cache.store(k, e), std::invalid_argument);
  e.latents = torch::zeros({4, 48, 64});
  e.latents[1][2][3] = NAN;
  EXPECT_THROW(cache.store(k, e), std::invalid_argument);
  e.latents = torch::zeros({4, 48, 64});
  e.alpha_mask = torch::zeros({384, 512}, torch::kByte);  // key has alpha_mask off
  EXPECT_THROW(cache.store(k, e), std::invalid_argument);
  k.alpha_mask = true;
  e.alpha_mask = at::Tensor();
  EXPECT_THROW(cache.store(k, e), std::invalid_argument);
  k.bucket_width = 500;  // not a multiple of 8
  EXPECT_THROW(cache.store(k, e), std::invalid_argument);
  EXPECT_FALSE(fs::exists(dir_));
  try {
    LatentCacheKey bad = base_key();
    LatentEntry wrong = make_entry(bad);
    wrong.latents = torch::zeros({4, 8, 8});
    cache.store(bad, wrong);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& err) {
    EXPECT_NE(
        std::string(err.what()).find("latents must be float32 [4, 48, 64], got Float [4, 8, 8]"),
        std::string::npos)
        << err.what();
  }
}

TEST_F(LatentDiskCacheTest, ConcurrentStoresOfOneKeyNeverExposeATornFile) {
  LatentDiskCache cache(dir_);
  const LatentCacheKey k = base_key();
  const LatentEntry e = make_entry(k);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0}, seen{0};
  std::thread reader([&] {
    while (!done) {
      try {
        const auto got = cache.load(k, "img");
        if (got) {
          ++seen;
          if (!same_bytes(got->latents, e.latents)) ++bad;
        }
      } catch (const std::exception&) {
        ++bad;
      }
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&] {
      // Keep writing until the reader has loaded the entry a few times while writes go on.
      for (int i = 0; (i < 25 || seen.load() < 10) && i < 100000; ++i) cache.store(k, e);
    });
  }
  for (auto& t : writers) t.join();
  done = true;
  reader.join();
  EXPECT_GE(seen, 10);
  EXPECT_EQ(bad, 0);
  const auto got = cache.load(k, "img");
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(same_bytes(got->latents, e.latents));
  int files = 0;
  for (const auto& p : fs::recursive_directory_iterator(dir_)) files += p.is_regular_file();
  EXPECT_EQ(files, 1);  // temp files all renamed away
}

}  // namespace
}  // namespace lf
