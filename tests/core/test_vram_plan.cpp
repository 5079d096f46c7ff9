// The VRAM planner of worker.vram_budget_gb (offload/vram_plan.h): exact resident sets for a
// budget that fits everything, one that forces streaming, a block with temporaries (fp8_base's
// upcast copies) whose offload cost exceeds its size (it moves ahead of a bigger plain block), more
// streams reserving more, and a budget too small for any plan (an error naming the minimum).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "offload/vram_plan.h"

namespace lf {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

std::vector<std::string> resident_names(const std::vector<OffloadBlock>& blocks,
                                        const VramPlan& plan) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (plan.resident[i]) out.push_back(blocks[i].name);
  }
  return out;
}

const std::vector<OffloadBlock> kPlain = {
    {"a", 100 * kMiB, 0}, {"b", 80 * kMiB, 0}, {"c", 50 * kMiB, 0}, {"d", 20 * kMiB, 0}};

TEST(VramPlan, EverythingResidentWhenItFits) {
  const VramPlan p = plan_vram(kPlain, 250 * kMiB, 2);
  EXPECT_EQ(resident_names(kPlain, p), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(p.resident_bytes, 250 * kMiB);
  EXPECT_EQ(p.stream_reserve_bytes, 0);
  EXPECT_EQ(p.num_offloaded(), 0u);
}

TEST(VramPlan, TheCostliestBlocksStayAndTheLargestStreamedOnesBuffersFit) {
  // One stream, 240 MiB: keeping a + b leaves 60, enough for c's 50 MiB buffer (not for d too).
  VramPlan p = plan_vram(kPlain, 240 * kMiB, 1);
  EXPECT_EQ(resident_names(kPlain, p), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.resident_bytes, 180 * kMiB);
  EXPECT_EQ(p.stream_reserve_bytes, 50 * kMiB);
  EXPECT_LE(p.resident_bytes + p.stream_reserve_bytes, 240 * kMiB);
  // Two streams: keeping a would need a + 2 x b's 80 = 260; a streams, two of its buffers are
  // reserved (200) and only d fits beside them.
  p = plan_vram(kPlain, 240 * kMiB, 2);
  EXPECT_EQ(resident_names(kPlain, p), (std::vector<std::string>{"d"}));
  EXPECT_EQ(p.stream_reserve_bytes, 2 * 100 * kMiB);
  EXPECT_EQ(p.resident_bytes + p.stream_reserve_bytes, 220 * kMiB);
  // At exactly the minimum everything streams.
  p = plan_vram(kPlain, 200 * kMiB, 2);
  EXPECT_EQ(resident_names(kPlain, p), std::vector<std::string>{});
  EXPECT_EQ(p.num_offloaded(), 4u);
  EXPECT_EQ(p.stream_reserve_bytes, 200 * kMiB);
}

TEST(VramPlan, ABlockWithTemporariesCostsMoreThanItsSize) {
  // b is 60 MiB, but its fp8 weights need 40 MiB of upcast copies: cost 100 > a's 90.
  const std::vector<OffloadBlock> lora = {
      {"a", 90 * kMiB, 0}, {"b", 60 * kMiB, 40 * kMiB}, {"c", 30 * kMiB, 0}};
  EXPECT_EQ(offload_cost(lora[1]), 100 * kMiB);
  VramPlan p = plan_vram(lora, 150 * kMiB, 1);
  EXPECT_EQ(resident_names(lora, p), (std::vector<std::string>{"b"}));
  EXPECT_EQ(p.stream_reserve_bytes, 90 * kMiB);  // a streams: the largest offloaded cost
  // Without temporaries, b is the cheaper one to stream and a stays instead.
  std::vector<OffloadBlock> plain = lora;
  plain[1].temporary_bytes = 0;
  p = plan_vram(plain, 150 * kMiB, 1);
  EXPECT_EQ(resident_names(plain, p), (std::vector<std::string>{"a"}));
  EXPECT_EQ(p.stream_reserve_bytes, 60 * kMiB);
}

TEST(VramPlan, ABudgetBelowTheMinimumNamesIt) {
  try {
    plan_vram(kPlain, 199 * kMiB, 2);
    FAIL() << "a plan was made below the minimum";
  } catch (const VramBudgetError& e) {
    EXPECT_EQ(e.minimum_bytes(), 200 * kMiB);
    EXPECT_EQ(std::string(e.what()),
              "the VRAM budget of 0.194 GiB for the UNet's blocks is below the 0.195 GiB that "
              "streaming needs (2 x the largest block, a)");
  }
  EXPECT_THROW(plan_vram(kPlain, 250 * kMiB, 0), std::invalid_argument);
  EXPECT_THROW(plan_vram({{"x", -1, 0}}, 250 * kMiB, 1), std::invalid_argument);
}

}  // namespace
}  // namespace lf
