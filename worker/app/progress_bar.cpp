// Progress display (see header). Rate and ETA count only steps run in this process, so a resumed
// run shows its real speed.
#include "worker/app/progress_bar.h"

#include <cmath>

namespace lf {

ProgressBar::ProgressBar(std::int64_t total, std::int64_t start, std::FILE* out, bool is_tty,
                         int plain_every)
    : total_(total), start_(start), out_(out), is_tty_(is_tty),
      plain_every_(plain_every < 1 ? 1 : plain_every), t0_(std::chrono::steady_clock::now()),
      last_step_(start) {}

std::string ProgressBar::format(std::int64_t step, std::int64_t total, double its, double loss,
                                double eta_seconds, bool bar, int width) {
  char eta[32];
  const long e = std::isfinite(eta_seconds) ? static_cast<long>(eta_seconds + 0.5) : 0;
  std::snprintf(eta, sizeof(eta), "%02ld:%02ld", e / 60, e % 60);
  char tail[128];
  std::snprintf(tail, sizeof(tail), " %lld/%lld [%.2f it/s, loss=%.4f, ETA %s]",
                static_cast<long long>(step), static_cast<long long>(total), its, loss, eta);
  std::string line;
  if (bar) {
    const double frac = total > 0 ? static_cast<double>(step) / static_cast<double>(total) : 1.0;
    const int filled = static_cast<int>(frac * width);
    char pct[8];
    std::snprintf(pct, sizeof(pct), "%3d%%", static_cast<int>(frac * 100.0));
    line = std::string("training ") + pct + " |" + std::string(filled, '#') +
           std::string(width - filled, ' ') + "|";
  } else {
    line = "step";
  }
  return line + tail;
}

void ProgressBar::update(std::int64_t step, double loss, double lr) {
  last_step_ = step;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double done = static_cast<double>(step - start_);
  const double its = secs > 0 ? done / secs : 0.0;
  const double eta = its > 0 ? static_cast<double>(total_ - step) / its : 0.0;
  if (is_tty_) {
    std::fprintf(out_, "\r%s", format(step, total_, its, loss, eta, true, 30).c_str());
    std::fflush(out_);
  } else if (step % plain_every_ == 0 || step == total_) {
    std::fprintf(out_, "%s lr=%.3g\n", format(step, total_, its, loss, eta, false, 0).c_str(), lr);
    std::fflush(out_);
  }
}

void ProgressBar::finish() {
  if (is_tty_) {
    std::fprintf(out_, "\n");
    std::fflush(out_);
  }
}

}  // namespace lf
