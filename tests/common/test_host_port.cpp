// split_host_port: the one parser of "host:port" for the coordinator, the workers and the
// rendezvous (IPv6 in brackets, a missing port).
#include "common/util/host_port.h"

#include <gtest/gtest.h>

namespace lf {
namespace {

TEST(HostPort, SplitsAtTheLastColonAndStripsBrackets) {
  HostPort a = split_host_port("10.0.0.7:50051");
  EXPECT_EQ(a.host, "10.0.0.7");
  EXPECT_EQ(a.port, "50051");
  HostPort b = split_host_port("[::1]:29500");
  EXPECT_EQ(b.host, "::1");
  EXPECT_EQ(b.port, "29500");
  HostPort c = split_host_port("coordinator.lorafleet");
  EXPECT_EQ(c.host, "coordinator.lorafleet");
  EXPECT_EQ(c.port, "");
  HostPort d = split_host_port(":9400");
  EXPECT_EQ(d.host, "");
  EXPECT_EQ(d.port, "9400");
}

}  // namespace
}  // namespace lf
