// TensorBoard event files (worker/tensorboard): the CRC32C and record framing against
// TensorFlow's definition, torn and corrupted files, the file naming order of a resumed run,
// and drop_events_after. Reading with the real tensorboard package is
// integration_test_tensorboard's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/io/atomic_file.h"
#include "worker/tensorboard/record_file.h"
#include "worker/tensorboard/summary_writer.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("lf_tb_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Crc32c, MatchesTheCastagnoliCheckValues) {
  // The CRC-32C check value (RFC 3720 B.4 / the CRC catalogue) and 32 zero bytes' (RFC 3720).
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  // TensorFlow's mask: rotate right by 15, add 0xa282ead8.
  const std::uint32_t crc = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789", 9), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(RecordFile, FramesAndReadsBackRecords) {
  const fs::path dir = scratch("frame");
  const std::string framed = frame_record("abc") + frame_record("") + frame_record("hello");
  EXPECT_EQ(framed.size(), 3 * 16 + 8u);
  // The length is little endian: 3, then seven zero bytes.
  EXPECT_EQ(framed[0], 3);
  EXPECT_EQ(framed.substr(1, 7), std::string(7, '\0'));
  write_file_atomic((dir / "f").string(), framed);
  const RecordFileContents c = read_record_file((dir / "f").string());
  EXPECT_EQ(c.records, (std::vector<std::string>{"abc", "", "hello"}));
  EXPECT_FALSE(c.torn_tail);

  // Cut inside the last record: the whole ones stay, the tail is reported.
  write_file_atomic((dir / "torn").string(), framed.substr(0, framed.size() - 3));
  const RecordFileContents torn = read_record_file((dir / "torn").string());
  EXPECT_EQ(torn.records, (std::vector<std::string>{"abc", ""}));
  EXPECT_TRUE(torn.torn_tail);

  // A flipped data byte is a CRC error naming the file and the record's offset.
  std::string bad = framed;
  bad[35 + 12] ^= 1;  // "hello": the records of 3 and 0 bytes take 19 + 16 bytes
  write_file_atomic((dir / "bad").string(), bad);
  try {
    read_record_file((dir / "bad").string());
    FAIL() << "a corrupted record was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "bad").string() + ": byte 35"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(SummaryWriter, WritesAVersionRecordAndSortsAResumedFileLast) {
  const fs::path dir = scratch("writer");
  std::string first;
  {
    SummaryWriter w((dir / "run").string());
    first = w.file_path();
    w.add_scalar("loss/current", 0.5, 1);
    w.add_text("config", "a: 1", 0);
    w.add_image_png("sample", std::string("\x89PNG", 4), 8, 16, 3, 1);
  }
  EXPECT_EQ(fs::path(first).filename().string().rfind("events.out.tfevents.", 0), 0u);
  // The version record, then three summaries.
  EXPECT_EQ(read_record_file(first).records.size(), 4u);
  std::string second;
  {
    SummaryWriter w((dir / "run").string());  // the same second: still sorts after the first
    second = w.file_path();
  }
  const auto files = event_files(dir / "run");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].string(), first);
  EXPECT_EQ(files[1].string(), second);
  fs::remove_all(dir);
}

TEST(SummaryWriter, DropEventsAfterKeepsEarlierStepsAndTheVersionRecord) {
  const fs::path dir = scratch("drop");
  std::string path;
  {
    SummaryWriter w(dir.string());
    path = w.file_path();
    for (int step = 1; step <= 5; ++step) w.add_scalar("loss/current", step, step);
    w.add_text("config", "x", 0);
  }
  const std::string before = read_record_file(path).records[0];
  EXPECT_EQ(drop_events_after(dir.string(), 3), 2);
  const RecordFileContents after = read_record_file(path);
  EXPECT_EQ(after.records.size(), 1u + 3 + 1);  // version, steps 1-3, the step-0 text
  EXPECT_EQ(after.records[0], before);
  EXPECT_EQ(drop_events_after(dir.string(), 3), 0);
  EXPECT_EQ(drop_events_after((dir / "missing").string(), 0), 0);

  // A torn tail is cut off even when no step is dropped.
  std::ofstream(path, std::ios::app | std::ios::binary) << std::string("\x05\x00\x00", 3);
  EXPECT_TRUE(read_record_file(path).torn_tail);
  EXPECT_EQ(drop_events_after(dir.string(), 10), 0);
  EXPECT_FALSE(read_record_file(path).torn_tail);
  EXPECT_EQ(read_record_file(path).records.size(), 5u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lf
