// Recognises PyTorch pickle checkpoints (.ckpt/.pt/.pth/.bin) by their first bytes, so that a
// loader can refuse them with a conversion hint instead of a generic "invalid safetensors".
// Pickles can run code when loaded; lorafleet never unpickles anything.
#pragma once

#include <string>

namespace lf {

// True when the file starts like a torch.save zip archive ("PK\x03\x04") or a raw pickle
// (protocol 2..5: 0x80 0x02..0x05). False when it cannot be read.
bool looks_like_pickle(const std::string& path);

}  // namespace lf
