#include "app/ca_command.hpp"

#include <iostream>

#include "tls/ca_init.hpp"
#include "tls/x509.hpp"

namespace sandgate::app {

int run_ca_init(const std::string& dir, bool force) {
  try {
    const tls::CreatedCa ca = tls::create_ca(dir, force);
    std::cout << "certificate: " << ca.files.cert.string() << "\n"
              << "key: " << ca.files.key.string() << "\n"
              << "subject: " << ca.subject << "\n"
              << "not_after: " << tls::utc_text(ca.not_after) << "\n"
              << "sha256_fingerprint: " << ca.fingerprint << "\n";
    return 0;
  } catch (const tls::CaError& e) {
    std::cerr << "sandgate ca init: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace sandgate::app
