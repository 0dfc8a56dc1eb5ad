#pragma once

#include <string>

#include "launcher/outcome.hpp"

namespace sandgate::launcher {

// Where `run --json` writes its status object: --json-file PATH (written atomically once the
// run is over, 0600), --json-fd N (an fd the caller opened; close-on-exec from the start, so
// the command never holds it), or stdout (the last line: everything of the sandbox has ended
// by the time it is written). Constructed before anything is set up: a bad --json-fd or a
// --json-file in a missing directory is a usage error (LaunchError, exit 2).
class StatusSink {
 public:
  // Disabled: write does nothing. json_fd -1 and json_file "": stdout.
  StatusSink(bool enabled, std::string json_file, int json_fd);
  // Writes the object; a failure to write is a warning on stderr (the run's status stands).
  void write(const RunOutcome& outcome) const;

 private:
  bool enabled_;
  std::string file_;
  int fd_ = -1;
};

}  // namespace sandgate::launcher
