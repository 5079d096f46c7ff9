// Tests for decode_image / decode_image_file: channel order, grey, palette (with and without
// tRNS), CMYK JPEG, 16-bit scaling, alpha on white, EXIF orientation 1..8 in JPEG/PNG/WebP, the
// max_pixels refusal before decoding, decode errors, and UTF-8 file names. Expected pixels of
// the skimage files were read with an independent decoder (Pillow 12.1.1); generated images use
// solid blocks so that JPEG's loss stays within small tolerances.
#include "common/image/decoded_image.h"

#include <gtest/gtest.h>
#include <jpeglib.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/data/dataset.h"
#include "tests/common/image_fixtures.h"

namespace lf {
namespace {

using test::Bytes;
using test::kPhotos;
using test::Px;
using test::px;
Px px(const DecodedImage& img, int x, int y) { return px(img.rgb, img.width, x, y); }
int alpha_at(const DecodedImage& img, int x, int y) {
  return img.alpha[static_cast<std::size_t>(y) * img.width + x];
}
bool near(const Px& a, const Px& b, int tol) {
  for (int c = 0; c < 3; ++c)
    if (std::abs(a[c] - b[c]) > tol) return false;
  return true;
}
std::string str(const Px& p) {
  return "(" + std::to_string(p[0]) + "," + std::to_string(p[1]) + "," + std::to_string(p[2]) + ")";
}

// The DatasetError message of decoding `path`, or "" when it decoded.
std::string decode_error(const std::string& path, const DecodeOptions& opt = {}) {
  try {
    decode_image_file(path, opt);
  } catch (const DatasetError& e) {
    return e.what();
  }
  return "";
}

void expect_error_naming(const std::string& path, const std::string& what) {
  const std::string msg = decode_error(path);
  EXPECT_EQ(msg.rfind(path + ": cannot ", 0), 0u) << "message: " << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << "message: " << msg;
}

// ---- colour layouts --------------------------------------------------------------------------

TEST(DecodeImage, ColourPngIsRgbOrder) {
  const DecodedImage img = decode_image_file(kPhotos + "astronaut.png");
  ASSERT_EQ(img.width, 512);
  ASSERT_EQ(img.height, 512);
  ASSERT_EQ(img.rgb.size(), 512u * 512u * 3u);
  EXPECT_FALSE(img.has_alpha());
  EXPECT_TRUE(img.rgb_straight.empty());
  EXPECT_EQ(img.exif_orientation, 1);
  EXPECT_EQ(px(img, 0, 0), (Px{154, 147, 151}));
  EXPECT_EQ(px(img, 200, 100), (Px{81, 57, 17}));
  EXPECT_EQ(px(img, 300, 256), (Px{53, 21, 7}));
}

TEST(DecodeImage, GreyBecomesEqualRgbChannels) {
  const DecodedImage img = decode_image_file(kPhotos + "camera.png");
  ASSERT_EQ(img.width, 512);
  EXPECT_EQ(px(img, 0, 0), (Px{200, 200, 200}));
  EXPECT_EQ(px(img, 200, 100), (Px{54, 54, 54}));
  for (std::size_t i = 0; i < img.rgb.size(); i += 3) {
    ASSERT_EQ(img.rgb[i], img.rgb[i + 1]);
    ASSERT_EQ(img.rgb[i], img.rgb[i + 2]);
  }
  // A grey JPEG (one component) too.
  test::TempDir dir("decoded_grey_jpeg");
  cv::Mat grey(16, 24, CV_8UC1, cv::Scalar(90));
  test::write_bytes(dir.str("g.jpg"), test::encode_image(grey, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 100}));
  const DecodedImage g = decode_image_file(dir.str("g.jpg"));
  ASSERT_EQ(g.width, 24);
  ASSERT_EQ(g.height, 16);
  EXPECT_EQ(px(g, 5, 5), (Px{90, 90, 90}));
}

TEST(DecodeImage, PaletteWithoutTransparency) {
  // 10x10 palette PNGs (no tRNS): plain RGB, values as Pillow's convert("RGB").
  const DecodedImage c = decode_image_file(kPhotos + "palette_color.png");
  ASSERT_EQ(c.width, 10);
  ASSERT_EQ(c.height, 10);
  EXPECT_FALSE(c.has_alpha());
  EXPECT_EQ(px(c, 0, 0), (Px{51, 0, 255}));
  EXPECT_EQ(px(c, 5, 5), (Px{102, 51, 255}));
  EXPECT_EQ(px(c, 9, 9), (Px{102, 0, 204}));
  EXPECT_EQ(px(c, 7, 3), (Px{51, 153, 255}));
  const DecodedImage g = decode_image_file(kPhotos + "palette_gray.png");
  EXPECT_EQ(px(g, 0, 0), (Px{250, 250, 250}));
  EXPECT_EQ(px(g, 5, 5), (Px{125, 125, 125}));
  EXPECT_EQ(px(g, 9, 9), (Px{25, 25, 25}));
}

TEST(DecodeImage, PaletteWithTrnsKeepsTransparency) {
  // foo3x5x4indexed.png: 5x3, palette entry 0 and 3 transparent (tRNS 00 ff ff 00).
  // Pillow convert("RGBA"): row 0 (127,0,255,255); row 1 (192,192,255,0) x2 then (0,0,255,0) x3;
  // row 2 (0,31,255,255). OpenCV 4.6 expands it to BGRA under IMREAD_UNCHANGED.
  const DecodedImage img = decode_image_file(kPhotos + "foo3x5x4indexed.png");
  ASSERT_EQ(img.width, 5);
  ASSERT_EQ(img.height, 3);
  ASSERT_TRUE(img.has_alpha());
  for (int x = 0; x < 5; ++x) {
    EXPECT_EQ(px(img, x, 0), (Px{127, 0, 255}));
    EXPECT_EQ(alpha_at(img, x, 0), 255);
    EXPECT_EQ(px(img, x, 1), (Px{255, 255, 255}));  // transparent: white
    EXPECT_EQ(alpha_at(img, x, 1), 0);
    EXPECT_EQ(px(img.rgb_straight, 5, x, 1), x < 2 ? (Px{192, 192, 255}) : (Px{0, 0, 255}));
    EXPECT_EQ(px(img, x, 2), (Px{0, 31, 255}));
    EXPECT_EQ(px(img.rgb_straight, 5, x, 2), (Px{0, 31, 255}));
  }
}

TEST(DecodeImage, RgbaPngCompositedOnWhite) {
  test::TempDir dir("decoded_rgba");
  // 4x4: column 0 transparent red (255,0,0,0), column 1 opaque blue, column 2 half-transparent
  // black (0,0,0,128), column 3 (200,100,50,128).
  std::vector<std::uint16_t> s;
  for (int y = 0; y < 4; ++y) {
    s.insert(s.end(), {255, 0, 0, 0, 0, 0, 255, 255, 0, 0, 0, 128, 200, 100, 50, 128});
  }
  test::write_png(dir.str("rgba.png"), 4, 4, 6, 8, s);
  const DecodedImage img = decode_image_file(dir.str("rgba.png"));
  ASSERT_EQ(img.width, 4);
  ASSERT_TRUE(img.has_alpha());
  ASSERT_EQ(img.alpha.size(), 16u);
  ASSERT_EQ(img.rgb_straight.size(), 48u);
  for (int y = 0; y < 4; ++y) {
    EXPECT_EQ(px(img, 0, y), (Px{255, 255, 255}));
    EXPECT_EQ(px(img.rgb_straight, 4, 0, y), (Px{255, 0, 0}));
    EXPECT_EQ(alpha_at(img, 0, y), 0);
    EXPECT_EQ(px(img, 1, y), (Px{0, 0, 255}));
    EXPECT_EQ(alpha_at(img, 1, y), 255);
    // 255*127/255 = 127.
    EXPECT_EQ(px(img, 2, y), (Px{127, 127, 127}));
    EXPECT_EQ(px(img.rgb_straight, 4, 2, y), (Px{0, 0, 0}));
    EXPECT_EQ(alpha_at(img, 2, y), 128);
    // (c*128 + 255*127) / 255 rounded: 227.39, 177.20, 152.10.
    EXPECT_EQ(px(img, 3, y), (Px{227, 177, 152}));
  }
  // keep_alpha = false: the same composited colour, nothing else kept.
  DecodeOptions opt;
  opt.keep_alpha = false;
  const DecodedImage lean = decode_image_file(dir.str("rgba.png"), opt);
  EXPECT_FALSE(lean.has_alpha());
  EXPECT_TRUE(lean.rgb_straight.empty());
  EXPECT_EQ(lean.rgb, img.rgb);
}

TEST(DecodeImage, GreyAlphaPng) {
  test::TempDir dir("decoded_la");
  test::write_png(dir.str("la.png"), 2, 1, 4, 8, {100, 64, 30, 255});
  const DecodedImage g = decode_image_file(dir.str("la.png"));
  ASSERT_TRUE(g.has_alpha());
  EXPECT_EQ(px(g, 0, 0), (Px{216, 216, 216}));  // (6400 + 48705) / 255 = 216.1
  EXPECT_EQ(px(g.rgb_straight, 2, 0, 0), (Px{100, 100, 100}));
  EXPECT_EQ(alpha_at(g, 0, 0), 64);
  EXPECT_EQ(px(g, 1, 0), (Px{30, 30, 30}));
  EXPECT_EQ(alpha_at(g, 1, 0), 255);
}

TEST(DecodeImage, RealRgbaLogo) {
  // logo.png is RGBA with every pixel opaque: alpha kept (all 255), colour unchanged.
  const DecodedImage img = decode_image_file(kPhotos + "logo.png");
  ASSERT_EQ(img.width, 500);
  ASSERT_TRUE(img.has_alpha());
  EXPECT_EQ(img.rgb, img.rgb_straight);
  for (std::uint8_t a : img.alpha) ASSERT_EQ(a, 255);
  EXPECT_EQ(px(img, 250, 250), (Px{255, 159, 83}));
  EXPECT_EQ(px(img, 100, 100), (Px{151, 202, 75}));
}

TEST(DecodeImage, SixteenBitScaledNotClamped) {
  test::TempDir dir("decoded_16");
  test::write_png(dir.str("g16.png"), 1, 1, 0, 16, {0x8080});
  EXPECT_EQ(px(decode_image_file(dir.str("g16.png")), 0, 0), (Px{128, 128, 128}));
  // 0x8080/257 = 128, 0x4040/257 = 64, 0xFFFF/257 = 255; 12845/257 = 49.98 -> 50;
  // 128/257 = 0.498 -> 0; 129/257 = 0.502 -> 1 (clamping would give 255 for all but 0).
  test::write_png(dir.str("rgb16.png"), 2, 1, 2, 16, {0x8080, 0x4040, 0xFFFF, 12845, 128, 129});
  const DecodedImage rgb = decode_image_file(dir.str("rgb16.png"));
  EXPECT_EQ(px(rgb, 0, 0), (Px{128, 64, 255}));
  EXPECT_EQ(px(rgb, 1, 0), (Px{50, 0, 1}));
  // 16-bit RGBA: scaled, then composited: (0*128 + 255*127) / 255 = 127.
  test::write_png(dir.str("rgba16.png"), 1, 1, 6, 16, {0xFFFF, 0, 0x8080, 0x8080});
  const DecodedImage a = decode_image_file(dir.str("rgba16.png"));
  EXPECT_EQ(alpha_at(a, 0, 0), 128);
  EXPECT_EQ(px(a.rgb_straight, 1, 0, 0), (Px{255, 0, 128}));
  EXPECT_EQ(px(a, 0, 0), (Px{255, 127, 191}));  // (128*128 + 255*127)/255 = 191.25

  // chessboard_RGB.png (16-bit PNG): 12845 -> 50, 11411 -> 44.40 -> 44, 54124 -> 210.60 -> 211.
  const DecodedImage cb = decode_image_file(kPhotos + "chessboard_RGB.png");
  EXPECT_EQ(px(cb, 25, 0), (Px{50, 50, 50}));
  EXPECT_EQ(px(cb, 26, 24), (Px{44, 44, 44}));
  EXPECT_EQ(px(cb, 23, 24), (Px{211, 211, 211}));
  EXPECT_EQ(px(cb, 0, 0), (Px{255, 255, 255}));
  // chessboard_GRAY_U16.tif stores 8-bit values (0..255) in 16-bit samples: scaled, they are
  // almost black (255 -> 1, 211 -> 1, 50 -> 0); clamping would give 255/211/50.
  const DecodedImage t = decode_image_file(kPhotos + "chessboard_GRAY_U16.tif");
  ASSERT_EQ(t.width, 200);
  EXPECT_EQ(px(t, 0, 0), (Px{1, 1, 1}));
  EXPECT_EQ(px(t, 23, 24), (Px{1, 1, 1}));
  EXPECT_EQ(px(t, 25, 0), (Px{0, 0, 0}));
}

// A CMYK JPEG written by libjpeg with the Adobe convention (inverted samples, APP14 marker) as
// Photoshop and Pillow write them; OpenCV cannot encode CMYK.
Bytes cmyk_jpeg(int w, int h, std::array<std::uint8_t, 4> ink) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* mem = nullptr;
  unsigned long mem_size = 0;
  jpeg_mem_dest(&cinfo, &mem, &mem_size);
  cinfo.image_width = w;
  cinfo.image_height = h;
  cinfo.input_components = 4;
  cinfo.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_colorspace(&cinfo, JCS_CMYK);  // writes the Adobe marker
  jpeg_set_quality(&cinfo, 100, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<std::uint8_t> row(static_cast<std::size_t>(w) * 4);
  for (int x = 0; x < w; ++x)
    for (int c = 0; c < 4; ++c) row[x * 4 + c] = static_cast<std::uint8_t>(255 - ink[c]);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&cinfo, &r, 1);
  }
  jpeg_finish_compress(&cinfo);
  Bytes out(mem, mem + mem_size);
  jpeg_destroy_compress(&cinfo);
  std::free(mem);
  return out;
}

