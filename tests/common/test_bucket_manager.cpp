// Tests for kohya bucketing: the bucket lists, select() in upscale / no-upscale / no-bucket
// modes, numpy-argmin tie breaking and min/max rounding. Expected values were computed by hand
// from sd-scripts' make_bucket_resolutions / select_bucket and cross-checked with that code.
#include "common/data/bucket_manager.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace lf {
namespace {

std::vector<BucketReso> R(std::initializer_list<std::pair<int, int>> list) {
  std::vector<BucketReso> out;
  for (auto [w, h] : list) out.push_back({w, h});
  return out;
}

void expect_selection(const BucketManager& m, int w, int h, BucketReso bucket, int rw, int rh) {
  SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
  const BucketSelection s = m.select(w, h);
  EXPECT_EQ(s.bucket.width, bucket.width);
  EXPECT_EQ(s.bucket.height, bucket.height);
  EXPECT_EQ(s.resized_width, rw);
  EXPECT_EQ(s.resized_height, rh);
  EXPECT_DOUBLE_EQ(s.ar_error, static_cast<double>(bucket.width) / bucket.height -
                                   static_cast<double>(w) / h);
}

TEST(MakeBucketResolutions, Kohya512Gives17Buckets) {
  const auto got = make_bucket_resolutions(512, 512, 256, 1024, 64);
  const auto want = R({{256, 832}, {256, 896}, {256, 960}, {256, 1024}, {320, 704}, {320, 768},
                       {384, 640}, {448, 576}, {512, 512}, {576, 448}, {640, 384}, {704, 320},
                       {768, 320}, {832, 256}, {896, 256}, {960, 256}, {1024, 256}});
  EXPECT_EQ(got, want);
}

TEST(MakeBucketResolutions, Kohya1024Max2048Gives41Buckets) {
  const auto got = make_bucket_resolutions(1024, 1024, 256, 2048, 64);
  ASSERT_EQ(got.size(), 41u);
  EXPECT_EQ(got.front(), (BucketReso{256, 2048}));
  EXPECT_EQ(got[20], (BucketReso{1024, 1024}));
  EXPECT_EQ(got.back(), (BucketReso{2048, 512}));
}

TEST(MakeBucketResolutions, NonSquareResolutionIsRagged) {
  // max_area 512*768 = 393216; the square is floor(sqrt(393216)/64)*64 = 576.
  const auto got = make_bucket_resolutions(512, 768, 256, 1024, 64);
  const auto want = R({{256, 1024}, {320, 1024}, {384, 896}, {384, 960}, {384, 1024}, {448, 832},
                       {512, 704}, {512, 768}, {576, 576}, {576, 640}, {640, 576}, {704, 512},
                       {768, 512}, {832, 448}, {896, 384}, {960, 384}, {1024, 256}, {1024, 320},
                       {1024, 384}});
  EXPECT_EQ(got, want);
}

TEST(MakeBucketResolutions, RejectsNonPositiveArguments) {
  EXPECT_THROW(make_bucket_resolutions(512, 512, 256, 1024, 0), std::invalid_argument);
  EXPECT_THROW(make_bucket_resolutions(0, 512, 256, 1024, 64), std::invalid_argument);
}

TEST(BucketManager, UpscaleModeSelect) {
  BucketManager m(BucketOptions{});
  EXPECT_EQ(m.predefined().size(), 17u);
  // 1000x750 (ar 1.3333): nearest bucket 576x448 (ar 1.2857); image is wider, so
  // scale = 448/750 and resized = (int(597.33 + 0.5), 448).
  expect_selection(m, 1000, 750, {576, 448}, 597, 448);
  // 600x400 (ar 1.5): 640x384 (err 0.1667) beats 576x448 (err 0.2143); scale = 640/600.
  expect_selection(m, 600, 400, {640, 384}, 640, 427);
  // Small images are upscaled: 300x200 has the same aspect ratio as 600x400.
  expect_selection(m, 300, 200, {640, 384}, 640, 427);
  // chelsea.png 451x300: scale = 640/451, height int(425.72 + 0.5) = 426.
  expect_selection(m, 451, 300, {640, 384}, 640, 426);
  // Exactly a predefined bucket: kept as is.
  expect_selection(m, 256, 832, {256, 832}, 256, 832);
  expect_selection(m, 1411, 1411, {512, 512}, 512, 512);
  // 371x370: bucket 512x512; image slightly wider so scale = 512/370, width int(513.38+.5).
  expect_selection(m, 371, 370, {512, 512}, 513, 512);
  // Very tall 100x1000 (ar 0.1): 256x1024 is the closest; resized width 256, height 2560.
  expect_selection(m, 100, 1000, {256, 1024}, 256, 2560);
}

TEST(BucketManager, TiesGoToFirstBucketInSortedOrder) {
  BucketManager m(BucketOptions{});
  // 124x84: |576/448 - 124/84| == |640/384 - 124/84| bit for bit; numpy argmin takes 576x448.
  expect_selection(m, 124, 84, {576, 448}, 661, 448);
  // 93x135: tie between 384x640 and 448x576; the first (384x640) wins.
  expect_selection(m, 93, 135, {384, 640}, 441, 640);
}

TEST(BucketManager, NoUpscaleMode) {
  BucketOptions o;
  o.bucket_no_upscale = true;
  BucketManager m(o);
  EXPECT_TRUE(m.predefined().empty());
  ASSERT_EQ(m.warnings().size(), 1u);
  EXPECT_NE(m.warnings()[0].find("ignored with bucket_no_upscale"), std::string::npos);
  // Larger than 512*512: shrink to (512, 384) keeping 4:3, bucket (512, 384).
  expect_selection(m, 1000, 750, {512, 384}, 512, 384);
  // Smaller: never resized; bucket floors to steps.
  expect_selection(m, 300, 200, {256, 192}, 300, 200);
  expect_selection(m, 451, 300, {448, 256}, 451, 300);
  // 741x500 (> max area): width-rounded candidate 576x389 keeps the ratio best.
  expect_selection(m, 741, 500, {576, 384}, 576, 389);
  expect_selection(m, 640, 427, {576, 384}, 576, 384);
}

TEST(BucketManager, NoUpscaleRejectsZeroSizedBuckets) {
  BucketOptions o;
  o.bucket_no_upscale = true;
  BucketManager m(o);
  try {
    m.select(300, 40);  // height 40 < 64 steps -> bucket height 0
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("300x40"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("256x0"), std::string::npos) << e.what();
  }
  // Too elongated to shrink: sqrt(262144/666.7) rounds to height 0 (kohya divides by zero).
  EXPECT_THROW(m.select(20000, 30), std::invalid_argument);
  EXPECT_THROW(m.select(0, 10), std::invalid_argument);
}

TEST(BucketManager, DisabledBucketingUsesResolutionOnly) {
  BucketOptions o;
  o.enable_bucket = false;
  o.bucket_no_upscale = true;  // ignored without bucketing, as in kohya
  o.min_bucket_reso = 300;     // not rounded, no warning, without bucketing
  BucketManager m(o);
  EXPECT_EQ(m.predefined(), R({{512, 512}}));
  EXPECT_TRUE(m.warnings().empty());
  expect_selection(m, 1000, 750, {512, 512}, 683, 512);
  expect_selection(m, 300, 200, {512, 512}, 768, 512);
}

TEST(BucketManager, RoundsMinDownAndMaxUpWithWarnings) {
  BucketOptions o;
  o.min_bucket_reso = 300;
  o.max_bucket_reso = 1000;
  BucketManager m(o);
  EXPECT_EQ(m.options().min_bucket_reso, 256);
  EXPECT_EQ(m.options().max_bucket_reso, 1024);
  ASSERT_EQ(m.warnings().size(), 2u);
  EXPECT_EQ(m.warnings()[0],
            "min_bucket_reso 300 is not a multiple of bucket_reso_steps 64; rounded down to 256");
  EXPECT_EQ(m.warnings()[1],
            "max_bucket_reso 1000 is not a multiple of bucket_reso_steps 64; rounded up to 1024");
  EXPECT_EQ(m.predefined().size(), 17u);
}

TEST(BucketManager, RejectsResolutionOutsideMinMax) {
  BucketOptions o;
  o.min_bucket_reso = 576;  // > min(resolution) 512
  EXPECT_THROW(BucketManager{o}, std::invalid_argument);
  o = BucketOptions{};
  o.resolution_w = 1088;  // > max_bucket_reso 1024
  EXPECT_THROW(BucketManager{o}, std::invalid_argument);
  o = BucketOptions{};
  o.min_bucket_reso = 32;  // rounds down to 0 with steps 64
  EXPECT_THROW(BucketManager{o}, std::invalid_argument);
  o = BucketOptions{};
  o.bucket_reso_steps = 0;
  EXPECT_THROW(BucketManager{o}, std::invalid_argument);
}


// Issue 3 cases. Resolution 512 with min_bucket_reso 512: the list collapses to one bucket and
// a warning says so; with min 256 the usual kohya choices hold.
TEST(BucketManager, Issue3UpscaleCases) {
  BucketOptions o;
  o.min_bucket_reso = 512;
  o.max_bucket_reso = 1024;
  BucketManager single(o);
  EXPECT_EQ(single.predefined(), R({{512, 512}}));
  ASSERT_EQ(single.warnings().size(), 1u);
  EXPECT_NE(single.warnings()[0].find("single bucket 512x512"), std::string::npos)
      << single.warnings()[0];

  o.min_bucket_reso = 256;
  BucketManager m(o);
  EXPECT_TRUE(m.warnings().empty());
  // 512x768 -> (384,640): scale 640/768, width int(426.67 + 0.5) = 427; crop (427-384)/2 = 21.
  expect_selection(m, 512, 768, {384, 640}, 427, 640);
  const BucketSelection s = m.select(512, 768);
  EXPECT_EQ((s.resized_width - s.bucket.width) / 2, 21);  // the centre crop's left offset
  expect_selection(m, 768, 512, {640, 384}, 640, 427);
  // 512x640 (ar 0.8) -> 448x576 (ar 0.778): the image is wider than the bucket, so
  // scale = 576/640 and width int(460.8 + 0.5) = 461.
  expect_selection(m, 512, 640, {448, 576}, 461, 576);
}

// bucket_no_upscale at 1024: a near-square 2000x1950 image must get (1024,1024) (resized
// 1050x1024, 13 px cropped on each side), where kohya's floored rule gives (960,960).
TEST(BucketManager, NoUpscaleNearSquareKeepsTheFullBucket) {
  BucketOptions o;
  o.resolution_w = o.resolution_h = 1024;
  o.max_bucket_reso = 2048;
  o.bucket_no_upscale = true;
  BucketManager m(o);
  const BucketSelection s = m.select(2000, 1950);
  EXPECT_EQ(s.bucket, (BucketReso{1024, 1024}));
  EXPECT_EQ(s.resized_width, 1050);
  EXPECT_EQ(s.resized_height, 1024);
  EXPECT_EQ((s.resized_width - s.bucket.width) / 2, 13);
  expect_selection(m, 1500, 1500, {1024, 1024}, 1024, 1024);
  expect_selection(m, 1950, 2000, {1024, 1024}, 1024, 1050);
  // EXIF-rotated 4000x3000 photo (3000x4000 upright) at 1024, upscale mode: (896,1152).
  BucketOptions up;
  up.resolution_w = up.resolution_h = 1024;
  up.max_bucket_reso = 2048;
  BucketManager mu(up);
  expect_selection(mu, 3000, 4000, {896, 1152}, 896, 1195);
}

// No bucket side is ever <= 0, in any mode, for any image size >= 1.
TEST(BucketManager, NoBucketSideIsEverZero) {
  for (bool no_upscale : {false, true}) {
    BucketOptions o;
    o.bucket_no_upscale = no_upscale;
    BucketManager m(o);
    for (int w : {1, 7, 63, 64, 65, 300, 4096, 20000}) {
      for (int h : {1, 7, 63, 64, 65, 300, 4096, 20000}) {
        try {
          const BucketSelection s = m.select(w, h);
          EXPECT_GT(s.bucket.width, 0);
          EXPECT_GT(s.bucket.height, 0);
          EXPECT_GE(s.resized_width, s.bucket.width);
          EXPECT_GE(s.resized_height, s.bucket.height);
        } catch (const std::invalid_argument& e) {
          // Only allowed when the image cannot give a bucket at all (no_upscale, tiny sides).
          EXPECT_TRUE(no_upscale) << w << "x" << h << ": " << e.what();
        }
      }
    }
  }
}

}  // namespace
}  // namespace lf
