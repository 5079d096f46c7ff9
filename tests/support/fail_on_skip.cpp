// Linked into every gtest program (cmake/lf_helpers.cmake lf_add_test): with LF_FAIL_ON_SKIP=1
// in the environment (.ci/run sets it), a test that skipped (GTEST_SKIP: a missing tool, root
// privilege or build product) fails its program, so CI cannot turn green without running it.
// Without the variable a skip stays a skip, for machines that lack the tool.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

class FailOnSkip : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& test) override {
    if (test.result()->Skipped()) {
      skipped_.push_back(std::string(test.test_suite_name()) + "." + test.name());
    }
  }
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    if (skipped_.empty()) return;
    std::fprintf(stderr, "LF_FAIL_ON_SKIP=1: %zu test(s) skipped instead of running:\n",
                 skipped_.size());
    for (const std::string& name : skipped_) std::fprintf(stderr, "  %s\n", name.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(1);
  }

 private:
  std::vector<std::string> skipped_;
};

const bool kRegistered = [] {
  const char* v = std::getenv("LF_FAIL_ON_SKIP");
  if (v != nullptr && std::strcmp(v, "1") == 0) {
    ::testing::UnitTest::GetInstance()->listeners().Append(new FailOnSkip);
  }
  return true;
}();

}  // namespace
