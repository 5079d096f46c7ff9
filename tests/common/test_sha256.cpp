// SHA-256 helpers against FIPS 180-2 test vectors and a committed file whose digest was taken
// with `sha256sum` / python hashlib.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "common/io/sha256.h"

namespace lf {
namespace {

TEST(Sha256, EmptyInput) {
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, Abc) {
  EXPECT_EQ(sha256_hex(std::string("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, MillionAs) {
  const std::string a(1000000, 'a');
  EXPECT_EQ(sha256_hex(a.data(), a.size()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, FileDigestMatchesSha256sum) {
  // sha256sum tests/common/data/reference_lora.safetensors
  EXPECT_EQ(sha256_file_hex(LF_SOURCE_DIR "/tests/common/data/reference_lora.safetensors"),
            "889ddb7e2a04600b0c15ad16f420590e57e878fa43fb2f217981a0968740ba40");
}

TEST(Sha256, MissingFileNamesPath) {
  try {
    sha256_file_hex("/nonexistent/dir/file.bin");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/file.bin: cannot open"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lf
