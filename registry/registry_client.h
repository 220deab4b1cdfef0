// RegistryClient: Discovery + StepCoordinator over the registry's REST API (cpprest
// http_client). Every call is synchronous and bounded by the timeout given at construction.
// Thread-safe: calls may come from several threads at once.
//
// Every request is signed with the job secret (request_auth.h), with a time stamp on the
// registry's clock as last seen: each reply's X-Swarm-Time gives the offset between the two
// clocks. A request refused for its time stamp (the first one, from a peer whose clock is minutes
// off) is signed again with the offset that refusal gave, once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "registry/discovery.h"
#include "registry/event_ledger.h"

namespace swarm::registry {

// A failed registry call: network error (status() == 0), a non-2xx reply (status() is the HTTP
// status) or an unreadable reply. what() names the method, the URL and the status/error.
class RegistryError : public std::runtime_error {
 public:
  RegistryError(const std::string& message, int status);
  int status() const { return status_; }

 private:
  int status_;
};

class RegistryClient : public Discovery, public StepCoordinator {
 public:
  // `base_url` like "http://127.0.0.1:7400", or "file:PATH": a file whose first line is that URL.
  // The file is read now and again after every call that did not reach the registry, so a
  // registry started again at another address is found as soon as the file names it (whoever
  // starts it rewrites the file). On Kubernetes a plain URL with the registry Service's name
  // needs none of this: the Service keeps its address when the registry pod moves.
  // `secret`: the job secret, which signs every request. Empty: requests go unsigned, which only a
  // registry without a secret takes (in-process tests and benchmarks).
  // `unix_ms_clock`: this machine's Unix time in ms (system_clock by default; tests skew it).
  // Throws RegistryError if there is no http(s) URL.
  static constexpr const char* kAddressFilePrefix = "file:";
  using UnixMsClock = std::function<int64_t()>;
  RegistryClient(std::string base_url, std::chrono::milliseconds timeout, const std::string& secret,
                 UnixMsClock unix_ms_clock = {});
  ~RegistryClient() override;

  // Discovery. The record's last_seen is not sent; peers() returns it as Unix time (seconds).
  AnnounceReply announce(const planner::PeerRecord& rec) override;
  void withdraw(const std::string& peer_id, bool settled) override;
  std::vector<planner::PeerRecord> peers(const std::string& role = "", int stage = -1) override;

  // StepCoordinator.
  planner::ProgressView report_progress(int stage, int64_t step, const std::string& peer,
                                        int64_t samples, int64_t target,
                                        int64_t admitted) override;
  planner::ProgressView claim(int stage, int64_t step, const std::string& peer,
                              const planner::ClaimRequest& request, int64_t target) override;
  bool join_step(int stage, int64_t step, int attempt, const planner::Member& m,
                 double gather_seconds) override;
  planner::GroupView step_group(int stage, int64_t step, int attempt) override;
  planner::GroupView restore_group(int stage, int64_t step, int attempt,
                                   const std::vector<planner::Member>& members) override;

  // Counts `count` occurrences of `kind` (e.g. "checkpoint_restores") in the registry's stats.
  void add_event(const std::string& kind, int64_t count);
  // The same for an EventLedger's entry of `peer_id`: a resend of one the registry applied
  // already is not counted again (the registry keeps each peer's highest sequence).
  void add_event(const LedgerEntry& entry, const std::string& peer_id);
  // GET /v1/stats: {"rebalanceMoves", "events": {kind: count}, "assignments": {peer: stage},
  // "stageSteps": {stage: newest step}, "failure": {...} (absent while healthy)}.
  nlohmann::json stats();
  // Progress of 0 samples for (stage, step) with "dropped": this peer dropped `dropped` samples of
  // its gradient of that step; the registry counts them in samples_lost (once).
  void report_dropped(int stage, int64_t step, const std::string& peer, int64_t target, int64_t dropped);
  // POST /v1/failure: the job cannot go on (reason "StageReset", ...); the registry keeps the first.
  void report_failure(const std::string& reason, int stage, int64_t step, const std::string& message);

  // GET /healthz: true when the registry answers 200 within the timeout; never throws.
  bool healthy();

  // The URL in use (it changes when the address file names a new one).
  std::string base_url() const;
  // The registry's clock minus ours, in ms, as the last reply said (0 before any).
  int64_t clock_offset_ms() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace swarm::registry
