#pragma once

#include <string>
#include <vector>

namespace sandgate::test {

// Tests that aim the daemon at private, metadata or "public" addresses must not be able to
// send a packet off the machine, even if the daemon has a bug. They run in a fresh network
// namespace that has only a loopback interface:
//
//   TEST(Threats, Something) {
//     SANDGATE_IN_PRIVATE_NETNS();
//     ... runs only inside the namespace ...
//   }
//
// Outside the namespace the macro re-runs the current test's binary, filtered to this one test,
// under `unshare --net` (plus `--user --map-root-user` when not root) after `ip link set lo up`,
// reports the child's output, fails the test unless the child passed it, and returns. Inside
// (marked by an environment variable) it checks that loopback is the only interface and fails
// the test if not. No named namespace is created, so parallel runs cannot clash.
bool enter_private_netns_or_rerun();

// Adds an address ("169.254.169.254/32", "fd00:ec2::254/128") to lo. Only inside the private
// namespace; fails the test otherwise.
bool add_loopback_address(const std::string& cidr);

// main() of a test binary that runs whole inside one fresh network namespace of its own (a
// test internet of veths and namespaces it makes, the daemon, the launcher's wiring): unless
// `inside_env` is set, re-runs the binary under `unshare --net` with it set (root needed;
// `name` is for the message otherwise); inside, runs the tests.
int run_tests_in_own_netns(int argc, char** argv, const char* inside_env, const char* name);

// Inside such a namespace: the test internet's namespace `netns`, reached over a veth
// (192.0.2.1 here, 192.0.2.2 there, its default route back), with `addresses` on its loopback
// and a route to each /32 here. Throws std::runtime_error naming the command that failed.
void make_test_internet(const std::string& netns, const std::vector<std::string>& addresses);

}  // namespace sandgate::test

#define SANDGATE_IN_PRIVATE_NETNS()                                \
  do {                                                             \
    if (!::sandgate::test::enter_private_netns_or_rerun()) return; \
  } while (0)
