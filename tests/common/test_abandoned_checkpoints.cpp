// Setting an abandoned branch's checkpoints aside: only step-* directories after the resumed
// step move, whole, into checkpoints/abandoned-<kohya timestamp>[-N]/; nothing is deleted.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/checkpoint/abandoned_checkpoints.h"
#include "common/util/wall_clock.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(AbandonedCheckpoints, MovesOnlyTheNewerStepDirectories) {
  const fs::path root = fs::path(::testing::TempDir()) / "abandoned_root" / "checkpoints";
  fs::remove_all(root.parent_path());
  for (const char* d :
       {"step-00000002", "step-00000004", "step-00000010", ".step-00000012.tmp", "notes"}) {
    fs::create_directories(root / d);
  }
  std::ofstream(root / "step-00000010" / "lora.safetensors") << "x";
  const std::time_t now = 1796400000;
  EXPECT_FALSE(set_aside_abandoned_checkpoints(root.string(), 10, now).has_value());
  EXPECT_FALSE(set_aside_abandoned_checkpoints((root / "missing").string(), 0, now).has_value());

  const auto moved = set_aside_abandoned_checkpoints(root.string(), 2, now);
  ASSERT_TRUE(moved.has_value());
  const std::string folder = "abandoned-" + kohya_local_timestamp(now);
  EXPECT_EQ(moved->folder, (root / folder).string());
  EXPECT_EQ(moved->steps, (std::vector<std::int64_t>{4, 10}));
  EXPECT_EQ(names_in(root),
            (std::vector<std::string>{".step-00000012.tmp", folder, "notes", "step-00000002"}));
  EXPECT_EQ(names_in(root / folder), (std::vector<std::string>{"step-00000004", "step-00000010"}));
  EXPECT_TRUE(fs::exists(root / folder / "step-00000010" / "lora.safetensors"));

  // The same second again: a fresh folder beside the first, which stays as it is.
  fs::create_directories(root / "step-00000003");
  const auto again = set_aside_abandoned_checkpoints(root.string(), 2, now);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->folder, (root / (folder + "-2")).string());
  EXPECT_EQ(names_in(root / (folder + "-2")), (std::vector<std::string>{"step-00000003"}));
  EXPECT_EQ(names_in(root / folder).size(), 2u);
}

}  // namespace
}  // namespace lf
