#pragma once

// A request body on its way out, the same for both wires (HTTP/1.1 and HTTP/2 clients): signed
// again chunk by chunk when it is an AWS upload signed that way (sigv4::ChunkResigner, set by
// the credential filter), then scanned for placeholders (secrets::BodyTripwire) when the
// sandbox has any. What each holds waits here: the resigner a chunk until its end (its new
// signature goes before its data), the tripwire the end of a piece that could begin a
// placeholder, so no byte of a refused placeholder goes out.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "policy/host.hpp"
#include "secrets/aws_chunked.hpp"
#include "secrets/tripwire.hpp"

namespace sandgate::proxy {

struct Session;

class RequestBody {
 public:
  // Scans the body for the sandbox's placeholders on its way to host:port, when the config has
  // any; `intercepted`: sandgate terminated the TLS the request came in.
  void scan(const Session& s, const policy::Host& host, std::uint16_t port, bool intercepted);
  // Signs the body again as it passes (an aws-chunked upload).
  void resign(std::unique_ptr<secrets::sigv4::ChunkResigner> resigner) {
    resign_ = std::move(resigner);
  }

  // Neither: the bytes go as they come.
  bool idle() const { return !trip_ && resign_ == nullptr; }
  // Only scanned: a wire may scan in place (tripwire()) instead of through pass().
  bool only_scanned() const { return trip_ && resign_ == nullptr; }
  secrets::BodyTripwire* tripwire() { return trip_ ? &*trip_ : nullptr; }

  // `chunk` just read; `last`: the body ends with it. What may go on now, valid until the next
  // pass(); nothing once refused() or broken().
  std::string_view pass(std::string_view chunk, bool last);
  // The tripwire found a placeholder where it may not go (tripwire()->check() says which).
  bool refused() const { return trip_ && trip_->refused(); }
  // The upload's framing could not be signed again (why()): the request must stop.
  bool broken() const { return !why_.empty(); }
  std::string_view why() const { return why_; }

 private:
  std::optional<secrets::BodyTripwire> trip_;
  std::unique_ptr<secrets::sigv4::ChunkResigner> resign_;
  std::string rewritten_;  // what the resigner let go from the last pass()
  std::string joined_;     // what the tripwire held, then the new piece
  std::size_t sent_ = 0;   // of joined_, what the last pass() let go
  std::string why_;
};

}  // namespace sandgate::proxy
