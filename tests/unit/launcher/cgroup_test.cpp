#include "launcher/cgroup.hpp"

#include <gtest/gtest.h>

namespace sandgate::launcher {
namespace {

TEST(LauncherCgroup, OwnCgroupPathFromProcSelfCgroup) {
  const std::string v1 =
      "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/7d5e\n2:cpu,cpuacct:/a/b\n0::/\n";
  EXPECT_EQ(own_cgroup_path(v1, "memory"), "/process_api/7d5e");
  EXPECT_EQ(own_cgroup_path(v1, "pids"), "/");
  EXPECT_EQ(own_cgroup_path(v1, "cpuacct"), "/a/b");
  EXPECT_EQ(own_cgroup_path(v1, "cpu"), "/a/b");
  EXPECT_EQ(own_cgroup_path(v1, ""), "/");
  EXPECT_EQ(own_cgroup_path(v1, "blkio"), std::nullopt);
  EXPECT_EQ(own_cgroup_path("0::/user.slice/session-2.scope\n", ""), "/user.slice/session-2.scope");
  EXPECT_EQ(own_cgroup_path("0::/x\n", "memory"), std::nullopt);
  EXPECT_EQ(own_cgroup_path("garbage\n\n:", "memory"), std::nullopt);
}

TEST(LauncherCgroup, FlatKeyedValues) {
  // memory.events (v2), memory.oom_control (v1), pids.events.
  const std::string events = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n";
  EXPECT_EQ(flat_keyed_value(events, "oom_kill"), 1U);
  EXPECT_EQ(flat_keyed_value(events, "oom"), 2U);
  EXPECT_EQ(flat_keyed_value(events, "max"), 12U);
  EXPECT_EQ(flat_keyed_value(events, "absent"), 0U);
  EXPECT_EQ(flat_keyed_value("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill"), 3U);
  EXPECT_EQ(flat_keyed_value("", "oom_kill"), 0U);
}

}  // namespace
}  // namespace sandgate::launcher
