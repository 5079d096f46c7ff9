// Tests for prepare_image: kohya's resize-to-cover (INTER_AREA when shrinking, Lanczos when
// growing), centre and explicit crops, horizontal flip, the alpha plane following the colour,
// and argument errors. Expected pixels come from exact arithmetic: 2x2 blocks whose area mean is
// an integer, an analytic box average of a stripe pattern, or a pure crop (no resize).
#include "common/image/prepared_image.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <stdexcept>

#include "common/image/decoded_image.h"
#include "tests/common/image_fixtures.h"

namespace lf {
namespace {

using test::kPhotos;
using test::Px;
using test::px;
Px px(const PreparedImage& img, int x, int y) { return px(img.rgb, img.width, x, y); }
Px px(const DecodedImage& img, int x, int y) { return px(img.rgb, img.width, x, y); }

BucketSelection selection(int resized_w, int resized_h, int bucket_w, int bucket_h) {
  BucketSelection sel;
  sel.resized_width = resized_w;
  sel.resized_height = resized_h;
  sel.bucket = {bucket_w, bucket_h};
  return sel;
}

// Pixel (x, y) = (x, y, (x*7 + y*3) % 256): every pixel of a small image is distinct.
DecodedImage coordinate_image(int w, int h, bool with_alpha = false) {
  DecodedImage img;
  img.width = w;
  img.height = h;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      img.rgb.insert(img.rgb.end(), {std::uint8_t(x), std::uint8_t(y),
                                     std::uint8_t((x * 7 + y * 3) % 256)});
    }
  }
  if (with_alpha) {
    for (std::size_t i = 0; i < img.rgb.size(); ++i) {
      img.rgb_straight.push_back(static_cast<std::uint8_t>(255 - img.rgb[i]));
    }
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) img.alpha.push_back(std::uint8_t(x * 10 + y));
  }
  return img;
}

// An image whose 2x2 blocks average exactly: block (bx, by) has base value
// 30*bx + 10*by + 20*c + 10 and pixels base+d, base-d, base+e, base-e.
DecodedImage block_image(int blocks_w, int blocks_h) {
  DecodedImage img;
  img.width = blocks_w * 2;
  img.height = blocks_h * 2;
  img.rgb.resize(static_cast<std::size_t>(img.width) * img.height * 3);
  const int offs[2][2] = {{7, -7}, {3, -3}};
  for (int y = 0; y < img.height; ++y) {
    for (int x = 0; x < img.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const int base = 30 * (x / 2) + 10 * (y / 2) + 20 * c + 10;
        img.rgb[(static_cast<std::size_t>(y) * img.width + x) * 3 + c] =
            static_cast<std::uint8_t>(base + offs[y % 2][x % 2]);
      }
    }
  }
  return img;
}

TEST(PrepareImage, KohyaPortraitCentreCropStartsAt21) {
  // kohya: a 512x768 image at resolution 512 goes to bucket 384x640, resized to 427x640
  // (640 * 512/768 = 426.7, rounded), centre crop left (427 - 384) / 2 = 21.
  const BucketManager buckets(BucketOptions{});
  const BucketSelection sel = buckets.select(512, 768);
  ASSERT_EQ(sel.bucket, (BucketReso{384, 640}));
  ASSERT_EQ(sel.resized_width, 427);
  ASSERT_EQ(sel.resized_height, 640);

  // Vertical stripes 60 px wide (white on odd stripes): after INTER_AREA each output column is
  // the box average of its source interval [c*s, (c+1)*s), s = 512/427, computed here exactly.
  DecodedImage img;
  img.width = 512;
  img.height = 768;
  for (int y = 0; y < 768; ++y)
    for (int x = 0; x < 512; ++x) {
      const std::uint8_t v = (x / 60) % 2 ? 255 : 0;
      img.rgb.insert(img.rgb.end(), {v, v, v});
    }
  const PreparedImage out = prepare_image(img, sel, CropFlip{}, false);
  ASSERT_EQ(out.width, 384);
  ASSERT_EQ(out.height, 640);
  EXPECT_EQ(out.crop_left, 21);
  EXPECT_EQ(out.crop_top, 0);
  EXPECT_TRUE(out.alpha.empty());
  const double s = 512.0 / 427.0;
  auto white_fraction = [](double a, double b) {  // measure of {x in [a,b): stripe odd} / (b-a)
    double white = 0;
    for (int k = 0; k * 60 < 512; ++k) {
      if (k % 2 == 0) continue;
      const double lo = std::max(a, k * 60.0), hi = std::min(b, std::min(512.0, k * 60.0 + 60));
      if (hi > lo) white += hi - lo;
    }
    return white / (b - a);
  };
  int edges = 0;
  for (int c = 0; c < 384; ++c) {
    const int src_col = c + 21;
    const double want = 255.0 * white_fraction(src_col * s, (src_col + 1) * s);
    for (int y : {0, 320, 639}) {
      ASSERT_NEAR(px(out, c, y)[0], want, 1.0) << "column " << c << " row " << y;
    }
    if (want > 5 && want < 250) ++edges;
  }
  EXPECT_GE(edges, 6);  // the blended edge columns are where the offset shows
  // One edge explicitly: source edge x=60 lands in resized column 50 (96 % white), column 49 is
  // black: output columns 28 and 29. A crop at 20 or 22 would move them.
  EXPECT_EQ(px(out, 28, 0)[0], 0);
  EXPECT_NEAR(px(out, 29, 0)[0], 245, 1);
}