TEST(DecodeImage, CmykJpegBecomesRgb) {
  test::TempDir dir("decoded_cmyk");
  // Ink (C, M, Y, K): magenta+yellow = red; 50 % black = mid grey; cyan = (0, 255, 255).
  const struct {
    std::array<std::uint8_t, 4> ink;
    Px rgb;
  } cases[] = {{{0, 255, 255, 0}, {255, 0, 0}},
               {{0, 0, 0, 128}, {127, 127, 127}},
               {{255, 0, 0, 0}, {0, 255, 255}}};
  for (const auto& c : cases) {
    test::write_bytes(dir.str("cmyk.jpg"), cmyk_jpeg(16, 8, c.ink));
    const DecodedImage img = decode_image_file(dir.str("cmyk.jpg"));
    ASSERT_EQ(img.width, 16);
    ASSERT_EQ(img.height, 8);
    EXPECT_FALSE(img.has_alpha());
    EXPECT_TRUE(near(px(img, 8, 4), c.rgb, 3)) << str(px(img, 8, 4)) << " want " << str(c.rgb);
  }
}

// ---- EXIF orientation --------------------------------------------------------------------------

// A w x h BGR image: grey, with a red block at stored top-left and a blue one at stored
// top-right (blocks of `block` px).
cv::Mat two_marker_image(int w, int h, int block) {
  cv::Mat m(h, w, CV_8UC3, cv::Scalar(128, 128, 128));
  m(cv::Rect(0, 0, block, block)).setTo(cv::Scalar(0, 0, 255));      // red (BGR)
  m(cv::Rect(w - block, 0, block, block)).setTo(cv::Scalar(255, 0, 0));  // blue
  return m;
}

