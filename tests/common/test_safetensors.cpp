// safetensors reader/writer against a file written by the reference python `safetensors` 0.8.0
// (Rust writer), plus round trips and the reference reader's rejections of corrupt files.
//
// tests/common/data/reference_lora.safetensors (895 bytes) was produced once with
//   python -m venv /tmp/ref && /tmp/ref/bin/pip install safetensors==0.8.0 numpy
// calling safetensors.serialize() with TensorSpecs for exactly the tensors built in
// make_reference_writer() and metadata {"format": "pt", "ss_network_alpha": "4.0", "ss_note":
// "quote \" backslash \\ tab\t newline\n ctrl\x01 é ☃"}. The Rust writer emits metadata keys in
// HashMap (random) order; the run kept is the one whose order is sorted, i.e. the order this
// writer uses.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/io/safetensors.h"
#include "common/io/sha256.h"

namespace lf {
namespace {

const char* kReference = LF_SOURCE_DIR "/tests/common/data/reference_lora.safetensors";
const char* kNote = "quote \" backslash \\ tab\t newline\n ctrl\x01 \xc3\xa9 \xe2\x98\x83";

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

template <class T>
std::vector<T> values(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* info = f.find(name);
  if (info == nullptr) return {};
  std::vector<T> out(info->nbytes() / sizeof(T));
  std::memcpy(out.data(), f.data(*info), info->nbytes());  // data() may be unaligned
  return out;
}

// The same tensors as the reference file, added in a different order than it stores them:
// copied (add) or, with view, pointed at (add_view; the arrays are static so they outlive it).
SafetensorsWriter make_reference_writer(bool view = false) {
  SafetensorsWriter w;
  static const float down[6] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 2.5f};
  static const uint16_t up_f16[6] = {0x0000, 0x3C00, 0x4000, 0x4200, 0x4400, 0x4500};  // 0..5
  static const float alpha = 4.0f;
  static const uint16_t te_bf16[4] = {0x3F80, 0xBF80, 0x4000, 0x0000};  // 1, -1, 2, 0
  static const int64_t step = 1234;
  static const uint8_t mask[4] = {1, 0, 0, 1};
  static const uint8_t bytes[3] = {0, 127, 255};
  static const double d[2] = {1.5, -2.25};
  static const int32_t i[2] = {-7, 65536};
  auto add = [&](const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                 size_t n) {
    if (view) {
      w.add_view(name, dtype, std::move(shape), data, n);
    } else {
      w.add(name, dtype, std::move(shape), data, n);
    }
  };
  add("lora_unet_mid.lora_down.weight", DType::F32, {2, 3}, down, sizeof down);
  add("lora_unet_mid.lora_up.weight", DType::F16, {3, 2}, up_f16, sizeof up_f16);
  add("lora_unet_mid.alpha", DType::F32, {}, &alpha, sizeof alpha);
  add("lora_te_x.lora_down.weight", DType::BF16, {2, 2}, te_bf16, sizeof te_bf16);
  add("step", DType::I64, {1}, &step, sizeof step);
  add("mask", DType::BOOL, {4}, mask, sizeof mask);
  add("empty", DType::F32, {0, 3}, nullptr, 0);
  add("bytes", DType::U8, {3}, bytes, sizeof bytes);
  add("d", DType::F64, {2}, d, sizeof d);
  add("i", DType::I32, {2}, i, sizeof i);
  w.set_metadata({{"format", "pt"}, {"ss_network_alpha", "4.0"}, {"ss_note", kNote}});
  return w;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lf_st_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& p : written_) ::unlink(p.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    written_.push_back(path);
    return path;
  }
  // [u64 N][header][buffer] with N = header.size().
  std::string write_raw(const std::string& name, const std::string& header, size_t buffer_bytes,
                        uint64_t n_override = 0) {
    uint64_t n = n_override ? n_override : header.size();
    std::vector<uint8_t> b;
    for (int k = 0; k < 8; ++k) b.push_back(static_cast<uint8_t>(n >> (8 * k)));
    b.insert(b.end(), header.begin(), header.end());
    b.resize(b.size() + buffer_bytes, 0);
    return write(name, b);
  }
  // Expects open() to throw a message "<path>: invalid safetensors: ...<fragment>...".
  static void expect_invalid(const std::string& path, const std::string& fragment) {
    try {
      SafetensorsFile::open(path);
      ADD_FAILURE() << path << ": expected std::runtime_error containing '" << fragment << "'";
    } catch (const std::runtime_error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ": invalid safetensors: ", 0), 0u) << msg;
      EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
    }
  }
  std::string dir_;
  std::vector<std::string> written_;
};

