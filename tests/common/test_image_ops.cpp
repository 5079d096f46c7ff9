// Tests for image decoding (channel order, grey, 16-bit, alpha on white, decode errors) and the
// kohya resize-to-cover + centre crop. Expected pixels of the skimage photos were read with an
// independent PNG decoder; synthetic images use values whose area averages are exact.
#include "common/data/image_ops.h"

#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/data/dataset.h"
#include "tests/common/fixtures.h"

namespace lf {
namespace {

const std::string kPhotos =
    std::string(LF_SOURCE_DIR) + "/.deps/skimage/usr/lib/python3/dist-packages/skimage/data/";

std::array<int, 3> px(const RgbImage& img, int x, int y) {
  const std::size_t i = (static_cast<std::size_t>(y) * img.width + x) * 3;
  return {img.pixels[i], img.pixels[i + 1], img.pixels[i + 2]};
}

void expect_decode_error(const std::string& path) {
  try {
    load_rgb_image(path);
    FAIL() << "expected DatasetError for " << path;
  } catch (const DatasetError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": cannot decode image", 0), 0u) << e.what();
  }
}

TEST(LoadRgbImage, ColourPngIsRgbOrder) {
  const RgbImage img = load_rgb_image(kPhotos + "astronaut.png");
  ASSERT_EQ(img.width, 512);
  ASSERT_EQ(img.height, 512);
  ASSERT_EQ(img.pixels.size(), 512u * 512u * 3u);
  EXPECT_EQ(px(img, 0, 0), (std::array<int, 3>{154, 147, 151}));
  EXPECT_EQ(px(img, 200, 100), (std::array<int, 3>{81, 57, 17}));
  EXPECT_EQ(px(img, 300, 256), (std::array<int, 3>{53, 21, 7}));
}

TEST(LoadRgbImage, GreyBecomesEqualRgbChannels) {
  const RgbImage img = load_rgb_image(kPhotos + "camera.png");
  ASSERT_EQ(img.width, 512);
  ASSERT_EQ(img.height, 512);
  EXPECT_EQ(px(img, 0, 0), (std::array<int, 3>{200, 200, 200}));
  EXPECT_EQ(px(img, 200, 100), (std::array<int, 3>{54, 54, 54}));
  for (std::size_t i = 0; i < img.pixels.size(); i += 3) {
    ASSERT_EQ(img.pixels[i], img.pixels[i + 1]);
    ASSERT_EQ(img.pixels[i], img.pixels[i + 2]);
  }
}

TEST(LoadRgbImage, SixteenBitScalesBy257) {
  // chessboard_RGB.png is 16-bit: 12845/257 = 49.98 -> 50, 11411 -> 44.40 -> 44,
  // 54124 -> 210.60 -> 211, 65535 -> 255 (clamping would give 255 for all of them).
  const RgbImage img = load_rgb_image(kPhotos + "chessboard_RGB.png");
  ASSERT_EQ(img.width, 200);
  EXPECT_EQ(px(img, 25, 0), (std::array<int, 3>{50, 50, 50}));
  EXPECT_EQ(px(img, 26, 24), (std::array<int, 3>{44, 44, 44}));
  EXPECT_EQ(px(img, 23, 24), (std::array<int, 3>{211, 211, 211}));
  EXPECT_EQ(px(img, 0, 0), (std::array<int, 3>{255, 255, 255}));

  test::TempDir dir("image_ops_16");
  const std::string path = dir.str("rgb16.png");
  test::write_png(path, 2, 1, 2, 16, {65535, 12845, 0, 128, 129, 257 * 77});
  const RgbImage small = load_rgb_image(path);
  EXPECT_EQ(px(small, 0, 0), (std::array<int, 3>{255, 50, 0}));
  EXPECT_EQ(px(small, 1, 0), (std::array<int, 3>{0, 1, 77}));
}

TEST(LoadRgbImage, AlphaIsCompositedOnWhite) {
  test::TempDir dir("image_ops_alpha");
  const std::string rgba = dir.str("rgba.png");
  test::write_png(rgba, 3, 1, 6, 8, {200, 100, 50, 255, 200, 100, 50, 0, 200, 100, 50, 128});
  const RgbImage img = load_rgb_image(rgba);
  ASSERT_EQ(img.width, 3);
  EXPECT_EQ(px(img, 0, 0), (std::array<int, 3>{200, 100, 50}));   // opaque: unchanged, RGB order
  EXPECT_EQ(px(img, 1, 0), (std::array<int, 3>{255, 255, 255}));  // transparent: white
  // (c*128 + 255*127) / 255 rounded: 227.39, 177.20, 152.10.
  EXPECT_EQ(px(img, 2, 0), (std::array<int, 3>{227, 177, 152}));

  const std::string ga = dir.str("grey_alpha.png");
  test::write_png(ga, 2, 1, 4, 8, {100, 64, 30, 255});
  const RgbImage g = load_rgb_image(ga);
  EXPECT_EQ(px(g, 0, 0), (std::array<int, 3>{216, 216, 216}));  // (6400 + 48705) / 255 = 216.1
  EXPECT_EQ(px(g, 1, 0), (std::array<int, 3>{30, 30, 30}));
}