enum Corner { TL, TR, BL, BR };
const char* const kCornerName[] = {"top-left", "top-right", "bottom-left", "bottom-right"};

// Which corner of the upright image shows each stored-corner marker, per orientation 1..8.
struct Expect {
  Corner red;   // stored (0, 0)
  Corner blue;  // stored (W-1, 0)
};
const Expect kExpect[9] = {{}, {TL, TR}, {TR, TL}, {BR, BL}, {BL, BR},
                           {TL, BL}, {TR, BR}, {BR, TR}, {BL, TL}};

Px corner_px(const DecodedImage& img, Corner c, int inset) {
  const int x = (c == TL || c == BL) ? inset : img.width - 1 - inset;
  const int y = (c == TL || c == TR) ? inset : img.height - 1 - inset;
  return px(img, x, y);
}

void check_orientation(const DecodedImage& img, int o, int w, int h, int inset, int tol,
                       const std::string& what) {
  SCOPED_TRACE(what + " orientation " + std::to_string(o));
  EXPECT_EQ(img.exif_orientation, o);
  const bool swapped = o >= 5;
  ASSERT_EQ(img.width, swapped ? h : w);
  ASSERT_EQ(img.height, swapped ? w : h);
  const Px red{255, 0, 0}, blue{0, 0, 255}, grey{128, 128, 128};
  for (int c = 0; c < 4; ++c) {
    const Px want = c == kExpect[o].red ? red : c == kExpect[o].blue ? blue : grey;
    const Px got = corner_px(img, static_cast<Corner>(c), inset);
    EXPECT_TRUE(near(got, want, tol)) << kCornerName[c] << " is " << str(got) << ", want "
                                      << str(want);
  }
}

