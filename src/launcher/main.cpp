// sandgate-launch: wires a sandbox's network namespace to the sandgate daemon. Parses the
// command line and hands over to launcher::run_command; every failure is one line on stderr.

#include <iostream>
#include <string_view>
#include <vector>

#include "launcher/cli.hpp"
#include "launcher/commands.hpp"
#include "launcher/sandbox.hpp"

int main(int argc, char** argv) {
  namespace launcher = sandgate::launcher;
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  std::string error;
  const auto options = launcher::parse_args(args, &error);
  if (!options) {
    std::cerr << "sandgate-launch: " << error << "\n" << launcher::usage_text();
    return 2;
  }
  try {
    return launcher::run_command(*options);
  } catch (const launcher::LaunchError& e) {
    std::cerr << "sandgate-launch: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "sandgate-launch: " << e.what() << "\n";
    return 1;
  }
}
