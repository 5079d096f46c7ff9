// On-disk text-encoder output cache: key rendering, bit-exact round trip with and without the
// pooled output, stale versus corrupt entries (errors quote the caption, cut to 80 characters).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <vector>

#include "worker/core/train/seeding.h"
#include "worker/train/cache_file.h"
#include "worker/train/text_disk_cache.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

TextCacheKey base_key() {
  TextCacheKey k;
  k.caption = "a photo of sks";
  k.tokenizer_identity = "tok1";
  k.text_encoder_identity = "te1";
  k.clip_skip = 2;
  k.with_pooled = false;
  return k;
}

TextEncoderEntry make_entry(bool pooled, int64_t hidden = 32, int64_t length = 77) {
  TextEncoderEntry e;
  auto gen = make_cpu_generator(11);
  e.context = torch::randn({length, hidden}, gen);
  e.context.data_ptr<float>()[0] = -0.0f;
  e.context.data_ptr<float>()[1] = 1.0e-42f;
  if (pooled) e.pooled = torch::randn({hidden}, gen);
  return e;
}

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

class TextDiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("lf_textcache_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    dir_ = (root_ / "te").string();
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string load_error(const TextDiskCache& cache, const TextCacheKey& key) {
    try {
      cache.load(key);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }

  fs::path root_;
  std::string dir_;
};

TEST_F(TextDiskCacheTest, RenderingIsExactAndFileNameIsItsDigest) {
  const TextCacheKey k = base_key();
  EXPECT_EQ(k.rendering(),
            "lorafleet text encoder cache key\ncaption=14:a photo of sks\n"
            "tokenizer_identity=4:tok1\ntext_encoder_identity=3:te1\nclip_skip=2\n"
            "with_pooled=false\nmax_token_length=75\n");
  // Python: hashlib.sha256(rendering.encode()).hexdigest()
  EXPECT_EQ(k.file_name(),
            "c0ee6890aa7b1619a6fc649f1e20a678b2927d8533b84183b5c40c6445b68b79.safetensors");
  EXPECT_EQ(TextDiskCache(dir_).path_for(k), dir_ + "/c0/" + k.file_name());
}

TEST_F(TextDiskCacheTest, FileNameStableAndDiffersForEveryField) {
  EXPECT_EQ(base_key().file_name(), base_key().file_name());
  const std::vector<std::pair<const char*, std::function<void(TextCacheKey&)>>> changes = {
      {"caption", [](TextCacheKey& k) { k.caption += " "; }},
      {"tokenizer_identity", [](TextCacheKey& k) { k.tokenizer_identity = "tok2"; }},
      {"text_encoder_identity", [](TextCacheKey& k) { k.text_encoder_identity = "te2"; }},
      {"clip_skip", [](TextCacheKey& k) { k.clip_skip = 1; }},
      {"with_pooled", [](TextCacheKey& k) { k.with_pooled = true; }},
      {"max_token_length", [](TextCacheKey& k) { k.max_token_length = 225; }},
  };
  std::set<std::string> names{base_key().file_name()};
  for (const auto& [field, change] : changes) {
    TextCacheKey k = base_key();
    change(k);
    EXPECT_NE(k.file_name(), base_key().file_name()) << field;
    names.insert(k.file_name());
  }
  EXPECT_EQ(names.size(), changes.size() + 1);
  // A caption that imitates the next field's line does not collide.
  TextCacheKey x = base_key(), y = base_key();
  x.caption = "a\ntokenizer_identity=4:tok1";
  x.tokenizer_identity = "";
  y.caption = "a";
  y.tokenizer_identity = "tok1";
  EXPECT_NE(x.file_name(), y.file_name());
}

TEST_F(TextDiskCacheTest, RoundTripIsBitExact) {
  TextDiskCache cache(dir_);
  for (bool pooled : {false, true}) {
    TextCacheKey k = base_key();
    k.with_pooled = pooled;
    EXPECT_FALSE(cache.load(k).has_value());
    const TextEncoderEntry e = make_entry(pooled);
    cache.store(k, e);
    std::string reason = "x";
    const auto got = cache.load(k, &reason);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(reason, "");
    EXPECT_TRUE(same_bytes(got->context, e.context));
    EXPECT_EQ(got->pooled.defined(), pooled);
    if (pooled) {
      EXPECT_TRUE(same_bytes(got->pooled, e.pooled));
    }
  }
}

// kohya --max_token_length 225 on SDXL: a [227, hidden] context and the pooled bigG embedding,
// which has the projection's width, not the context's. An entry of another token length is
// never read: its key (so its file) differs, and a 77-position context under a 225 key is
// corrupt.
TEST_F(TextDiskCacheTest, LongCaptionEntriesAreKeyedOnTheirTokenLength) {
  TextDiskCache cache(dir_);
  TextCacheKey k75 = base_key();
  k75.with_pooled = true;
  TextEncoderEntry e75 = make_entry(false, 112);
  e75.pooled = torch::ones({32});
  cache.store(k75, e75);
  TextCacheKey k225 = k75;
  k225.max_token_length = 225;
  EXPECT_NE(cache.path_for(k225), cache.path_for(k75));
  EXPECT_FALSE(cache.load(k225).has_value());
  TextEncoderEntry e225 = make_entry(false, 112, 227);
  e225.pooled = torch::ones({32});
  cache.store(k225, e225);
  const auto got = cache.load(k225);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(same_bytes(got->context, e225.context));
  EXPECT_TRUE(same_bytes(got->pooled, e225.pooled));
  EXPECT_TRUE(same_bytes(cache.load(k75)->context, e75.context));

  write_cache_file(cache.path_for(k225), {{"context", e75.context}, {"pooled", e75.pooled}},
                   kTextCacheFormat, k225.rendering());
  const std::string msg = load_error(cache, k225);
  EXPECT_NE(msg.find("'context' is F32 [77, 112], expected F32 [227, hidden] (max_token_length "
                     "225)"),
            std::string::npos)
      << msg;
}

TEST_F(TextDiskCacheTest, TruncatedFileThrowsNamingFileAndQuotingCaption) {
  TextDiskCache cache(dir_);
  TextCacheKey k = base_key();
  k.caption = std::string(80, 'x') + "TAIL beyond eighty";
  cache.store(k, make_entry(false));
  const std::string path = cache.path_for(k);
  fs::resize_file(path, 20);
  const std::string msg = load_error(cache, k);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"" + std::string(80, 'x') + "...\""), std::string::npos) << msg;
  EXPECT_EQ(msg.find("TAIL"), std::string::npos) << msg;
  EXPECT_NE(msg.find("delete this file"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir_), std::string::npos) << msg;
}

