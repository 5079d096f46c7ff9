// The torch-free checkpoint layout: the COMMITTED marker lists every file with its size and
// sha256; torn directories (no marker, truncated or missing file, bad marker, leftover staging)
// are skipped with a warning naming the directory and the reason; a failed publish puts a
// replaced same-step checkpoint back; pruning keeps exactly the newest N complete ones.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint_layout.h"
#include "common/checkpoint/train_position.h"
#include "common/io/safetensors.h"
#include "common/io/sha256.h"
#include "tests/support/full_position.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A safetensors file holding one F32 tensor of n values equal to `value`.
void write_tensor_file(const fs::path& path, size_t n, float value,
                       std::map<std::string, std::string> metadata = {}) {
  std::vector<float> data(n, value);
  SafetensorsWriter w;
  w.add("w", DType::F32, {static_cast<int64_t>(n)}, data.data(), n * sizeof(float));
  w.set_metadata(std::move(metadata));
  w.write_atomic(path.string());
}

TrainPosition sample_position(std::int64_t step) { return test_support::full_position(step); }

class CheckpointLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("lf_layout_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Stages and publishes a complete checkpoint at `step` the way the worker does: LoRA of
  // `lora_values` floats equal to `value`, train state, rank-0 RNG file.
  fs::path make(std::int64_t step, float value = 1.0f, size_t lora_values = 64) {
    const fs::path staging = prepare_staging_dir(root_.string(), step);
    write_tensor_file(staging / kCheckpointLoraFile, lora_values, value);
    write_tensor_file(staging / kCheckpointStateFile, 2 * lora_values, 0.5f,
                      train_position_metadata(sample_position(step)));
    write_tensor_file(staging / "rng" / "rank-0.safetensors", 3, 7.0f);
    return publish_staging_dir(staging.string(), root_.string(), step);
  }
  std::string dir(std::int64_t step) const { return (root_ / checkpoint_dir_name(step)).string(); }
  fs::path root_;
};

TEST_F(CheckpointLayout, NamesAndStepsRoundTrip) {
  EXPECT_EQ(checkpoint_dir_name(7), "step-00000007");
  EXPECT_EQ(checkpoint_dir_name(123456789), "step-123456789");
  EXPECT_EQ(checkpoint_step_of("step-00000050"), 50);
  EXPECT_EQ(checkpoint_step_of("step-123456789"), 123456789);
  EXPECT_EQ(checkpoint_step_of("step-"), std::nullopt);
  EXPECT_EQ(checkpoint_step_of("step-12a"), std::nullopt);
  EXPECT_EQ(checkpoint_step_of(".step-00000050.tmp"), std::nullopt);
  EXPECT_EQ(staging_dir_path("/x/checkpoints", 50), "/x/checkpoints/.step-00000050.tmp");
}

TEST_F(CheckpointLayout, MarkerListsEveryFileWithSizeAndSha256) {
  const fs::path ckpt = make(50, 2.0f, 100);
  EXPECT_EQ(ckpt.string(), dir(50));
  EXPECT_FALSE(fs::exists(staging_dir_path(root_.string(), 50)));
  const CheckpointManifest m = read_commit_marker(ckpt.string());
  EXPECT_EQ(m.global_step, 50);
  ASSERT_EQ(m.files.size(), 3u);
  EXPECT_EQ(m.files[0].path, "lora.safetensors");
  EXPECT_EQ(m.files[1].path, "rng/rank-0.safetensors");
  EXPECT_EQ(m.files[2].path, "train_state.safetensors");
  for (const CheckpointFileEntry& f : m.files) {
    const std::string bytes = read_bytes(ckpt / f.path);
    EXPECT_EQ(f.size, bytes.size()) << f.path;
    EXPECT_EQ(f.sha256, sha256_hex(bytes)) << f.path;
  }
  // The LoRA file: 8-byte length + header + 100 floats; its hash is the serialised image's.
  std::vector<float> values(100, 2.0f);
  SafetensorsWriter w;
  w.add("w", DType::F32, {100}, values.data(), 400);
  w.set_metadata({});
  const std::vector<uint8_t> image = w.serialize();
  EXPECT_EQ(m.files[0].size, image.size());
  EXPECT_EQ(m.files[0].sha256, sha256_hex(image.data(), image.size()));
  // The marker on disk is the documented JSON.
  const auto j = nlohmann::json::parse(read_bytes(ckpt / kCheckpointMarkerFile));
  EXPECT_EQ(j.at("format"), "lorafleet-checkpoint");
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_EQ(j.at("global_step"), 50);
  EXPECT_EQ(j.at("files").size(), 3u);
  EXPECT_EQ(j.at("files")[2].at("size"), fs::file_size(ckpt / kCheckpointStateFile));
  EXPECT_EQ(checkpoint_torn_reason(ckpt.string(), CheckpointCheck::kSizesAndHash), std::nullopt);
  const auto latest = find_latest_committed(root_.string());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->dir, dir(50));
  EXPECT_EQ(latest->global_step, 50);
}