TEST(DecodeImage, ExifOrientationJpegApp1) {
  test::TempDir dir("decoded_exif_jpeg");
  const Bytes jpeg =
      test::encode_image(two_marker_image(40, 30, 10), ".jpg", {cv::IMWRITE_JPEG_QUALITY, 95});
  for (int o = 1; o <= 8; ++o) {
    const std::string path = dir.str("o" + std::to_string(o) + ".jpg");
    test::write_bytes(path, test::jpeg_with_exif(jpeg, test::exif_orientation_tiff(o)));
    check_orientation(decode_image_file(path), o, 40, 30, 3, 12, "jpeg");
  }
  // Big-endian ("MM") TIFF, as cameras of some makers write.
  const std::string be = dir.str("be.jpg");
  test::write_bytes(be, test::jpeg_with_exif(jpeg, test::exif_orientation_tiff(8, true)));
  check_orientation(decode_image_file(be), 8, 40, 30, 3, 12, "jpeg MM");
  // Out-of-range value 9 and a plain JPEG without EXIF: left as stored.
  const std::string bad = dir.str("nine.jpg");
  test::write_bytes(bad, test::jpeg_with_exif(jpeg, test::exif_orientation_tiff(9)));
  check_orientation(decode_image_file(bad), 1, 40, 30, 3, 12, "jpeg value 9 ->");
  test::write_bytes(dir.str("plain.jpg"), jpeg);
  check_orientation(decode_image_file(dir.str("plain.jpg")), 1, 40, 30, 3, 12, "no exif ->");
}