TEST(SafetensorsDType, NamesSizesAndParse) {
  EXPECT_EQ(dtype_size(DType::BOOL), 1u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::U64), 8u);
  EXPECT_EQ(dtype_size(DType::F8_E4M3), 1u);
  EXPECT_EQ(dtype_name(DType::BF16), "BF16");
  EXPECT_EQ(dtype_name(DType::F8_E5M2), "F8_E5M2");
  for (DType t : {DType::BOOL, DType::U8, DType::I8, DType::I16, DType::U16, DType::I32, DType::U32,
                  DType::I64, DType::U64, DType::F16, DType::BF16, DType::F32, DType::F64,
                  DType::F8_E4M3, DType::F8_E5M2}) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_THROW(parse_dtype("F8_E8M0"), std::invalid_argument);
  EXPECT_THROW(parse_dtype("f32"), std::invalid_argument);
}

TEST(SafetensorsRead, ReferenceFileContents) {
  for (bool use_mmap : {true, false}) {
    SafetensorsFile f = SafetensorsFile::open(kReference, use_mmap);
    EXPECT_EQ(f.path(), kReference);
    EXPECT_EQ(f.data_offset(), 808u);
    EXPECT_EQ(f.data_size(), 87u);
    ASSERT_EQ(f.tensors().size(), 10u);
    // File-offset order = the reference writer's order.
    const char* order[] = {"step",
                           "d",
                           "empty",
                           "lora_unet_mid.alpha",
                           "lora_unet_mid.lora_down.weight",
                           "i",
                           "lora_te_x.lora_down.weight",
                           "lora_unet_mid.lora_up.weight",
                           "bytes",
                           "mask"};
    for (size_t k = 0; k < 10; ++k) EXPECT_EQ(f.tensors()[k].name, order[k]);

    const TensorInfo* alpha = f.find("lora_unet_mid.alpha");
    ASSERT_NE(alpha, nullptr);
    EXPECT_EQ(alpha->dtype, DType::F32);
    EXPECT_TRUE(alpha->shape.empty());
    EXPECT_EQ(alpha->numel(), 1);
    EXPECT_EQ(alpha->begin, 24u);
    EXPECT_EQ(alpha->end, 28u);
    EXPECT_EQ(values<float>(f, "lora_unet_mid.alpha"), std::vector<float>{4.0f});

    const TensorInfo* down = f.find("lora_unet_mid.lora_down.weight");
    ASSERT_NE(down, nullptr);
    EXPECT_EQ(down->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(values<float>(f, down->name), (std::vector<float>{0.f, 0.5f, 1.f, 1.5f, 2.f, 2.5f}));
    EXPECT_EQ(values<uint16_t>(f, "lora_unet_mid.lora_up.weight"),
              (std::vector<uint16_t>{0x0000, 0x3C00, 0x4000, 0x4200, 0x4400, 0x4500}));
    EXPECT_EQ(f.find("lora_te_x.lora_down.weight")->dtype, DType::BF16);
    EXPECT_EQ(values<uint16_t>(f, "lora_te_x.lora_down.weight"),
              (std::vector<uint16_t>{0x3F80, 0xBF80, 0x4000, 0x0000}));
    EXPECT_EQ(values<int64_t>(f, "step"), std::vector<int64_t>{1234});
    EXPECT_EQ(values<double>(f, "d"), (std::vector<double>{1.5, -2.25}));
    EXPECT_EQ(values<int32_t>(f, "i"), (std::vector<int32_t>{-7, 65536}));
    EXPECT_EQ(values<uint8_t>(f, "bytes"), (std::vector<uint8_t>{0, 127, 255}));
    EXPECT_EQ(values<uint8_t>(f, "mask"), (std::vector<uint8_t>{1, 0, 0, 1}));
    const TensorInfo* empty = f.find("empty");
    ASSERT_NE(empty, nullptr);
    EXPECT_EQ(empty->shape, (std::vector<int64_t>{0, 3}));
    EXPECT_EQ(empty->numel(), 0);
    EXPECT_EQ(empty->nbytes(), 0u);
    EXPECT_EQ(f.find("missing"), nullptr);

    EXPECT_EQ(f.metadata().size(), 3u);
    EXPECT_EQ(f.metadata().at("format"), "pt");
    EXPECT_EQ(f.metadata().at("ss_network_alpha"), "4.0");
    EXPECT_EQ(f.metadata().at("ss_note"), kNote);
    // kohya sshs_model_hash = SHA-256 of the byte buffer (python hashlib over b[8+N:]).
    EXPECT_EQ(sha256_hex(f.data_section(), f.data_size()),
              "b3d3b2e37005f6c28c7e54b988d3e27aa8af6007ab8a4b76f7cf58b787f9f19a");
  }
}

TEST(SafetensorsWrite, ByteIdenticalToPythonSafetensors) {
  const std::vector<uint8_t> expected = read_all(kReference);
  ASSERT_EQ(expected.size(), 895u);
  const std::vector<uint8_t> got = make_reference_writer().serialize();
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
  const std::string header = make_reference_writer().header();
  EXPECT_EQ(header.size(), 800u);
  const std::string head =
      "{\"__metadata__\":{\"format\":\"pt\",\"ss_network_alpha\":\"4.0\",\"ss_note\":\"quote "
      "\\\" backslash \\\\ tab\\t newline\\n ctrl\\u0001 \xc3\xa9 \xe2\x98\x83\"},"
      "\"step\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},";
  EXPECT_EQ(header.substr(0, head.size()), head);
  EXPECT_EQ(header.substr(header.size() - 8), "}       ");  // 793 bytes of JSON + 7 spaces
}

TEST(SafetensorsWrite, EmptyFileMatchesPython) {
  // python: safetensors.numpy.save({}) == b"\x08\0\0\0\0\0\0\0{}      "
  const std::vector<uint8_t> got = SafetensorsWriter().serialize();
  const std::string expected("\x08\0\0\0\0\0\0\0{}      ", 16);
  EXPECT_EQ(std::string(got.begin(), got.end()), expected);
}

TEST(SafetensorsWrite, EmptyMetadataMatchesPython) {
  // python: save({"a": np.zeros(1, np.float32)}, metadata={}) gives a 72-byte header with
  // "__metadata__":{} and no padding; metadata=None gives 56 bytes (2 spaces of padding).
  const float zero = 0.f;
  SafetensorsWriter w;
  w.add("a", DType::F32, {1}, &zero, 4);
  EXPECT_EQ(w.header(), "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}  ");
  w.set_metadata({});
  EXPECT_EQ(w.header(),
            "{\"__metadata__\":{},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}");
}

TEST_F(SafetensorsTest, RoundTripThroughWriteAtomic) {
  const std::string path = dir_ + "/rt.safetensors";
  written_.push_back(path);
  SafetensorsWriter w;
  std::vector<uint16_t> big(3 * 5 * 7);
  for (size_t k = 0; k < big.size(); ++k) big[k] = static_cast<uint16_t>(k * 31 + 7);
  const uint8_t odd[3] = {9, 8, 7};
  const float alpha = 8.0f;
  w.add("z.weight", DType::BF16, {3, 5, 7}, big.data(), big.size() * 2);
  w.add("a.odd", DType::I8, {3}, odd, 3);
  w.add("m.alpha", DType::F32, {}, &alpha, 4);
  w.set_metadata({{"ss_network_dim", "16"}, {"modelspec.title", "t\xc3\xa9st"}});
  w.write_atomic(path);
  SafetensorsFile f = SafetensorsFile::open(path);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensors()[0].name, "m.alpha");   // F32 first
  EXPECT_EQ(f.tensors()[1].name, "z.weight");  // then BF16
  EXPECT_EQ(f.tensors()[2].name, "a.odd");     // then I8
  EXPECT_EQ(values<uint16_t>(f, "z.weight"), big);
  EXPECT_EQ(f.find("z.weight")->shape, (std::vector<int64_t>{3, 5, 7}));
  EXPECT_EQ(values<int8_t>(f, "a.odd"), (std::vector<int8_t>{9, 8, 7}));
  EXPECT_EQ(values<float>(f, "m.alpha"), std::vector<float>{8.0f});
  EXPECT_EQ(f.metadata().at("modelspec.title"), "t\xc3\xa9st");
  EXPECT_EQ(f.data_offset() % 8, 0u);
  // In-memory parse of the same image agrees.
  SafetensorsFile g = SafetensorsFile::from_bytes(w.serialize(), "memory");
  EXPECT_EQ(g.path(), "memory");
  EXPECT_EQ(values<uint16_t>(g, "z.weight"), big);
}

