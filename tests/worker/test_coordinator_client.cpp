// CoordinatorClient against a coordinator that cannot be reached: the checkpoint commit gives up
// within the budget it is given, not the client's (minutes-long) retry budget, so a rank cut off
// from the coordinator exits with its peers instead of outliving them.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "worker/rpc/coordinator_client.h"

namespace lf {
namespace {

// A loopback port nothing listens on: bound, then closed.
int unused_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(CoordinatorClient, CommitToAnUnreachableCoordinatorEndsWithinItsBudget) {
  RetryPolicy retry;  // the default: minutes
  ASSERT_GE(retry.budget, std::chrono::minutes(1));
  CoordinatorClient client("127.0.0.1:" + std::to_string(unused_port()), ClientSecurity{}, retry);
  const auto t0 = std::chrono::steady_clock::now();
  const auto ack = client.commit_checkpoint(1, 4, "/tmp/step-00000004", std::chrono::seconds(2));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(ack, CoordinatorClient::CommitAck::kUnacknowledged);
  EXPECT_GE(waited, 1.0);  // it did retry
  EXPECT_LT(waited, 4.0);
}

}  // namespace
}  // namespace lf
