// KeyValueStore: the c10d Store semantics the Gloo rendezvous relies on, its limits, and
// blocking get / wait across threads.
#include "common/rendezvous/key_value_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

namespace lf {
namespace {

using std::chrono::milliseconds;

TEST(KeyValueStore, SetGetCheckRemoveAndSize) {
  KeyValueStore s;
  EXPECT_EQ(s.get("a", milliseconds(0)), std::nullopt);
  s.set("a", std::string("x\0y", 3));
  s.set("b", "");
  EXPECT_EQ(s.get("a", milliseconds(0)), std::string("x\0y", 3));
  EXPECT_EQ(s.get("b", milliseconds(0)), "");
  EXPECT_TRUE(s.check({"a", "b"}));
  EXPECT_FALSE(s.check({"a", "c"}));
  EXPECT_EQ(s.size(), 2);
  EXPECT_TRUE(s.remove("a"));
  EXPECT_FALSE(s.remove("a"));
  EXPECT_EQ(s.size(), 1);
}

// As c10d's TCPStore: a missing key is set only when `expected` is empty; otherwise the call
// answers `expected`; a present key is swapped only when it holds `expected`.
TEST(KeyValueStore, CompareSetFollowsTcpStore) {
  KeyValueStore s;
  EXPECT_EQ(s.compare_set("k", "old", "new"), "old");
  EXPECT_FALSE(s.check({"k"}));
  EXPECT_EQ(s.compare_set("k", "", "first"), "first");
  EXPECT_EQ(s.compare_set("k", "wrong", "second"), "first");
  EXPECT_EQ(s.compare_set("k", "first", "second"), "second");
  EXPECT_EQ(s.get("k", milliseconds(0)), "second");
}

TEST(KeyValueStore, AddCountsInDecimalText) {
  KeyValueStore s;
  EXPECT_EQ(s.add("n", 3), 3);
  EXPECT_EQ(s.add("n", -5), -2);
  EXPECT_EQ(s.get("n", milliseconds(0)), "-2");
  s.set("text", "abc");
  EXPECT_THROW(s.add("text", 1), std::invalid_argument);
  s.set("big", "9223372036854775807");
  EXPECT_THROW(s.add("big", 1), std::invalid_argument);
  EXPECT_EQ(s.get("big", milliseconds(0)), "9223372036854775807");
}

TEST(KeyValueStore, GetAndWaitBlockUntilAnotherThreadSets) {
  KeyValueStore s;
  auto got = std::async(std::launch::async, [&] { return s.get("addr", milliseconds(10000)); });
  auto waited = std::async(std::launch::async, [&] {
    return s.wait({"addr", "x"}, milliseconds(10000));
  });
  std::this_thread::sleep_for(milliseconds(50));
  s.set("addr", "10.0.0.1:1234");
  s.set("x", "1");
  EXPECT_EQ(got.get(), "10.0.0.1:1234");
  EXPECT_TRUE(waited.get());
}

TEST(KeyValueStore, WaitTimesOutOnAMissingKey) {
  KeyValueStore s;
  s.set("a", "1");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(s.wait({"a", "never"}, milliseconds(100)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(100));
}

TEST(KeyValueStore, CloseWakesWaitersAsTimedOut) {
  KeyValueStore s;
  auto got = std::async(std::launch::async, [&] { return s.get("k", milliseconds(60000)); });
  std::this_thread::sleep_for(milliseconds(50));
  const auto t0 = std::chrono::steady_clock::now();
  s.close();
  EXPECT_EQ(got.get(), std::nullopt);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(5000));
  EXPECT_FALSE(s.wait({"k"}, milliseconds(60000)));  // at once
}

TEST(KeyValueStore, LimitsAreEnforcedAndLeaveTheStoreUnchanged) {
  KeyValueStore s(/*max_keys=*/2);
  EXPECT_THROW(s.set(std::string(KeyValueStore::kMaxKeyBytes + 1, 'k'), "v"), std::length_error);
  EXPECT_THROW(s.set("k", std::string(KeyValueStore::kMaxValueBytes + 1, 'v')), std::length_error);
  s.set("a", "1");
  s.set("b", "2");
  try {
    s.set("c", "3");
    FAIL() << "a third key was accepted";
  } catch (const std::length_error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 2"), std::string::npos) << e.what();
  }
  s.set("a", "replaced");  // an existing key is not one more
  EXPECT_EQ(s.size(), 2);
  EXPECT_EQ(s.get("a", milliseconds(0)), "replaced");
  EXPECT_THROW(s.add("c", 1), std::length_error);
  EXPECT_EQ(s.size(), 2);
}

}  // namespace
}  // namespace lf
