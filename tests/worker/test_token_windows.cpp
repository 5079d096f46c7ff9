// kohya's 75-token windows of long captions (token_windows.h): the window ids of kohya
// _get_input_ids for pad == eos (SD 1.x, SDXL's CLIP-L) and pad != eos (SD 2.x, SDXL's bigG), the
// join of the windows' hidden states and the first window's pooled output.
#include "worker/train/token_windows.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <vector>

namespace lf {
namespace {

constexpr int kBos = 49406, kEos = 49407;

// What the tokenizer gives for `tokens` caption tokens (ids 1000, 1001, ...) at max_token_length
// `length`: BOS, the first `length` tokens, EOS, then pad.
std::vector<int> tokenized(int tokens, int length, int pad) {
  std::vector<int> ids{kBos};
  for (int i = 0; i < std::min(tokens, length); ++i) ids.push_back(1000 + i);
  ids.push_back(kEos);
  ids.resize(static_cast<std::size_t>(length + 2), pad);
  return ids;
}

std::vector<std::int64_t> window(const std::vector<std::int64_t>& ids, int k) {
  return {ids.begin() + k * 77, ids.begin() + (k + 1) * 77};
}

TEST(TokenWindows, CountsAndLengthsOfKohyasChoices) {
  EXPECT_EQ(token_window_count(75), 1);
  EXPECT_EQ(token_window_count(150), 2);
  EXPECT_EQ(token_window_count(225), 3);
  EXPECT_EQ(context_length(75), 77);
  EXPECT_EQ(context_length(150), 152);
  EXPECT_EQ(context_length(225), 227);
  for (int bad : {0, 76, 100, 300}) {
    try {
      token_window_count(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()),
                "training.max_token_length: expected 75, 150 or 225, got " + std::to_string(bad));
    }
  }
}

TEST(TokenWindows, PadIsEosEveryWindowIsBosTokensEos) {
  // 100 tokens at 225: window 0 = tokens 0..74, window 1 = 75..99 then EOS (the caption's) and
  // EOS padding, window 2 = all EOS; each framed BOS ... EOS.
  const std::vector<std::int64_t> ids = kohya_token_windows(tokenized(100, 225, kEos), kEos, kEos);
  ASSERT_EQ(ids.size(), 3u * 77);
  for (int k = 0; k < 3; ++k) {
    const auto w = window(ids, k);
    EXPECT_EQ(w.front(), kBos) << k;
    EXPECT_EQ(w.back(), kEos) << k;
  }
  EXPECT_EQ(window(ids, 0)[1], 1000);
  EXPECT_EQ(window(ids, 0)[75], 1074);
  EXPECT_EQ(window(ids, 1)[1], 1075);
  EXPECT_EQ(window(ids, 1)[25], 1099);
  EXPECT_EQ(window(ids, 1)[26], kEos);
  EXPECT_EQ(window(ids, 2), window(kohya_token_windows(tokenized(0, 225, kEos), kEos, kEos), 2));
  EXPECT_EQ(window(ids, 2)[1], kEos);
}

TEST(TokenWindows, PadZeroFullWindowsEndInEosEmptyOnesStartBosEos) {
  const int pad = 0;
  // 100 tokens: window 0 is full, so kohya replaces its last id (pad) with EOS; window 1 ends
  // the caption (EOS then pad, last pad kept); window 2 is empty: BOS EOS pad ... pad.
  const std::vector<std::int64_t> ids = kohya_token_windows(tokenized(100, 225, pad), kEos, pad);
  const auto w0 = window(ids, 0), w1 = window(ids, 1), w2 = window(ids, 2);
  EXPECT_EQ(w0.front(), kBos);
  EXPECT_EQ(w0[75], 1074);
  EXPECT_EQ(w0.back(), kEos);
  EXPECT_EQ(w1[25], 1099);
  EXPECT_EQ(w1[26], kEos);
  EXPECT_EQ(w1[27], pad);
  EXPECT_EQ(w1.back(), pad);
  std::vector<std::int64_t> empty(77, pad);
  empty[0] = kBos;
  empty[1] = kEos;
  EXPECT_EQ(w2, empty);
  // 74 tokens: EOS in window 0's last slot, so its final id stays pad; window 1 is empty.
  const auto e74 = kohya_token_windows(tokenized(74, 150, pad), kEos, pad);
  EXPECT_EQ(window(e74, 0)[75], kEos);
  EXPECT_EQ(window(e74, 0).back(), pad);
  EXPECT_EQ(window(e74, 1), empty);
  // 75 tokens: window 0 full (EOS appended), window 1 opens with the caption's EOS.
  const auto e75 = kohya_token_windows(tokenized(75, 150, pad), kEos, pad);
  EXPECT_EQ(window(e75, 0).back(), kEos);
  EXPECT_EQ(window(e75, 1), empty);
  // 300 tokens at 225: truncated, the last window ends with the tokenizer's EOS.
  const auto t = kohya_token_windows(tokenized(300, 225, pad), kEos, pad);
  EXPECT_EQ(window(t, 2)[75], 1224);
  EXPECT_EQ(window(t, 2).back(), kEos);
}

TEST(TokenWindows, OneWindowIsTheTokenizersIds) {
  const std::vector<int> ids = tokenized(30, 75, 0);
  EXPECT_EQ(kohya_token_windows(ids, kEos, 0), std::vector<std::int64_t>(ids.begin(), ids.end()));
  EXPECT_THROW(kohya_token_windows(std::vector<int>(100, 0), kEos, 0), std::invalid_argument);
  EXPECT_THROW(kohya_token_windows(std::vector<int>(302, 0), kEos, 0), std::invalid_argument);
}

TEST(TokenWindows, JoinKeepsFirstBosEachWindowsTokensAndTheLastState) {
  // Two captions of 3 windows; state value = caption * 1000 + window * 100 + position.
  const torch::Tensor pos = torch::arange(77).view({1, 1, 77});
  const torch::Tensor win = torch::arange(3).view({1, 3, 1}) * 100;
  const torch::Tensor cap = torch::arange(2).view({2, 1, 1}) * 1000;
  const torch::Tensor hidden =
      (cap + win + pos).to(torch::kFloat).view({6, 77, 1}).expand({6, 77, 4}).contiguous();
  const torch::Tensor joined = join_window_states(hidden, 3);
  ASSERT_EQ(joined.sizes(), (std::vector<int64_t>{2, 227, 4}));
  std::vector<float> want{0};
  for (int k = 0; k < 3; ++k) {
    for (int p = 1; p <= 75; ++p) want.push_back(static_cast<float>(k * 100 + p));
  }
  want.push_back(276);  // window 2, position 76
  for (int c = 0; c < 2; ++c) {
    const torch::Tensor expected = torch::tensor(want) + 1000.0f * static_cast<float>(c);
    EXPECT_TRUE(torch::equal(joined[c].select(1, 3), expected)) << c;
  }
  EXPECT_TRUE(torch::equal(join_window_states(hidden, 1), hidden));
  EXPECT_THROW(join_window_states(hidden, 4), std::invalid_argument);
  EXPECT_THROW(join_window_states(hidden.narrow(1, 0, 76), 3), std::invalid_argument);
}

TEST(TokenWindows, PooledIsTheFirstWindowsOfEachCaption) {
  const torch::Tensor pooled = torch::arange(12).to(torch::kFloat).view({6, 2});  // 2 x 3 windows
  EXPECT_TRUE(
      torch::equal(first_window_pooled(pooled, 3), torch::tensor({{0.f, 1.f}, {6.f, 7.f}})));
  EXPECT_TRUE(torch::equal(first_window_pooled(pooled, 1), pooled));
  EXPECT_THROW(first_window_pooled(pooled, 4), std::invalid_argument);
}

}  // namespace
}  // namespace lf
