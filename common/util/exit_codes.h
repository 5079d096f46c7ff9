// Worker exit statuses, shared by the worker, the supervisor (lorafleet-launch) and the
// Kubernetes podFailurePolicy in deploy/k8s: each says what a supervisor should do next.
#pragma once

namespace lf {

inline constexpr int kExitBadInput = 3;     // bad config, data or refusal: do not retry
inline constexpr int kExitCancelled = 4;    // an operator cancelled the job (lorafleet-ctl
                                            // cancel): do not retry; the last committed
                                            // checkpoint stays the resume point
inline constexpr int kExitPeerLost = 75;    // a peer, the link or the coordinator was lost:
                                            // restart the group (BSD EX_TEMPFAIL)
inline constexpr int kExitPreempted = 143;  // 128 + SIGTERM: stopped after committing a
                                            // checkpoint; restart without counting a failure

}  // namespace lf
