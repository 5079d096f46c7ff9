// Colour profiles libpng warns about (common/image/png_profile.h), on the skimage photographs
// that carry one: the warnings are captured instead of printed, decoding the copy without the
// iCCP chunk gives the pixels of the original, and a scan counts them in one warning.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/image/decoded_image.h"
#include "common/image/png_profile.h"
#include "tests/common/image_fixtures.h"

namespace lf {
namespace {

using test::kPhotos;

TEST(PngProfile, LibpngWarningsAreCapturedAndThePixelsUnchanged) {
  // astronaut.png: "iCCP: known incorrect sRGB profile"; camera.png has no iCCP chunk.
  const auto astronaut = read_file_bytes(kPhotos + "astronaut.png");
  const auto warnings = png_profile_warnings(astronaut);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "iCCP: known incorrect sRGB profile");
  EXPECT_TRUE(png_profile_warnings(read_file_bytes(kPhotos + "camera.png")).empty());
  EXPECT_TRUE(png_profile_warnings({1, 2, 3}).empty());

  const auto stripped = without_png_profile(astronaut);
  EXPECT_LT(stripped.size(), astronaut.size());
  EXPECT_TRUE(png_profile_warnings(stripped).empty());

  // The decode of the original (libpng's stderr captured) prints nothing and equals OpenCV's
  // decode of the stripped copy.
  testing::internal::CaptureStderr();
  const DecodedImage a = decode_image(kPhotos + "astronaut.png", astronaut, {});
  const std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_EQ(printed, "");
  const DecodedImage b = decode_image("stripped", stripped, {});
  EXPECT_EQ(a.profile_warnings, warnings);
  EXPECT_TRUE(b.profile_warnings.empty());
  EXPECT_EQ(a.width, 512);
  EXPECT_EQ(a.rgb, b.rgb);
}

}  // namespace
}  // namespace lf
