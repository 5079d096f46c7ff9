// kohya's long captions (--max_token_length 150 / 225): the caption is tokenised to
// max_token_length + 2 ids, split into 75-token windows that each get their own BOS and EOS, every
// window runs through the text encoder on its own (77 positions, as CLIP was trained), and the
// windows' hidden states are joined back into one context of 75 n + 2 positions. Mirrors kohya
// sd-scripts TokenizeStrategy._get_input_ids (library/strategy_base.py),
// SdTextEncodingStrategy.encode_tokens (library/strategy_sd.py) and
// SdxlTextEncodingStrategy._get_hidden_states_sdxl (library/strategy_sdxl.py), formerly
// train_util.get_input_ids / get_hidden_states / get_hidden_states_sdxl.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace lf {

// CLIP's context: 75 caption tokens between BOS and EOS (tokenizer.model_max_length 77).
inline constexpr std::int64_t kWindowTokens = 75;
inline constexpr std::int64_t kWindowLength = kWindowTokens + 2;

// Windows per caption: 1, 2 or 3 for max_token_length 75 (kohya's unset), 150 or 225. Throws
// std::invalid_argument naming training.max_token_length for any other value (kohya's argparse
// choices are None, 150 and 225).
std::int64_t token_window_count(int max_token_length);

// Positions of the joined context, 75 n + 2: 77, 152 or 227. Throws as token_window_count.
std::int64_t context_length(int max_token_length);

// kohya _get_input_ids. `ids`: the caption tokenised to max_token_length + 2 ids (BOS, at most
// max_token_length tokens, EOS, then `pad`; clip_tokenizer.h). Returns n * 77 ids, window k being
// BOS, ids[1 + 75k, 76 + 75k) and ids.back(). When pad differs from eos (SD 2.x, SDXL's bigG),
// kohya then ends a window whose last caption slot holds a token (not EOS or pad) with EOS, and
// starts a window that begins with pad as BOS EOS (an empty window). With one window the ids are
// returned unchanged, as kohya does. Throws std::invalid_argument when ids.size() is not
// 75 n + 2 for n in {1, 2, 3}.
std::vector<std::int64_t> kohya_token_windows(const std::vector<int>& ids, int eos, int pad);

// kohya's join of the windows' hidden states: `hidden` [B * n, 77, D] (window-major per caption,
// as kohya_token_windows lays them out) -> [B, 75 n + 2, D]: the first window's BOS state, the 75
// states after BOS of every window, and the last window's final state (its EOS or pad). The same
// for every family: kohya's SD 2.x branch that would copy a pad state over an empty window's EOS
// compares a token id with the EOS token's *string* and never fires (strategy_sd.py), and SDXL's
// has it commented out. n = 1 returns `hidden` unchanged. Throws std::invalid_argument for a
// shape that does not fit.
at::Tensor join_window_states(const at::Tensor& hidden, std::int64_t windows);

// SDXL's pooled output of a long caption: `pooled` [B * n, P], one per window -> [B, P], the
// first window's (kohya `pool2 = pool2[::n_size]`). Throws std::invalid_argument when B * n does
// not divide.
at::Tensor first_window_pooled(const at::Tensor& pooled, std::int64_t windows);

}  // namespace lf
