// Preemption (see header).
#include "worker/app/preemption.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "common/util/log.h"

namespace lf {
namespace {

std::atomic<bool> g_requested{false};
std::atomic<int> g_signal{0};
std::atomic<long long> g_grace_ms{25000};
std::atomic<long long> g_requested_at_ms{0};

long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::atomic<bool> g_checkpointable{false};

extern "C" void on_stop_signal(int sig) {
  if (g_requested.load()) {
    // A second Ctrl-C: leave now; the last committed checkpoint stands.
    if (sig == SIGINT && g_signal.load() == SIGINT) _exit(kExitPreempted);
    return;
  }
  // Time and signal first, the flag last: whoever sees the flag sees a valid time.
  g_signal.store(sig);
  g_requested_at_ms.store(now_ms());  // steady_clock::now is lock-free on Linux
  g_requested.store(true, std::memory_order_release);
}

void watch() {
  while (!g_requested.load(std::memory_order_acquire)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!g_checkpointable.load()) {
    // Registering, loading or caching: no step since the last checkpoint, nothing to save.
    LF_WARN((g_signal.load() == SIGINT ? "SIGINT" : "SIGTERM")
            << " received before training started: nothing new to checkpoint; exiting with "
            << kExitPreempted);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(kExitPreempted);
  }
  if (g_signal.load() == SIGINT) {
    LF_WARN(
        "SIGINT (Ctrl-C) received: as lorafleet-ctl stop, the ranks agree on a last step, "
        "commit a checkpoint, write the LoRA and exit 0 within "
        << g_grace_ms.load() / 1000.0
        << " s (cluster.preempt_grace_seconds); Ctrl-C again exits at once");
  } else {
    LF_WARN("SIGTERM received: finishing the current step, committing a checkpoint, exiting with "
            << kExitPreempted << " within " << g_grace_ms.load() / 1000.0
            << " s (cluster.preempt_grace_seconds)");
  }
  while (now_ms() - g_requested_at_ms.load() < g_grace_ms.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  LF_ERROR("preempt_grace_seconds (" << g_grace_ms.load() / 1000.0
                                     << " s) ran out before the checkpoint was committed; "
                                        "exiting with "
                                     << kExitPreempted
                                     << " (the previous committed checkpoint stands)");
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(kExitPreempted);
}

}  // namespace

void Preemption::install(std::chrono::seconds grace) {
  set_grace(grace);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::thread(watch).detach();
}

void Preemption::set_grace(std::chrono::seconds grace) {
  g_grace_ms.store(std::chrono::duration_cast<std::chrono::milliseconds>(grace).count());
}

bool Preemption::requested() {
  return g_requested.load(std::memory_order_acquire) && g_signal.load() != SIGINT;
}

bool Preemption::interrupted() {
  return g_requested.load(std::memory_order_acquire) && g_signal.load() == SIGINT;
}

void Preemption::set_checkpointable() { g_checkpointable.store(true); }

double Preemption::seconds_since_request() {
  return g_requested.load() ? (now_ms() - g_requested_at_ms.load()) / 1000.0 : 0.0;
}

}  // namespace lf
