// The progress line rank 0 prints: bar form on a terminal, plain form otherwise.
#include <gtest/gtest.h>

#include "worker/app/progress_bar.h"

namespace lf {
namespace {

TEST(ProgressBar, FormatsBarAndPlainLines) {
  EXPECT_EQ(ProgressBar::format(30, 120, 1.5, 0.98765, 61.0, /*bar=*/true, 10),
            "training  25% |##        | 30/120 [1.50 it/s, loss=0.9877, ETA 01:01]");
  EXPECT_EQ(ProgressBar::format(120, 120, 2.0, 0.5, 0.0, /*bar=*/false, 0),
            "step 120/120 [2.00 it/s, loss=0.5000, ETA 00:00]");
}

TEST(ProgressBar, PlainModePrintsEveryNthStepAndTheLast) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  ProgressBar bar(25, 0, out, /*is_tty=*/false, /*plain_every=*/10);
  for (int s = 1; s <= 25; ++s) bar.update(s, 0.1, 1e-4);
  bar.finish();
  fclose(out);
  const std::string text(buf, len);
  free(buf);
  EXPECT_NE(text.find("step 10/25"), std::string::npos) << text;
  EXPECT_NE(text.find("step 20/25"), std::string::npos) << text;
  EXPECT_NE(text.find("step 25/25"), std::string::npos) << text;
  EXPECT_EQ(text.find("step 11/25"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
}

}  // namespace
}  // namespace lf