TEST(LoadRgbImage, BadFilesThrowNamingThePath) {
  test::TempDir dir("image_ops_bad");
  expect_decode_error(dir.str("missing.png"));

  const std::string garbage = dir.str("garbage.png");
  test::write_text(garbage, "this is not an image at all, just text\n");
  expect_decode_error(garbage);

  const std::string empty = dir.str("empty.jpg");
  test::write_text(empty, "");
  expect_decode_error(empty);

  // The first 30% of a real PNG: header fine, pixel data cut off.
  std::ifstream in(kPhotos + "astronaut.png", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  const std::string cut = dir.str("truncated.png");
  test::write_text(cut, bytes.substr(0, bytes.size() * 3 / 10));
  expect_decode_error(cut);

  expect_decode_error(dir.str(""));  // a directory is not an image
  expect_decode_error(kPhotos + "truncated.jpg");  // libjpeg: premature end of data
}

// An image whose 2x2 blocks average exactly: block (bx, by) has base value
// 30*bx + 10*by + 20*c + 10 and pixels base+d, base-d, base+e, base-e.
RgbImage block_image(int blocks_w, int blocks_h) {
  RgbImage img;
  img.width = blocks_w * 2;
  img.height = blocks_h * 2;
  img.pixels.resize(static_cast<std::size_t>(img.width) * img.height * 3);
  const int offs[2][2] = {{7, -7}, {3, -3}};
  for (int y = 0; y < img.height; ++y) {
    for (int x = 0; x < img.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const int base = 30 * (x / 2) + 10 * (y / 2) + 20 * c + 10;
        img.pixels[(static_cast<std::size_t>(y) * img.width + x) * 3 + c] =
            static_cast<std::uint8_t>(base + offs[y % 2][x % 2]);
      }
    }
  }
  return img;
}

TEST(ResizeAndCenterCrop, AreaShrinkThenCentreCrop) {
  const RgbImage img = block_image(6, 5);  // 12x10
  BucketSelection sel;
  sel.resized_width = 6;  // exact /2: INTER_AREA = mean of each 2x2 block
  sel.resized_height = 5;
  sel.bucket = {4, 2};  // crop offsets: left (6-4)/2 = 1, top (5-2)/2 = 1
  const RgbImage out = resize_and_center_crop(img, sel);
  ASSERT_EQ(out.width, 4);
  ASSERT_EQ(out.height, 2);
  ASSERT_EQ(out.pixels.size(), 4u * 2u * 3u);
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 4; ++x) {
      const int bx = x + 1, by = y + 1;
      const int want_r = 30 * bx + 10 * by + 10;
      EXPECT_EQ(px(out, x, y), (std::array<int, 3>{want_r, want_r + 20, want_r + 40}))
          << "x=" << x << " y=" << y;
    }
  }
}

TEST(ResizeAndCenterCrop, NoResizeWhenSizesMatchOnlyCrops) {
  const RgbImage img = block_image(4, 3);  // 8x6, odd trims: (8-5)/2 = 1, (6-3)/2 = 1
  BucketSelection sel;
  sel.resized_width = 8;
  sel.resized_height = 6;
  sel.bucket = {5, 3};
  const RgbImage out = resize_and_center_crop(img, sel);
  ASSERT_EQ(out.width, 5);
  ASSERT_EQ(out.height, 3);
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 5; ++x) {
      EXPECT_EQ(px(out, x, y), px(img, x + 1, y + 1));
    }
  }
}

TEST(ResizeAndCenterCrop, UpscaleKeepsFlatColourAndBucketSize) {
  RgbImage img;
  img.width = 10;
  img.height = 6;
  for (int i = 0; i < 60; ++i) img.pixels.insert(img.pixels.end(), {10, 200, 30});
  BucketSelection sel;
  sel.resized_width = 25;  // Lanczos (growing); a flat image stays flat
  sel.resized_height = 15;
  sel.bucket = {16, 8};
  const RgbImage out = resize_and_center_crop(img, sel);
  ASSERT_EQ(out.width, 16);
  ASSERT_EQ(out.height, 8);
  for (std::size_t i = 0; i < out.pixels.size(); i += 3) {
    ASSERT_EQ(out.pixels[i], 10);
    ASSERT_EQ(out.pixels[i + 1], 200);
    ASSERT_EQ(out.pixels[i + 2], 30);
  }
}

TEST(ResizeAndCenterCrop, PhotoThroughBucketManager) {
  // chelsea.png 451x300 -> bucket 640x384, resized 640x426, crop top (426-384)/2 = 21.
  const RgbImage img = load_rgb_image(kPhotos + "chelsea.png");
  const BucketSelection sel = BucketManager(BucketOptions{}).select(img.width, img.height);
  const RgbImage out = resize_and_center_crop(img, sel);
  EXPECT_EQ(out.width, 640);
  EXPECT_EQ(out.height, 384);
  EXPECT_EQ(out.pixels.size(), 640u * 384u * 3u);
}

TEST(ResizeAndCenterCrop, RejectsResizeSmallerThanBucket) {
  const RgbImage img = block_image(2, 2);
  BucketSelection sel;
  sel.resized_width = 4;
  sel.resized_height = 3;
  sel.bucket = {4, 4};
  EXPECT_THROW(resize_and_center_crop(img, sel), std::invalid_argument);
  RgbImage broken = img;
  broken.pixels.pop_back();
  sel.bucket = {2, 2};
  EXPECT_THROW(resize_and_center_crop(broken, sel), std::invalid_argument);
}

}  // namespace
}  // namespace lf
