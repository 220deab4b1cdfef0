// Exceptions of swarm_net.
//
//   WireError   a frame breaks the wire contract (docs/architecture.md, "Wire format"); the message
//               names the field and the value, e.g. "tensor[1].ndim: 12 exceeds limit 8".
//   AuthError   a WireError for a wrong or missing MAC: "frame.mac: authentication failed".
//   NetError    a call or connection failed: says host:port, what happened, and timed_out().
//   RemoteError the peer answered with an Error message; remote_message() is its text.
#pragma once

#include <stdexcept>
#include <string>

namespace swarm::net {

class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AuthError : public WireError {
 public:
  using WireError::WireError;
};

class NetError : public std::runtime_error {
 public:
  NetError(const std::string& endpoint, const std::string& what, bool timed_out = false)
      : std::runtime_error(endpoint + ": " + what + (timed_out ? " [timed out]" : "")),
        endpoint_(endpoint),
        timed_out_(timed_out) {}

  const std::string& endpoint() const noexcept { return endpoint_; }
  bool timed_out() const noexcept { return timed_out_; }

 private:
  std::string endpoint_;
  bool timed_out_;
};

class RemoteError : public NetError {
 public:
  RemoteError(const std::string& endpoint, const std::string& remote_message)
      : NetError(endpoint, "remote error: " + remote_message), remote_message_(remote_message) {}

  const std::string& remote_message() const noexcept { return remote_message_; }

 private:
  std::string remote_message_;
};

}  // namespace swarm::net
