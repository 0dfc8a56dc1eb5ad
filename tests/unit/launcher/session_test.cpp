#include "launcher/session.hpp"

#include <gtest/gtest.h>

namespace sandgate::launcher {
namespace {

// Which of the launcher's fds 0-2 are terminals -> how the command's terminal is set up.
TEST(LauncherSession, PlanTerminal) {
  struct Row {
    const char* name;
    std::array<bool, 3> is_terminal;
    bool pty;
    bool relay_input;
    int output_fd;
    int size_fd;
  };
  const Row rows[] = {
      {"no terminal: no pty, fds passed through", {false, false, false}, false, false, -1, -1},
      {"interactive: all three on the pty", {true, true, true}, true, true, 1, 0},
      {"stdout to a file: keystrokes relayed, output shown on stderr",
       {true, false, true},
       true,
       true,
       2,
       0},
      {"only stdin a terminal: the pty's echo goes back to it",
       {true, false, false},
       true,
       true,
       0,
       0},
      {"piped stdin, terminal output: no keystrokes relayed",
       {false, true, true},
       true,
       false,
       1,
       1},
      {"only stderr a terminal", {false, false, true}, true, false, 2, 2},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const TerminalPlan plan = plan_terminal(row.is_terminal);
    EXPECT_EQ(plan.pty, row.pty);
    EXPECT_EQ(plan.on_pty, row.is_terminal);  // no fd of the operator's terminal is passed on
    EXPECT_EQ(plan.relay_input, row.relay_input);
    EXPECT_EQ(plan.output_fd, row.output_fd);
    EXPECT_EQ(plan.size_fd, row.size_fd);
  }
}

}  // namespace
}  // namespace sandgate::launcher
