// Tests for read_image_header: stored sizes from files written by real encoders (OpenCV's
// libpng/libjpeg/libwebp/BMP writers), crafted headers claiming huge sizes, EXIF block
// locations in the three containers, and truncated/garbage input never read out of bounds.
#include "common/image/image_header.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/common/image_fixtures.h"

namespace lf {
namespace {

using test::Bytes;

ImageHeader header(const Bytes& b) { return read_image_header(b.data(), b.size()); }

cv::Mat pattern(int w, int h) {
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(x * 5, y * 7, 100);
  return m;
}

TEST(ReadImageHeader, SizesFromRealEncoders) {
  const cv::Mat img = pattern(37, 23);
  struct Case {
    const char* ext;
    std::vector<int> params;
    const char* format;
  };
  const Case cases[] = {
      {".png", {}, "png"},
      {".jpg", {}, "jpeg"},
      {".jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1}, "jpeg"},  // SOF2
      {".webp", {cv::IMWRITE_WEBP_QUALITY, 80}, "webp"},    // VP8 (lossy)
      {".webp", {cv::IMWRITE_WEBP_QUALITY, 101}, "webp"},   // VP8L (lossless)
      {".bmp", {}, "bmp"},
  };
  for (const Case& c : cases) {
    const Bytes b = test::encode_image(img, c.ext, c.params);
    const ImageHeader h = header(b);
    EXPECT_EQ(h.format, c.format) << c.ext;
    EXPECT_EQ(h.width, 37) << c.ext;
    EXPECT_EQ(h.height, 23) << c.ext;
    EXPECT_EQ(h.exif_size, 0u) << c.ext;
  }
  // The same bitstream in the extended container: the VP8X canvas size is reported.
  const Bytes simple = test::encode_image(img, ".webp", {cv::IMWRITE_WEBP_QUALITY, 80});
  const ImageHeader x = header(test::webp_extended(simple, 37, 23, {}));
  EXPECT_EQ(x.format, "webp");
  EXPECT_EQ(x.width, 37);
  EXPECT_EQ(x.height, 23);
}

TEST(ReadImageHeader, CraftedHugeSizes) {
  Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  test::put_be32(png, 100000);
  test::put_be32(png, 70000);
  png.insert(png.end(), {8, 2, 0, 0, 0, 0, 0, 0, 0});  // depth, type, ..., CRC (unchecked here)
  ImageHeader h = header(png);
  EXPECT_EQ(h.format, "png");
  EXPECT_EQ(h.width, 100000);
  EXPECT_EQ(h.height, 70000);

  // JPEG: SOI, an APP0, SOF0 with height 0xEA60 (60000) and width 0xC350 (50000).
  const Bytes jpeg = {0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 11, 8,
                      0xEA, 0x60, 0xC3, 0x50, 3, 1, 0x22, 0};
  h = header(jpeg);
  EXPECT_EQ(h.format, "jpeg");
  EXPECT_EQ(h.width, 50000);
  EXPECT_EQ(h.height, 60000);

  const Bytes bmp = {'B', 'M', 0, 0, 0, 0, 0, 0, 0, 0, 54, 0, 0, 0, 40, 0, 0, 0,
                     0x30, 0x75, 0, 0,        // width 30000
                     0xD0, 0x8A, 0xFF, 0xFF,  // height -30000: top-down
                     1, 0};
  h = header(bmp);
  EXPECT_EQ(h.format, "bmp");
  EXPECT_EQ(h.width, 30000);
  EXPECT_EQ(h.height, 30000);

  // WebP VP8X canvas of 16384 x 9000 (24-bit fields hold size - 1).
  Bytes webp = {'R', 'I', 'F', 'F', 30, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'X',
                10, 0, 0, 0, 0, 0, 0, 0};
  test::put_le(webp, 16383, 3);
  test::put_le(webp, 8999, 3);
  h = header(webp);
  EXPECT_EQ(h.width, 16384);
  EXPECT_EQ(h.height, 9000);
}

TEST(ReadImageHeader, ExifBlockInEachContainer) {
  const Bytes tiff = test::exif_orientation_tiff(6);
  const cv::Mat img = pattern(16, 8);

  const Bytes jpeg = test::jpeg_with_exif(test::encode_image(img, ".jpg"), tiff);
  ImageHeader h = header(jpeg);
  EXPECT_EQ(h.width, 16);
  EXPECT_EQ(h.height, 8);
  ASSERT_EQ(h.exif_size, tiff.size());
  EXPECT_EQ(h.exif_offset, 12u);  // SOI(2) + marker(2) + length(2) + "Exif\0\0"(6)
  EXPECT_EQ(Bytes(jpeg.begin() + h.exif_offset, jpeg.begin() + h.exif_offset + h.exif_size), tiff);

  const Bytes png = test::png_with_chunk(test::encode_image(img, ".png"), "eXIf", tiff);
  h = header(png);
  EXPECT_EQ(h.width, 16);
  ASSERT_EQ(h.exif_size, tiff.size());
  EXPECT_EQ(Bytes(png.begin() + h.exif_offset, png.begin() + h.exif_offset + h.exif_size), tiff);

  // Some writers put "Exif\0\0" inside the PNG/WebP chunk too: it is skipped.
  Bytes prefixed = {'E', 'x', 'i', 'f', 0, 0};
  prefixed.insert(prefixed.end(), tiff.begin(), tiff.end());
  const Bytes webp = test::webp_extended(test::encode_image(img, ".webp"), 16, 8, prefixed);
  h = header(webp);
  EXPECT_EQ(h.width, 16);
  EXPECT_EQ(h.height, 8);
  ASSERT_EQ(h.exif_size, tiff.size());
  EXPECT_EQ(Bytes(webp.begin() + h.exif_offset, webp.begin() + h.exif_offset + h.exif_size), tiff);
}

TEST(ReadImageHeader, TruncatedAndUnknownInputs) {
  const Bytes png = test::encode_image(pattern(20, 10), ".png");
  // Every prefix: never reads out of bounds (ASan/valgrind would tell), sizes only once whole.
  for (std::size_t n = 0; n <= 40; ++n) {
    const ImageHeader h = read_image_header(png.data(), n);
    if (n < 24) {
      EXPECT_FALSE(h.has_size()) << n;
    } else {
      EXPECT_EQ(h.width, 20) << n;
    }
  }
  const Bytes jpeg = test::encode_image(pattern(20, 10), ".jpg");
  int first_sized = -1;
  for (std::size_t n = 0; n <= jpeg.size(); ++n) {
    if (read_image_header(jpeg.data(), n).has_size()) {
      first_sized = static_cast<int>(n);
      break;
    }
  }
  EXPECT_GT(first_sized, 20);  // SOF comes after APP0 and the quantisation tables
  // JPEG end marker: present in the whole file; missing when cut inside the scan data (also
  // when the cut leaves an FF byte last); not judged before SOS is reached.
  const Bytes big = test::encode_image(pattern(400, 300), ".jpg");  // mostly scan data
  EXPECT_FALSE(header(big).truncated);
  EXPECT_TRUE(read_image_header(big.data(), big.size() * 6 / 10).truncated);
  EXPECT_TRUE(read_image_header(big.data(), big.size() - 1).truncated);
  EXPECT_FALSE(read_image_header(big.data(), static_cast<std::size_t>(first_sized)).truncated);
  const Bytes progressive =
      test::encode_image(pattern(400, 300), ".jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
  EXPECT_FALSE(header(progressive).truncated);  // several scans, one EOI
  EXPECT_TRUE(read_image_header(progressive.data(), progressive.size() * 6 / 10).truncated);
  Bytes trailing = big;  // bytes after EOI (some writers append data): still complete
  trailing.insert(trailing.end(), {0, 0, 0xFF});
  EXPECT_FALSE(header(trailing).truncated);
  EXPECT_FALSE(header(png).truncated);
  const std::string text = "this is not an image";
  const ImageHeader t =
      read_image_header(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  EXPECT_EQ(t.format, "");
  EXPECT_FALSE(t.has_size());
  // A JPEG whose SOF says height 0 (defined later by DNL) has no size from the header.
  const Bytes dnl = {0xFF, 0xD8, 0xFF, 0xC0, 0, 11, 8, 0, 0, 0, 20, 3, 1, 0x22, 0};
  EXPECT_FALSE(header(dnl).has_size());
}

}  // namespace
}  // namespace lf