TEST(DecodeImage, ExifOrientationPngExifChunk) {
  test::TempDir dir("decoded_exif_png");
  const Bytes png = test::encode_image(two_marker_image(40, 30, 4), ".png");
  for (int o = 1; o <= 8; ++o) {
    const std::string path = dir.str("o" + std::to_string(o) + ".png");
    test::write_bytes(path, test::png_with_chunk(png, "eXIf", test::exif_orientation_tiff(o)));
    check_orientation(decode_image_file(path), o, 40, 30, 0, 0, "png");  // lossless: exact
  }
}

TEST(DecodeImage, ExifOrientationWebpExifChunk) {
  test::TempDir dir("decoded_exif_webp");
  const Bytes webp = test::encode_image(two_marker_image(40, 30, 10), ".webp",
                                        {cv::IMWRITE_WEBP_QUALITY, 101});  // lossless
  for (int o = 1; o <= 8; ++o) {
    const std::string path = dir.str("o" + std::to_string(o) + ".webp");
    test::write_bytes(path, test::webp_extended(webp, 40, 30, test::exif_orientation_tiff(o)));
    check_orientation(decode_image_file(path), o, 40, 30, 0, 0, "webp");
  }
}

TEST(DecodeImage, ExifRotate90OfA4000x3000Jpeg) {
  // A camera-sized photo stored 4000x3000 with orientation 6 is 3000x4000 upright, and the
  // stored top-left marker is at the top-right.
  test::TempDir dir("decoded_exif_big");
  const cv::Mat img = two_marker_image(4000, 3000, 200);
  const std::string path = dir.str("camera.jpg");
  test::write_bytes(path, test::jpeg_with_exif(test::encode_image(img, ".jpg"),
                                               test::exif_orientation_tiff(6)));
  const DecodedImage d = decode_image_file(path);
  EXPECT_EQ(d.width, 3000);
  EXPECT_EQ(d.height, 4000);
  check_orientation(d, 6, 4000, 3000, 100, 12, "4000x3000 jpeg");
  EXPECT_TRUE(near(px(d, 2999 - 100, 100), (Px{255, 0, 0}), 12));  // red at top-right
}