// The streamed write (views, no image in memory) gives the reference file's bytes, and its
// digest is the file's; data_sha256 is kohya's sshs_model_hash of the same data section.
TEST_F(SafetensorsTest, StreamedWriteOfViewsIsTheReferenceFile) {
  const std::string path = dir_ + "/streamed.safetensors";
  written_.push_back(path);
  const SafetensorsWriter w = make_reference_writer(/*view=*/true);
  const FileDigest digest = w.write_atomic(path);
  const std::vector<uint8_t> expected = read_all(kReference);
  EXPECT_TRUE(read_all(path) == expected);
  EXPECT_EQ(digest.size, 895u);
  EXPECT_EQ(digest.sha256, sha256_hex(expected.data(), expected.size()));
  EXPECT_EQ(digest.sha256, sha256_file_hex(path));
  EXPECT_TRUE(w.serialize() == expected);
  EXPECT_EQ(w.data_sha256(), "b3d3b2e37005f6c28c7e54b988d3e27aa8af6007ab8a4b76f7cf58b787f9f19a");
  EXPECT_EQ(make_reference_writer().data_sha256(), w.data_sha256());
}

// image_bytes is a window of serialize() without building it: inside the header, across the
// header/data boundary, inside the data, past the end (clipped) and empty.
TEST(SafetensorsWrite, ImageBytesAreWindowsOfTheImage) {
  const SafetensorsWriter w = make_reference_writer(/*view=*/true);
  const std::vector<uint8_t> image = w.serialize();
  ASSERT_EQ(image.size(), 895u);
  const std::vector<std::pair<uint64_t, size_t>> windows = {
      {0, 8}, {3, 100}, {800, 20}, {808, 87}, {850, 1000}, {894, 1}, {895, 10}, {5000, 4}, {10, 0}};
  for (const auto& [offset, len] : windows) {
    const size_t lo = std::min<size_t>(offset, image.size());
    const size_t hi = std::min<size_t>(offset + len, image.size());
    const std::vector<uint8_t> want(image.begin() + lo, image.begin() + hi);
    EXPECT_TRUE(w.image_bytes(offset, len) == want) << offset << "+" << len;
  }
}

