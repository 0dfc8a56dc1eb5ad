#include <iostream>

#include "config/config.hpp"

// Placeholder until the data path lands (issue 3).
int run_daemon(const sandgate::config::Config&) {
  std::cerr << "sandgate: the proxy data path is not built yet\n";
  return 1;
}