// ---- size limit ---------------------------------------------------------------------------------

TEST(DecodeImage, MaxPixelsRefusedFromTheHeader) {
  test::TempDir dir("decoded_max");
  // A PNG whose IHDR claims 100000x100000 (1e10 pixels; 30 GB of RGB), followed by a few bytes
  // of IDAT: refused from the header, so quickly and without an allocation.
  Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  Bytes ihdr;
  test::put_be32(ihdr, 100000);
  test::put_be32(ihdr, 100000);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
  auto chunk = [&png](const char* type, const Bytes& data) {
    test::put_be32(png, static_cast<std::uint32_t>(data.size()));
    Bytes td(type, type + 4);
    td.insert(td.end(), data.begin(), data.end());
    png.insert(png.end(), td.begin(), td.end());
    test::put_be32(png, test::png_crc32(td.data(), td.size()));
  };
  chunk("IHDR", ihdr);
  chunk("IDAT", {0x78, 0x01, 0x01, 0x00, 0x00, 0xFF, 0xFF});
  chunk("IEND", {});
  const std::string path = dir.str("bomb.png");
  test::write_bytes(path, png);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = decode_error(path);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(msg, path + ": cannot decode image: 100000x100000 = 10000000000 pixels is above the "
                        "limit of 178956970 pixels (dataset.max_image_pixels; a decompression bomb or an "
                        "oversized photo)");
  EXPECT_LT(s, 0.5);

  // The limit is inclusive: exactly max_pixels decodes, one less is refused, for each format.
  const cv::Mat img = two_marker_image(40, 30, 4);
  for (const char* ext : {".png", ".jpg", ".webp", ".bmp"}) {
    const std::string p = dir.str(std::string("small") + ext);
    test::write_bytes(p, test::encode_image(img, ext));
    DecodeOptions opt;
    opt.max_pixels = 1200;
    EXPECT_EQ(decode_error(p, opt), "") << ext;
    opt.max_pixels = 1199;
    EXPECT_NE(decode_error(p, opt).find("40x30 = 1200 pixels is above the limit of 1199"),
              std::string::npos)
        << ext;
  }
  // TIFF: no header parser, so checked after decoding, with the same message.
  DecodeOptions opt;
  opt.max_pixels = 100;
  EXPECT_NE(decode_error(kPhotos + "chessboard_GRAY_U16.tif", opt)
                .find("200x200 = 40000 pixels is above the limit of 100"),
            std::string::npos);
}