TEST(PrepareImage, ExplicitCropWithoutResizeIsExact) {
  const DecodedImage img = coordinate_image(30, 20);
  const BucketSelection sel = selection(30, 20, 16, 12);
  for (const auto& [left, top] : std::vector<std::pair<int, int>>{{0, 0}, {14, 8}, {5, 3}}) {
    CropFlip cf;
    cf.crop_left = left;
    cf.crop_top = top;
    const PreparedImage out = prepare_image(img, sel, cf, false);
    ASSERT_EQ(out.width, 16);
    ASSERT_EQ(out.height, 12);
    EXPECT_EQ(out.crop_left, left);
    EXPECT_EQ(out.crop_top, top);
    for (int y = 0; y < 12; ++y)
      for (int x = 0; x < 16; ++x) ASSERT_EQ(px(out, x, y), px(img, x + left, y + top));
  }
  // Centre: (30-16)/2 = 7, (20-12)/2 = 4; odd trims round down: (29-16)/2 = 6.
  const PreparedImage c = prepare_image(img, sel, CropFlip{}, false);
  EXPECT_EQ(c.crop_left, 7);
  EXPECT_EQ(c.crop_top, 4);
  EXPECT_EQ(px(c, 0, 0), px(img, 7, 4));
  const PreparedImage odd = prepare_image(coordinate_image(29, 13), selection(29, 13, 16, 12),
                                          CropFlip{}, false);
  EXPECT_EQ(odd.crop_left, 6);
  EXPECT_EQ(odd.crop_top, 0);
}

TEST(PrepareImage, FlipMirrorsColumnsExactly) {
  const DecodedImage img = coordinate_image(30, 20);
  CropFlip cf;
  cf.crop_left = 5;
  cf.crop_top = 2;
  cf.flip = true;
  const PreparedImage out = prepare_image(img, selection(30, 20, 16, 12), cf, false);
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 16; ++x) ASSERT_EQ(px(out, x, y), px(img, 5 + 15 - x, 2 + y));
  // Flip after a resize equals the mirrored unflipped result.
  const DecodedImage blocks = block_image(6, 5);
  const BucketSelection sel = selection(6, 5, 4, 2);
  CropFlip f;
  f.flip = true;
  const PreparedImage a = prepare_image(blocks, sel, CropFlip{}, false);
  const PreparedImage b = prepare_image(blocks, sel, f, false);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 4; ++x) ASSERT_EQ(px(b, x, y), px(a, 3 - x, y));
}

TEST(PrepareImage, AreaShrinkThenCentreCrop) {
  const DecodedImage img = block_image(6, 5);  // 12x10
  // Exact /2: INTER_AREA = mean of each 2x2 block; crop offsets (6-4)/2 = 1, (5-2)/2 = 1.
  const PreparedImage out = prepare_image(img, selection(6, 5, 4, 2), CropFlip{}, false);
  ASSERT_EQ(out.width, 4);
  ASSERT_EQ(out.height, 2);
  ASSERT_EQ(out.rgb.size(), 4u * 2u * 3u);
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 4; ++x) {
      const int r = 30 * (x + 1) + 10 * (y + 1) + 10;
      EXPECT_EQ(px(out, x, y), (Px{r, r + 20, r + 40})) << "x=" << x << " y=" << y;
    }
  }
  // Resized == bucket (no crop): the resize writes the output directly; same values.
  const PreparedImage whole = prepare_image(img, selection(6, 5, 6, 5), CropFlip{}, false);
  EXPECT_EQ(px(whole, 1, 1), px(out, 0, 0));
  EXPECT_EQ(px(whole, 0, 0), (Px{10, 30, 50}));
}

TEST(PrepareImage, UpscaleKeepsFlatColour) {
  DecodedImage img;
  img.width = 10;
  img.height = 6;
  for (int i = 0; i < 60; ++i) img.rgb.insert(img.rgb.end(), {10, 200, 30});
  // Lanczos (growing); a flat image stays flat.
  const PreparedImage out = prepare_image(img, selection(25, 15, 16, 8), CropFlip{}, false);
  ASSERT_EQ(out.width, 16);
  ASSERT_EQ(out.height, 8);
  for (std::size_t i = 0; i < out.rgb.size(); i += 3) {
    ASSERT_EQ(out.rgb[i], 10);
    ASSERT_EQ(out.rgb[i + 1], 200);
    ASSERT_EQ(out.rgb[i + 2], 30);
  }
}