// Digests the writers computed are taken as they are when the size on disk matches (the bytes are
// not read back); a digest whose size does not match, and files without one, are hashed from disk.
TEST_F(CheckpointLayout, MarkerTakesTheWritersDigestsWhenTheSizeMatches) {
  const fs::path staging = prepare_staging_dir(root_.string(), 8);
  write_tensor_file(staging / kCheckpointLoraFile, 10, 1.0f);
  write_tensor_file(staging / kCheckpointStateFile, 20, 0.5f,
                    train_position_metadata(sample_position(8)));
  write_tensor_file(staging / "rng" / "rank-0.safetensors", 3, 7.0f);
  const std::uint64_t lora_size = fs::file_size(staging / kCheckpointLoraFile);
  WrittenFiles written;
  // Not the file's real hash, so the manifest shows which source it used.
  written[kCheckpointLoraFile] = FileDigest{lora_size, std::string(64, 'a')};
  written[kCheckpointStateFile] = FileDigest{1, std::string(64, 'b')};  // wrong size: re-hashed
  const fs::path ckpt = publish_staging_dir(staging.string(), root_.string(), 8, written);
  const CheckpointManifest m = read_commit_marker(ckpt.string());
  ASSERT_EQ(m.files.size(), 3u);
  EXPECT_EQ(m.files[0].path, "lora.safetensors");
  EXPECT_EQ(m.files[0].sha256, std::string(64, 'a'));
  EXPECT_EQ(m.files[1].sha256, sha256_hex(read_bytes(ckpt / "rng" / "rank-0.safetensors")));
  EXPECT_EQ(m.files[2].sha256, sha256_hex(read_bytes(ckpt / kCheckpointStateFile)));
  // The full check re-reads every file, so a wrong writer's digest is caught there.
  const auto torn = checkpoint_torn_reason(ckpt.string(), CheckpointCheck::kSizesAndHash);
  ASSERT_TRUE(torn.has_value());
  EXPECT_NE(torn->find("lora.safetensors has sha256"), std::string::npos) << *torn;
}

// A checkpoint written the way CheckpointWriter does it (each writer's digest passed on) lists
// exactly the hashes a read-back gives.
TEST_F(CheckpointLayout, StreamedWritersDigestsAreTheFilesHashes) {
  const fs::path staging = prepare_staging_dir(root_.string(), 9);
  std::vector<float> values(1000, 0.25f);
  SafetensorsWriter lora;
  lora.add_view("w", DType::F32, {1000}, values.data(), 4000);
  lora.set_metadata({{"ss_network_dim", "4"}});
  WrittenFiles written;
  written[kCheckpointLoraFile] = lora.write_atomic((staging / kCheckpointLoraFile).string());
  write_tensor_file(staging / kCheckpointStateFile, 20, 0.5f,
                    train_position_metadata(sample_position(9)));
  const fs::path ckpt = publish_staging_dir(staging.string(), root_.string(), 9, written);
  const CheckpointManifest m = read_commit_marker(ckpt.string());
  ASSERT_EQ(m.files.size(), 2u);
  EXPECT_EQ(m.files[0].size, fs::file_size(ckpt / kCheckpointLoraFile));
  EXPECT_EQ(m.files[0].sha256, sha256_hex(read_bytes(ckpt / kCheckpointLoraFile)));
  EXPECT_EQ(checkpoint_torn_reason(ckpt.string(), CheckpointCheck::kSizesAndHash), std::nullopt);
}

TEST_F(CheckpointLayout, NoMarkerIsSkippedWithAWarningAndThePreviousUsed) {
  make(50);
  make(100);
  fs::remove(fs::path(dir(100)) / kCheckpointMarkerFile);
  ::testing::internal::CaptureStderr();
  const auto latest = find_latest_committed(root_.string());
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->global_step, 50);
  EXPECT_EQ(latest->dir, dir(50));
  EXPECT_NE(log.find("skipping torn checkpoint " + dir(100) + ": no COMMITTED marker"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("step-00000050"), std::string::npos) << log;
  EXPECT_EQ(resolve_checkpoint(root_.string()), dir(50));
  EXPECT_EQ(resolve_checkpoint(root_.string() + "/"), dir(50));
  // Pointing --resume at the torn directory itself is an error naming it and the reason.
  try {
    resolve_checkpoint(dir(100));
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--resume " + dir(100) + ": torn checkpoint: no COMMITTED marker"),
              std::string::npos)
        << what;
  }
}

TEST_F(CheckpointLayout, TruncatedTensorFileIsSkippedNamingTheSizes) {
  make(50);
  make(100);
  const fs::path lora = fs::path(dir(100)) / kCheckpointLoraFile;
  const auto size = fs::file_size(lora);
  fs::resize_file(lora, size - 24);
  ::testing::internal::CaptureStderr();
  const auto latest = find_latest_committed(root_.string());
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->global_step, 50);
  const std::string reason = "lora.safetensors is " + std::to_string(size - 24) +
                             " bytes, COMMITTED lists " + std::to_string(size);
  EXPECT_NE(log.find("skipping torn checkpoint " + dir(100) + ": " + reason), std::string::npos)
      << log;
  // One warning line for the one torn directory.
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_EQ(checkpoint_torn_reason(dir(100)).value().rfind(reason, 0), 0u);
}

