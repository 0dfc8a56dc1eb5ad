#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "proxy/runtime.hpp"
#include "proxy/watchdog.hpp"
#include "telemetry/audit_log.hpp"

namespace sandgate::proxy {

struct RelayStats {
  std::uint64_t up = 0;    // client -> upstream
  std::uint64_t down = 0;  // upstream -> client
  // What ended it first: a side's close (FIN) or reset, a gate's refusal; unset when the
  // sockets were cancelled or closed under it (the idle deadline, shutdown: Session::ended).
  telemetry::Ended ended = telemetry::Ended::unset;
  // The client needs no shutdown(2) before its socket is closed: upstream's FIN was passed on,
  // or both sides had sent theirs, and then the close sends it.
  bool client_send_shut = false;
};

// Looks at the client's bytes of a tunnel before they reach upstream: the first bytes
// (CONNECT's SNI and nested-proxy checks), and, for as long as it asks to, the rest of the
// stream (every request head of a plain-text HTTP/1 tunnel).
class TunnelGate {
 public:
  struct Verdict {
    enum class Kind {
      hold,     // none of `pending` may go yet: wait for more bytes
      forward,  // the first `bytes` of `pending` may go; keep watching the rest
      pass,     // all of `pending` may go, and everything after it: stop watching
      refuse,   // end the tunnel
    };
    Kind kind = Kind::hold;
    std::size_t bytes = 0;  // forward: how many
  };

  // `pending`: the client's bytes that have not gone upstream yet (those held back by the last
  // call, then what arrived since). Called again as more arrive while it answers hold or
  // forward; every byte it let go with forward is counted as seen and not presented again.
  // It must refuse before what it holds passes some bound.
  virtual Verdict check(std::span<const std::uint8_t> pending) = 0;
  // Sent to the client before the tunnel closes on a refusal (a TLS alert); may be empty.
  virtual std::string_view refusal() const = 0;

 protected:
  ~TunnelGate() = default;
};

// Called once when both directions of a relay have ended, with the bytes each way (a gate
// says itself whether it refused the tunnel). Should not throw: an exception is dropped there.
using RelayDone = std::function<void(const RelayStats&)>;

// Starts relaying client <-> upstream and returns at once; `done` runs on the sockets' worker
// once both directions have ended, and must keep alive (by capture) whatever owns the
// sockets, the watchdog and the gate until then; the sockets are closed soon after it ran. Each
// direction copies until EOF (then half-closes its destination; the second of two EOFs leaves
// that FIN to the close) or an error (then both sockets are cancelled so the other
// direction ends too). A side that resets is passed on as a reset: the other side's socket is
// closed with SO_LINGER 0, so a protocol without length framing sees that it was cut. A direction
// copies its first small reads through a stack buffer; once a read fills it (bulk) the bytes move
// with splice(2) through a pipe and never enter user space. An idle direction holds no buffer.
// Every transfer pushes the watchdog forward by `idle`.
//
// `initial`: bytes already read from the client, sent upstream first. With a `gate`, a client
// byte (`initial` included) goes upstream only once the gate let it go, and the client's bytes
// are read into user space for as long as the gate watches; a refusal sends gate->refusal()
// to the client (unless bytes from upstream are still waiting to reach it) and ends the
// tunnel.
//
// The relay is driven by completion callbacks rather than a coroutine, and the session's
// coroutine may end once it has started: an idle tunnel holds two pending waits and no
// coroutine frames (memory per idle tunnel).
void start_relay(tcp::socket& client, tcp::socket& upstream, Watchdog& watchdog,
                 std::chrono::milliseconds idle, std::vector<std::uint8_t> initial,
                 TunnelGate* gate, RelayDone done);

}  // namespace sandgate::proxy
