// KeyRule (common/config/key_rule.h): what each rule accepts at its bounds, and the "expected ..."
// text the parser puts in its messages.
#include <gtest/gtest.h>

#include "common/config/key_rule.h"

namespace lf {
namespace {

TEST(KeyRule, NumberBoundsAreInclusiveExceptAHalfOpenTop) {
  const KeyRule lo = KeyRule::at_least(1);
  EXPECT_FALSE(lo.accepts(0.999));
  EXPECT_TRUE(lo.accepts(1.0));
  const KeyRule closed = KeyRule::in_range(1, 8);
  EXPECT_TRUE(closed.accepts(8.0));
  EXPECT_FALSE(closed.accepts(8.5));
  const KeyRule half = KeyRule::in_half_open(0, 1);
  EXPECT_TRUE(half.accepts(0.0));
  EXPECT_TRUE(half.accepts(0.999));
  EXPECT_FALSE(half.accepts(1.0));
  EXPECT_TRUE(KeyRule::any().accepts(-1e300));
}

TEST(KeyRule, StringRules) {
  const KeyRule choices = KeyRule::one_of({"no", "fp16", "bf16"});
  EXPECT_TRUE(choices.accepts(std::string("fp16")));
  EXPECT_FALSE(choices.accepts(std::string("half")));
  EXPECT_FALSE(choices.accepts(std::string()));
  EXPECT_TRUE(KeyRule::one_of({"float"}).or_unset("x").accepts(std::string()));
  EXPECT_FALSE(KeyRule::non_empty().accepts(std::string()));
  EXPECT_TRUE(KeyRule::file_name().accepts(std::string("lora")));
  EXPECT_FALSE(KeyRule::file_name().accepts(std::string("out/lora")));
}

TEST(KeyRule, ExpectedTexts) {
  EXPECT_EQ(KeyRule::at_least(1).expected(KeyValueKind::kInteger), "an integer >= 1");
  EXPECT_EQ(KeyRule::at_least(0.5).expected(KeyValueKind::kNumber), "a number >= 0.5");
  EXPECT_EQ(KeyRule::in_range(1, 8).expected(KeyValueKind::kInteger), "an integer in [1, 8]");
  EXPECT_EQ(KeyRule::in_half_open(0, 1).expected(KeyValueKind::kNumber), "a number in [0, 1)");
  EXPECT_EQ(KeyRule::at_least(1).unit("seconds").expected(KeyValueKind::kInteger), "seconds >= 1");
  EXPECT_EQ(KeyRule::at_least(0).note("0 = all cores").expected(KeyValueKind::kInteger),
            "an integer >= 0 (0 = all cores)");
  EXPECT_EQ(KeyRule::any().expected(KeyValueKind::kNonNegativeInteger), "a non-negative integer");
  EXPECT_EQ(KeyRule::any().expected(KeyValueKind::kBool), "true or false");
  EXPECT_EQ(KeyRule::one_of({"float", "fp16", "bf16"})
                .note("kohya --save_precision")
                .or_unset("the training dtype")
                .expected(KeyValueKind::kString),
            "one of: float, fp16, bf16 (kohya --save_precision), or unset for the training dtype");
  EXPECT_EQ(KeyRule::non_empty().unit("folder path").expected(KeyValueKind::kString),
            "a non-empty folder path");
  EXPECT_EQ(KeyRule::file_name().expected(KeyValueKind::kString),
            "a non-empty file name without '/'");
}

}  // namespace
}  // namespace lf
