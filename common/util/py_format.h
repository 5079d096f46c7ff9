// Python's str() of a float, for values kohya writes into LoRA metadata with str(float).
#pragma once

#include <string>

namespace lf {

// Python str(float) of v ("1795993460.0", "0.0001", "1e-05"). Never throws except bad_alloc.
std::string py_float(double v);

}  // namespace lf
