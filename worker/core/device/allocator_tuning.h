// glibc malloc settings for a process that allocates and frees tensors of megabytes many times a
// second (LibTorch's CPU allocator is plain posix_memalign/free). By default glibc serves such
// blocks with mmap and unmaps them on free, so every UNet call page-faults its activations in
// again: on the sd15 sampler benchmark about a third of the wall time was system time. These
// settings keep freed memory in the heap for reuse instead (as PyTorch's CPU performance guide
// suggests with jemalloc/tcmalloc): blocks up to 32 MiB come from the heap, freed memory is
// returned to the system only above 1 GiB at the top, and the heap grows in 256 MiB steps.
// Call once, first thing in main, before any thread starts. A no-op without glibc.
#pragma once

namespace lf {

// Returns whether the settings were applied (false: not glibc, or mallopt refused).
bool tune_allocator_for_tensors();

}  // namespace lf