TEST_F(CheckpointLayout, OtherTornFormsAreSkipped) {
  make(10);
  // Missing listed file.
  make(20);
  fs::remove(fs::path(dir(20)) / "rng" / "rank-0.safetensors");
  // Unparsable marker.
  make(30);
  std::ofstream(fs::path(dir(30)) / kCheckpointMarkerFile) << "{\"format\": ";
  // Marker of another step (a directory renamed by hand).
  make(40);
  fs::rename(dir(40), dir(45));
  // Leftover staging dir of a later step.
  fs::create_directories(root_ / ".step-00000050.tmp" / "rng");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(resolve_checkpoint(root_.string()), dir(10));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find((root_ / ".step-00000050.tmp").string() + ": an unfinished staging"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(dir(45) + ": COMMITTED names global_step 40, the directory step 45"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(dir(30) + ": unusable COMMITTED: " + dir(30) + "/COMMITTED: not valid JSON"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(dir(20) + ": rng/rank-0.safetensors listed in COMMITTED is missing"),
            std::string::npos)
      << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 4) << log;
}

TEST_F(CheckpointLayout, HashCheckCatchesSameSizeRewrite) {
  make(10);
  const fs::path lora = fs::path(dir(10)) / kCheckpointLoraFile;
  std::string bytes = read_bytes(lora);
  bytes.back() ^= 0x01;
  std::ofstream(lora, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_EQ(checkpoint_torn_reason(dir(10)), std::nullopt);  // sizes still match
  const auto reason = checkpoint_torn_reason(dir(10), CheckpointCheck::kSizesAndHash);
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("lora.safetensors has sha256 " + sha256_hex(bytes)), std::string::npos)
      << *reason;
}

TEST_F(CheckpointLayout, NoCompleteCheckpointIsAnErrorNamingThePath) {
  fs::create_directories(root_ / ".step-00000010.tmp");
  fs::create_directories(root_ / "step-00000020");
  EXPECT_EQ(find_latest_committed(root_.string()), std::nullopt);
  EXPECT_EQ(find_latest_committed((root_ / "absent").string()), std::nullopt);
  try {
    resolve_checkpoint(root_.string());
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--resume " + root_.string() + ": no complete checkpoint"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(resolve_checkpoint((root_ / "nope").string()), std::runtime_error);
}

TEST_F(CheckpointLayout, FailedPublishPutsTheReplacedSameStepCheckpointBack) {
  make(10, 1.0f);
  const std::string before = read_bytes(fs::path(dir(10)) / kCheckpointLoraFile);
  // The same step again, but COMMITTED's temp file cannot be created (a directory is in the way).
  const fs::path staging = prepare_staging_dir(root_.string(), 10);
  write_tensor_file(staging / kCheckpointLoraFile, 64, 5.0f);
  write_tensor_file(staging / kCheckpointStateFile, 128, 0.5f,
                    train_position_metadata(sample_position(10)));
  fs::create_directories(staging / ("COMMITTED.tmp." + std::to_string(getpid())));
  try {
    publish_staging_dir(staging.string(), root_.string(), 10);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir(10) + "/COMMITTED.tmp."), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(staging));
  EXPECT_FALSE(fs::exists(root_ / ".step-00000010.old"));
  EXPECT_EQ(resolve_checkpoint(root_.string()), dir(10));
  EXPECT_EQ(read_bytes(fs::path(dir(10)) / kCheckpointLoraFile), before);
  // A successful rerun of the step replaces it.
  make(10, 5.0f);
  EXPECT_NE(read_bytes(fs::path(dir(10)) / kCheckpointLoraFile), before);
  EXPECT_EQ(checkpoint_torn_reason(dir(10), CheckpointCheck::kSizesAndHash), std::nullopt);
}

TEST_F(CheckpointLayout, PruneKeepsExactlyTheNewestNComplete) {
  for (std::int64_t step : {10, 20, 30, 40}) make(step);
  make(25);
  fs::remove(fs::path(dir(25)) / kCheckpointMarkerFile);  // torn, older than the newest
  make(50);
  fs::remove(fs::path(dir(50)) / kCheckpointMarkerFile);  // torn, newer: left alone
  fs::create_directories(root_ / ".step-00000015.tmp");   // leftover staging
  prune_checkpoints(root_.string(), 0);                   // keep all
  EXPECT_TRUE(fs::exists(dir(10)));
  EXPECT_TRUE(fs::exists(dir(25)));
  prune_checkpoints(root_.string(), 2);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(root_)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"step-00000030", "step-00000040", "step-00000050"}));
  EXPECT_EQ(find_latest_committed(root_.string())->global_step, 40);
  prune_checkpoints(root_.string(), 1);
  EXPECT_FALSE(fs::exists(dir(30)));
  EXPECT_TRUE(fs::exists(dir(40)));  // the newest complete one is never removed
  prune_checkpoints(root_.string(), 1);
  EXPECT_TRUE(fs::exists(dir(40)));
  EXPECT_EQ(checkpoint_torn_reason(dir(40)), std::nullopt);
}

}  // namespace
}  // namespace lf