TEST(Sha256, IncrementalEqualsOneShot) {
  // FIPS 180-2 test vector: SHA-256("abc").
  Sha256 h;
  h.update("a", 1);
  h.update("", 0);
  h.update("bc", 2);
  EXPECT_EQ(h.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_THROW(h.update("x", 1), std::logic_error);
}

TEST_F(SafetensorsTest, ReadsUnpaddedUnalignedHeader) {
  // Other writers need not pad: a 61-byte header leaves the F32 data at file offset 69.
  const std::string header = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  std::vector<uint8_t> b;
  for (int k = 0; k < 8; ++k) b.push_back(static_cast<uint8_t>(header.size() >> (8 * k)));
  b.insert(b.end(), header.begin(), header.end());
  const float v[2] = {-1.25f, 3.5f};
  const auto* p = reinterpret_cast<const uint8_t*>(v);
  b.insert(b.end(), p, p + 8);
  SafetensorsFile f = SafetensorsFile::open(write("unaligned.safetensors", b));
  EXPECT_EQ(f.data_offset(), 8 + header.size());
  EXPECT_EQ(values<float>(f, "x"), (std::vector<float>{-1.25f, 3.5f}));
  EXPECT_TRUE(f.metadata().empty());
}

TEST(SafetensorsWrite, RejectsBadInput) {
  SafetensorsWriter w;
  const float v[4] = {};
  EXPECT_THROW(w.add("x", DType::F32, {3}, v, 16), std::invalid_argument);
  EXPECT_THROW(w.add("x", DType::F32, {-1}, v, 0), std::invalid_argument);
  EXPECT_THROW(w.add("__metadata__", DType::F32, {1}, v, 4), std::invalid_argument);
  w.add("x", DType::F32, {4}, v, 16);
  try {
    w.add("x", DType::F32, {4}, v, 16);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("\"x\" added twice"), std::string::npos);
  }
  w.set_metadata({{"bad", "\xff\xfe"}});
  EXPECT_THROW(w.header(), std::invalid_argument);
}

