// RegistryService: the registry's REST semantics without a transport. RegistryServer feeds it
// every HTTP request; tests may call handle() directly. Thread-safe: one mutex guards the
// PeerTable and the RoundBook.
//
//   PUT    /v1/peers/{peerId}                      body PeerRecord   -> {"expiresInSeconds": x}
//   DELETE /v1/peers/{peerId}                                        -> {"removed": bool}
//   GET    /v1/peers[?role=worker|trainer][&stage=N]                 -> {"peers": [PeerRecord...]}
//   POST   /v1/stages/{s}/rounds/{r}/progress      {"peerId","samples","target"} -> ProgressView
//   POST   /v1/stages/{s}/rounds/{r}/attempts/{a}/join   Member + "gatherSeconds"
//                                                  -> 200 {"joined": true} | 409 {"error": "round closed"}
//   GET    /v1/stages/{s}/rounds/{r}/attempts/{a}/group              -> GroupView
//   GET    /healthz                                                  -> {"status": "ok"}
//
// Errors are {"error": "<field>: <problem>, got <value>"} with 400 (bad input), 404 (no such
// path), 405 (wrong method), 413 (body too large) or 500 (a bug; logged).
#pragma once

#include <functional>
#include <mutex>
#include <string>

#include "planner/peer_table.h"
#include "planner/round_book.h"

namespace swarm::registry {

struct RegistryOptions {
  double peer_expiry_seconds = 15;
  // Seconds on a monotonic clock; defaults to std::chrono::steady_clock. Tests may inject one.
  std::function<double()> clock;
};

struct HttpReply {
  int status = 200;
  std::string body;  // JSON
};

class RegistryService {
 public:
  static constexpr size_t kMaxBodyBytes = 1 << 20;

  explicit RegistryService(RegistryOptions options);

  // `path` and `query` are as received (percent-encoded); `query` excludes the '?'.
  HttpReply handle(const std::string& method, const std::string& path, const std::string& query,
                   const std::string& body);

 private:
  double now() const;

  RegistryOptions options_;
  std::mutex mu_;
  planner::PeerTable peers_;
  planner::RoundBook rounds_;
};

}  // namespace swarm::registry
