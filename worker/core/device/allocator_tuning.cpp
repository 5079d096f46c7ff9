// tune_allocator_for_tensors (see header).
#include "device/allocator_tuning.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace lf {

bool tune_allocator_for_tensors() {
#if defined(__GLIBC__)
  // M_MMAP_THRESHOLD's largest value on 64-bit glibc is 32 MiB (HEAP_MAX_SIZE / 2); setting it
  // also turns off glibc's dynamic threshold.
  bool ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  ok = mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1 && ok;
  ok = mallopt(M_TOP_PAD, 256 << 20) == 1 && ok;
  return ok;
#else
  return false;
#endif
}

}  // namespace lf
