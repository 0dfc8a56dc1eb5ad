#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "proxy/runtime.hpp"
#include "proxy/watchdog.hpp"

namespace sandgate::proxy {

struct RelayStats {
  std::uint64_t up = 0;    // client -> upstream
  std::uint64_t down = 0;  // upstream -> client
};

// Decides a tunnel on the client's first bytes before any of them reaches upstream (CONNECT's
// SNI and nested-proxy checks).
class FirstBytesGate {
 public:
  enum class Verdict { need_more, pass, refuse };

  // `first`: every byte the client has sent so far. Called again as more arrive while it
  // answers need_more, so it must refuse past some bound.
  virtual Verdict check(std::span<const std::uint8_t> first) = 0;
  // Sent to the client before the tunnel closes on a refusal (a TLS alert); may be empty.
  virtual std::string_view refusal() const = 0;

 protected:
  ~FirstBytesGate() = default;
};

// Called once when both directions of a relay have ended, with the bytes each way (a gate
// says itself whether it refused the tunnel). Should not throw: an exception is dropped there.
using RelayDone = std::function<void(const RelayStats&)>;

// Starts relaying client <-> upstream and returns at once; `done` runs on the sockets' worker
// once both directions have ended, and must keep alive (by capture) whatever owns the
// sockets, the watchdog and the gate until then. Each direction copies until EOF (then
// half-closes its destination) or an error (then both sockets are cancelled so the other
// direction ends too). A direction copies its first small reads through a stack buffer; once
// a read fills it (bulk) the bytes move with splice(2) through a pipe and never enter user
// space. An idle direction holds no buffer. Every transfer pushes the watchdog forward by
// `idle`.
//
// `initial`: bytes already read from the client, sent upstream first. With a `gate`, nothing
// goes upstream until the gate passes the client's first bytes (`initial` included); a refusal
// sends gate->refusal() to the client and ends the tunnel.
//
// The relay is driven by completion callbacks rather than a coroutine, and the session's
// coroutine may end once it has started: an idle tunnel holds two pending waits and no
// coroutine frames (memory per idle tunnel).
void start_relay(tcp::socket& client, tcp::socket& upstream, Watchdog& watchdog,
                 std::chrono::milliseconds idle, std::vector<std::uint8_t> initial,
                 FirstBytesGate* gate, RelayDone done);

}  // namespace sandgate::proxy