TEST_F(TextDiskCacheTest, WrongShapesUnderValidKeyThrow) {
  TextDiskCache cache(dir_);
  TextCacheKey k = base_key();
  const std::string path = cache.path_for(k);
  write_cache_file(path, {{"context", torch::zeros({75, 32})}}, kTextCacheFormat, k.rendering());
  std::string msg = load_error(cache, k);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"a photo of sks\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("'context' is F32 [75, 32], expected F32 [77, hidden]"), std::string::npos)
      << msg;
  write_cache_file(path, {{"context", torch::zeros({77, 32}, torch::kHalf)}}, kTextCacheFormat,
                   k.rendering());
  EXPECT_NE(load_error(cache, k).find("'context' is F16 [77, 32]"), std::string::npos);

  k.with_pooled = true;
  const std::string ppath = cache.path_for(k);
  write_cache_file(ppath, {{"context", torch::zeros({77, 32})}, {"pooled", torch::zeros({2, 16})}},
                   kTextCacheFormat, k.rendering());
  msg = load_error(cache, k);
  EXPECT_NE(msg.find("'pooled' is F32 [2, 16], expected F32 [projection_dim]"), std::string::npos)
      << msg;
  write_cache_file(ppath, {{"context", torch::zeros({77, 32})}}, kTextCacheFormat, k.rendering());
  EXPECT_NE(load_error(cache, k).find("no 'pooled' tensor"), std::string::npos);
  write_cache_file(ppath,
                   {{"context", torch::full({77, 32}, INFINITY)}, {"pooled", torch::zeros({32})}},
                   kTextCacheFormat, k.rendering());
  EXPECT_NE(load_error(cache, k).find("'context' holds NaN or Inf"), std::string::npos);
}

TEST_F(TextDiskCacheTest, OtherFormatVersionOrKeyIsStale) {
  TextDiskCache cache(dir_);
  const TextCacheKey k = base_key();
  const std::string path = cache.path_for(k);
  write_cache_file(path, {{"context", torch::zeros({77, 32})}}, "lorafleet-text-cache/0",
                   k.rendering());
  std::string reason;
  EXPECT_FALSE(cache.load(k, &reason).has_value());
  EXPECT_EQ(reason, path + ": cache format 'lorafleet-text-cache/0', expected '" +
                        std::string(kTextCacheFormat) + "'");
  TextCacheKey other = base_key();
  other.clip_skip = 1;
  write_cache_file(path, {{"context", torch::zeros({77, 32})}}, kTextCacheFormat,
                   other.rendering());
  EXPECT_FALSE(cache.load(k, &reason).has_value());
  EXPECT_EQ(reason, path +
                        ": written for another key: the key has 'clip_skip=1' where "
                        "'clip_skip=2' was expected");
}

TEST_F(TextDiskCacheTest, StoreRejectsMismatchedEntries) {
  TextDiskCache cache(dir_);
  TextCacheKey k = base_key();
  TextEncoderEntry e = make_entry(false);
  e.context = torch::zeros({76, 32});
  EXPECT_THROW(cache.store(k, e), std::invalid_argument);
  e = make_entry(true);  // pooled given, key says no
  EXPECT_THROW(cache.store(k, e), std::invalid_argument);
  k.with_pooled = true;
  e.pooled = torch::zeros({2, 16});
  EXPECT_THROW(cache.store(k, e), std::invalid_argument);
  k.with_pooled = false;
  k.max_token_length = 225;  // a 77-position context under a 227-position key
  EXPECT_THROW(cache.store(k, make_entry(false)), std::invalid_argument);
  k.max_token_length = 75;
  k.with_pooled = true;
  e.pooled = torch::full({32}, NAN);
  EXPECT_THROW(cache.store(k, e), std::invalid_argument);
  EXPECT_FALSE(fs::exists(dir_));
}

TEST(QuoteCaption, CutsAtEightyBytesOnACharacterBoundary) {
  EXPECT_EQ(quote_caption("short"), "\"short\"");
  EXPECT_EQ(quote_caption(std::string(80, 'a')), "\"" + std::string(80, 'a') + "\"");
  EXPECT_EQ(quote_caption(std::string(81, 'a')), "\"" + std::string(80, 'a') + "...\"");
  // 79 ASCII bytes then "é" (2 bytes) straddling the cut: the whole character is dropped.
  EXPECT_EQ(quote_caption(std::string(79, 'a') + "\xC3\xA9" + "zz"),
            "\"" + std::string(79, 'a') + "...\"");
}

}  // namespace
}  // namespace lf