// ---- errors and file names ----------------------------------------------------------------------

TEST(DecodeImage, BadFilesThrowNamingThePath) {
  test::TempDir dir("decoded_bad");
  expect_error_naming(dir.str("missing.png"), "no such file");
  expect_error_naming(dir.str(""), "not a regular file");  // a directory

  const std::string empty = dir.str("empty.jpg");
  test::write_text(empty, "");
  expect_error_naming(empty, "empty file");

  const std::string text = dir.str("text.png");
  test::write_text(text, "this is not an image at all, just text\n");
  expect_error_naming(text, "unknown format or not an image");

  // The first 60 % of real PNG and JPEG files: headers fine, pixel data cut off.
  const Bytes png = test::read_bytes(kPhotos + "astronaut.png");
  ASSERT_GT(png.size(), 1000u);
  const std::string cut_png = dir.str("cut.png");
  test::write_bytes(cut_png, Bytes(png.begin(), png.begin() + png.size() * 6 / 10));
  expect_error_naming(cut_png, "truncated or corrupt png data");

  const Bytes jpeg = test::encode_image(two_marker_image(400, 300, 50), ".jpg");
  const std::string cut_jpg = dir.str("cut.jpg");
  test::write_bytes(cut_jpg, Bytes(jpeg.begin(), jpeg.begin() + jpeg.size() * 6 / 10));
  expect_error_naming(cut_jpg, "truncated or corrupt jpeg data");

  expect_error_naming(kPhotos + "truncated.jpg", "truncated or corrupt jpeg data");

  // decode_image on bytes names the given path as well.
  try {
    decode_image("in/memory.png", Bytes{1, 2, 3});
    FAIL() << "expected DatasetError";
  } catch (const DatasetError& e) {
    EXPECT_EQ(std::string(e.what()),
              "in/memory.png: cannot decode image: unknown format or not an image (expected a "
              "png, jpg/jpeg, webp or bmp image)");
  }
}

TEST(DecodeImage, Utf8FileNames) {
  // Byte-for-byte UTF-8 names work whatever the locale (the test runs in the "C" locale: it
  // never calls setlocale).
  test::TempDir dir("decoded_utf8");
  const std::string sub = dir.str("ünï_çødé");
  std::filesystem::create_directories(sub);
  const std::string path = sub + "/写真.png";
  test::write_png(path, 2, 1, 2, 8, {1, 2, 3, 250, 251, 252});
  const DecodedImage img = decode_image_file(path);
  ASSERT_EQ(img.width, 2);
  EXPECT_EQ(px(img, 0, 0), (Px{1, 2, 3}));
  EXPECT_EQ(px(img, 1, 0), (Px{250, 251, 252}));
  expect_error_naming(sub + "/写真_missing.png", "no such file");
}

TEST(ReadFileBytes, WholeFileAndErrors) {
  test::TempDir dir("read_file_bytes");
  const std::string path = dir.str("b.bin");
  const Bytes want = {0, 1, 2, 255, 0, 10, 13};
  test::write_bytes(path, want);
  EXPECT_EQ(read_file_bytes(path), want);
  try {
    read_file_bytes(dir.str("nope"));
    FAIL() << "expected DatasetError";
  } catch (const DatasetError& e) {
    EXPECT_EQ(std::string(e.what()), dir.str("nope") + ": cannot read image file: no such file");
  }
}

}  // namespace
}  // namespace lf