TEST_F(SafetensorsTest, MissingFile) {
  const std::string path = dir_ + "/absent.safetensors";
  try {
    SafetensorsFile::open(path);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": cannot open (No such file or directory)");
  }
}

TEST_F(SafetensorsTest, RejectsTooShortFile) {
  expect_invalid(write("short.safetensors", {1, 2, 3}), "file is 3 bytes, expected at least 8");
}

TEST_F(SafetensorsTest, RejectsTruncatedFile) {
  std::vector<uint8_t> b = read_all(kReference);
  b.resize(b.size() - 10);
  expect_invalid(write("trunc.safetensors", b),
                 "tensors cover 87 bytes but the byte buffer holds 77");
  b.resize(100);  // cut inside the header
  expect_invalid(write("trunc2.safetensors", b), "header length 800 runs past the end");
}

TEST_F(SafetensorsTest, RejectsHeaderTooLong) {
  expect_invalid(write_raw("huge.safetensors", "{}", 0, 100000001),
                 "header length 100000001 exceeds the limit of 100000000 bytes");
}

TEST_F(SafetensorsTest, RejectsTrailingBytes) {
  std::vector<uint8_t> b = read_all(kReference);
  b.push_back(0);
  expect_invalid(write("trailing.safetensors", b),
                 "tensors cover 87 bytes but the byte buffer holds 88");
}

TEST_F(SafetensorsTest, RejectsOverlappingOffsets) {
  expect_invalid(write_raw("overlap.safetensors",
                           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                           12),
                 "entry \"b\" begins at 4 inside the previous tensor (expected 8)");
}

TEST_F(SafetensorsTest, RejectsHole) {
  expect_invalid(write_raw("hole.safetensors",
                           "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}", 4),
                 "entry \"a\" begins at 2 leaving a hole (expected 0)");
}

TEST_F(SafetensorsTest, RejectsBadDType) {
  expect_invalid(write_raw("dtype.safetensors",
                           "{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
                 "entry \"a\": unknown safetensors dtype 'F33'");
}

TEST_F(SafetensorsTest, RejectsSizeMismatch) {
  expect_invalid(write_raw("size.safetensors",
                           "{\"a\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,4]}}", 4),
                 "entry \"a\": data_offsets span 4 bytes, expected 6");
}

TEST_F(SafetensorsTest, RejectsShapeOverflow) {
  expect_invalid(write_raw("ovf.safetensors",
                           "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
                           "\"data_offsets\":[0,0]}}",
                           0),
                 "entry \"a\": shape size overflows");
}

TEST_F(SafetensorsTest, RejectsDuplicateKeys) {
  expect_invalid(write_raw("dup.safetensors",
                           "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                           "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                           2),
                 "duplicate key \"a\"");
}

TEST_F(SafetensorsTest, RejectsNonStringMetadata) {
  expect_invalid(write_raw("meta.safetensors", "{\"__metadata__\":{\"ss_epoch\":3}}", 0),
                 "__metadata__ value for \"ss_epoch\" is not a string");
  expect_invalid(write_raw("meta2.safetensors", "{\"__metadata__\":[\"x\"]}", 0),
                 "__metadata__ is not a JSON object");
}

TEST_F(SafetensorsTest, RejectsMalformedHeaders) {
  expect_invalid(write_raw("ws.safetensors", " {}", 0), "header does not start with '{'");
  expect_invalid(write_raw("json.safetensors", "{\"a\":", 0), "header is not valid JSON");
  expect_invalid(write_raw("missing.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0]}}", 0),
                 "entry \"a\" lacks dtype, shape or data_offsets");
  expect_invalid(write_raw("neg.safetensors",
                           "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0),
                 "shape holds a value that is not a non-negative integer");
}

}  // namespace
}  // namespace lf
