// PCRE2 pattern compilation (see header).
#include "common/text/pcre2_pattern.h"

#include <stdexcept>
#include <string>

namespace lf {

Pcre2Code compile_pcre2(const char* pattern, std::uint32_t options) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                   options, &err, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw std::logic_error(std::string("CLIPTokenizer: PCRE2 cannot compile '") + pattern +
                           "': " + reinterpret_cast<char*>(msg));
  }
  return Pcre2Code(code);
}

}  // namespace lf
