// A content identity for a frozen module (VAE, text encoder), used in cache keys so that cached
// latents / text-encoder outputs are reused only with the very weights that produced them.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace lf {

// sha256 hex over the state dict, defined as sha256 of the concatenation, for every entry in
// bytewise key order (std::map order, so independent of insertion order), of
//   "<byte length of name>:<name>\n<dtype>\n[<d0>,<d1>,...]\n<sha256 hex of raw bytes>\n"
// where <dtype> is c10's name ("Float", "Half", "BFloat16", ...) and the raw bytes are the
// tensor's elements in row-major order as stored in memory on this (little-endian) machine,
// after moving it to the CPU and making it contiguous. Hashing each tensor separately keeps
// memory at one tensor; the length prefix keeps names unambiguous. The same weights in another
// dtype get another identity (their latents differ too).
// Throws std::invalid_argument naming the entry if a tensor is undefined.
std::string module_identity(const std::map<std::string, at::Tensor>& state_dict);

}  // namespace lf