TEST(PrepareImage, AlphaFollowsTheColour) {
  const DecodedImage img = coordinate_image(30, 20, /*with_alpha=*/true);
  CropFlip cf;
  cf.crop_left = 3;
  cf.crop_top = 4;
  cf.flip = true;
  const PreparedImage out = prepare_image(img, selection(30, 20, 16, 12), cf, true);
  ASSERT_EQ(out.alpha.size(), 16u * 12u);
  for (int y = 0; y < 12; ++y) {
    for (int x = 0; x < 16; ++x) {
      const int sx = 3 + 15 - x, sy = 4 + y;
      // use_alpha: the straight colour, not the composited one.
      ASSERT_EQ(px(out, x, y), px(img.rgb_straight, 30, sx, sy));
      ASSERT_EQ(out.alpha[y * 16 + x], sx * 10 + sy);
    }
  }
  // Resized alpha: 2x2 means of a plane whose blocks average exactly.
  DecodedImage b = block_image(4, 3);
  b.rgb_straight = b.rgb;
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 8; ++x) b.alpha.push_back(std::uint8_t(40 * (x / 2) + (y % 2 ? -5 : 5) + 20));
  const PreparedImage r = prepare_image(b, selection(4, 3, 4, 3), CropFlip{}, true);
  EXPECT_EQ(r.alpha, (std::vector<std::uint8_t>{20, 60, 100, 140, 20, 60, 100, 140, 20, 60, 100, 140}));

  // use_alpha = false: the composited colour and no alpha.
  const PreparedImage no = prepare_image(img, selection(30, 20, 16, 12), cf, false);
  EXPECT_TRUE(no.alpha.empty());
  EXPECT_EQ(px(no, 0, 0), px(img, 3 + 15, 4));
  // use_alpha on an image without alpha: fully opaque.
  const PreparedImage opaque = prepare_image(coordinate_image(30, 20), selection(30, 20, 16, 12),
                                             CropFlip{}, true);
  ASSERT_EQ(opaque.alpha.size(), 16u * 12u);
  for (std::uint8_t a : opaque.alpha) ASSERT_EQ(a, 255);
}

TEST(PrepareImage, PhotoThroughBucketManager) {
  // chelsea.png 451x300 -> bucket 640x384, resized 640x426, crop top (426-384)/2 = 21.
  const DecodedImage img = decode_image_file(kPhotos + "chelsea.png");
  const BucketSelection sel = BucketManager(BucketOptions{}).select(img.width, img.height);
  ASSERT_EQ(sel.resized_height, 426);
  const PreparedImage out = prepare_image(img, sel, CropFlip{}, false);
  EXPECT_EQ(out.width, 640);
  EXPECT_EQ(out.height, 384);
  EXPECT_EQ(out.crop_left, 0);
  EXPECT_EQ(out.crop_top, 21);
  EXPECT_EQ(out.rgb.size(), 640u * 384u * 3u);
}

TEST(PrepareImage, ArgumentErrors) {
  const DecodedImage img = coordinate_image(30, 20);
  EXPECT_THROW(prepare_image(img, selection(30, 19, 16, 20), CropFlip{}, false),
               std::invalid_argument);  // resized does not cover the bucket
  const BucketSelection sel = selection(30, 20, 16, 12);
  for (const auto& [left, top] :
       std::vector<std::pair<int, int>>{{15, 0}, {0, 9}, {-2, 0}, {0, -5}, {100, 100}}) {
    CropFlip cf;
    cf.crop_left = left;
    cf.crop_top = top;
    EXPECT_THROW(prepare_image(img, sel, cf, false), std::invalid_argument) << left << "," << top;
  }
  try {
    CropFlip cf;
    cf.crop_left = 15;
    prepare_image(img, sel, cf, false);
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "prepare_image: crop_left 15 is outside [0, 14] (or -1 for centre)");
  }
  CropFlip edge;
  edge.crop_left = 14;
  edge.crop_top = 8;
  EXPECT_NO_THROW(prepare_image(img, sel, edge, false));

  DecodedImage broken = img;
  broken.rgb.pop_back();
  EXPECT_THROW(prepare_image(broken, sel, CropFlip{}, false), std::invalid_argument);
  DecodedImage bad_alpha = coordinate_image(30, 20, true);
  bad_alpha.alpha.pop_back();
  EXPECT_THROW(prepare_image(bad_alpha, sel, CropFlip{}, true), std::invalid_argument);
  EXPECT_NO_THROW(prepare_image(bad_alpha, sel, CropFlip{}, false));  // alpha unused
}

}  // namespace
}  // namespace lf
