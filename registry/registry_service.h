// RegistryService: the registry's REST semantics without a transport. RegistryServer feeds it
// every HTTP request; tests may call handle() directly. Thread-safe: one mutex (mu_) guards all
// of the registry's state (the PeerTable, the StepBook, the counters, the metrics); handle() may
// be called from any number of threads.
//
//   PUT    /v1/peers/{peerId}                      body PeerRecord   -> {"expiresInSeconds": x,
//                                                                       "assignedStage": s (when moved)}
//   DELETE /v1/peers/{peerId}[?settled=true]                         -> {"removed": bool}
//          without settled=true the peer is taken for dead: the samples it reported for a step
//          that it did not average (StepBook::abandon) count as events "samples_lost", and it
//          counts in "peers_lost"; the same happens when a worker's record expires
//   GET    /v1/peers[?role=worker|trainer][&stage=N]                 -> {"peers": [PeerRecord...]}
//          (each record's text is kept between its heartbeats: peer_listing.h)
//   POST   /v1/stages/{s}/steps/{r}/progress      {"peerId","samples","target"[,"admitted"][,"want"]
//                                                  [,"unit"][,"transfers"][,"dropped"]}: the peer's counts
//                                                  and the claim it asks for (planner/step_book.h, Claims;
//                                                  wire.h). "dropped": the peer dropped that many samples of
//                                                  its gradient of step r (it fell behind): counted in
//                                                  "samples_lost" unless already counted when it expired
//                                                  -> ProgressView (admitted >= samples; default samples;
//                                                     "granted": the peer's claim) + "newestStep": the
//                                                     stage's newest step in the book. Nothing is granted
//                                                     while membership is not known (below); retries of a
//                                                     gone peer's work granted fresh samples count as
//                                                     "samples_readmitted"; a group frozen without
//                                                     work gone peers owed its step counts those
//                                                     samples as "samples_unretried" (GET .../group)
//   POST   /v1/stages/{s}/steps/{r}/attempts/{a}/join   Member + "gatherSeconds"
//                                                  -> 200 {"joined": true} | 409 {"error": "step closed",
//                                                     "newestStep": the stage's newest step}
//   GET    /v1/stages/{s}/steps/{r}/attempts/{a}/group              -> GroupView
//   PUT    /v1/stages/{s}/steps/{r}/attempts/{a}/group  {"members": [Member...]} -> GroupView
//                                                  a member of a group it saw Ready re-tells it while
//                                                  it averages: a registry restarted since then adopts
//                                                  it (planner/step_book.h, Restarts)
//   POST   /v1/events                              {"kind","count"[,"peerId","seq"]} -> {"duplicate":
//                                                  bool} (counts what peers report: checkpoint restores,
//                                                  lost samples, hand-offs...). With peerId and seq (a
//                                                  peer's EventLedger, registry/event_ledger.h) a seq at
//                                                  or below the peer's highest applied is a resend of
//                                                  one counted already: not counted again
//   POST   /v1/failure                             {"reason","stage","step","message"} -> {"failure": the
//                                                  job's failure}: a worker says the job cannot go on
//                                                  (reason "StageReset": its stage came back with neither
//                                                  a live peer nor a checkpoint after the job trained);
//                                                  the first report stands
//   GET    /v1/stats                                                 -> {"rebalanceMoves", "events",
//                                                                        "assignments", "stageSteps":
//                                                                        {stage: newest step seen},
//                                                                        "stageOpenSamples": {stage: the
//                                                                        claims of that step},
//                                                                        "failure": {"reason", "stage",
//                                                                        "step", "message"} (absent while
//                                                                        healthy)}
//   GET    /metrics                                                  -> Prometheus text format
//          (prometheus-cpp; registry_metrics.h): swarm_rebalance_moves_total,
//          swarm_registry_auth_failures_total{reason},
//          swarm_swarm_events_total{kind}, swarm_registry_peers{role,stage,state}, swarm_job_failed
//          (0/1), swarm_stage_reset_total, swarm_registry_stage_workers{stage} (with num_stages)
//   GET    /healthz                                                  -> {"status": "ok"}
//
// Authentication (request_auth.h): with `secret` set, every request but GET /healthz, /metrics and
// /v1/stats must carry an Authorization header signed with the job secret; one without a valid
// one gets 401 {"error": "authorization...: <problem>, got <value>", "reason": missing | malformed |
// bad_signature | timestamp | replayed} (503, reason cache_full, when the nonce memory is full) and
// changes nothing. The three stay open because they are read-only and say nothing a peer could act
// on: liveness, and the same counters /metrics exports to Prometheus (which scrapes without the
// secret). Refusals are counted in swarm_registry_auth_failures_total{reason} and logged (a warning
// at most every 10 s, with the number left unlogged). Every reply, refusals included, carries
// X-Swarm-Time: the registry's Unix ms, from which clients estimate its clock.
//
// Rebalancing: with `num_stages` and `rebalance` set, every heartbeat lets the planner's
// Rebalancer look at the live workers' loads (queue length, samples/s); a planned move is
// handed to the moved worker as "assignedStage" in its heartbeat replies until it announces
// itself on that stage. One move is in flight at a time. Nothing moves while no trainer is live
// (no work to balance), nor in the first period after start unless the swarm is settled (every
// stage has a serving worker, none is joining, every worker has measured its capacity).
//
// Errors are {"error": "<field>: <problem>, got <value>"} with 400 (bad input), 404 (no such
// path), 405 (wrong method), 413 (body too large) or 500 (a bug; logged).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <deque>
#include <map>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/thread_annotations.h"
#include "planner/peer_table.h"
#include "planner/rebalance.h"
#include "planner/step_book.h"
#include "registry/peer_listing.h"
#include "registry/request_auth.h"

namespace swarm::registry {

class RegistryMetrics;

struct RegistryOptions {
  double peer_expiry_seconds = 15;
  // Seconds on a monotonic clock; defaults to std::chrono::steady_clock. Tests may inject one.
  std::function<double()> clock;
  int num_stages = 0;                                // needed for rebalancing
  std::optional<planner::RebalanceOptions> rebalance;  // unset = no rebalancing
  // The job secret: requests must be signed with it (see above). Empty: no authentication, for
  // in-process tests and benchmarks only; `swarm registry` always sets it.
  std::string secret;
  size_t auth_nonce_capacity = auth::kDefaultNonceCapacity;
  // Unix time in ms: the clock time stamps are checked against and X-Swarm-Time reports.
  // Defaults to std::chrono::system_clock. Tests may inject one.
  std::function<int64_t()> unix_ms_clock;
};

struct HttpReply {
  int status = 200;
  std::string body;  // JSON, or the Prometheus text format for /metrics
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers{};  // more reply headers (WWW-Authenticate, ...)
};

class RegistryService {
 public:
  static constexpr size_t kMaxBodyBytes = 1 << 20;

  explicit RegistryService(RegistryOptions options);
  ~RegistryService();

  // `path` and `query` are as received (percent-encoded); `query` excludes the '?'.
  // `authorization`: the request's Authorization header ("" when it has none).
  HttpReply handle(const std::string& method, const std::string& path, const std::string& query,
                   const std::string& body, const std::string& authorization = "") EXCLUDES(mu_);

  // The registry's Unix time in ms (options' unix_ms_clock): the X-Swarm-Time of every reply.
  int64_t unix_now_ms() const;

 private:
  // One request, with the parameters its route's path pattern captures (parsed and checked).
  struct Request {
    Request(const std::string& m, const std::string& p, const std::string& q, const std::string& b)
        : method(m), path(p), query(q), body(b) {}
    const std::string& method;
    const std::string& path;
    const std::string& query;  // percent-encoded, without the '?'
    const std::string& body;
    std::string peer_id;  // {peerId}
    int stage = -1;       // {stage}
    int64_t step = 0;     // {step}
    int attempt = 0;      // {attempt}
  };
  using Handler = HttpReply (RegistryService::*)(const Request&);
  // A route: method + path pattern ("/v1/peers/{peerId}": literal segments and captures) ->
  // handler. handle() finds the routes whose pattern fits the path (404 if none), parses the
  // captures (400 if one is bad, whatever the method), then picks the route of the method (405 if
  // none, naming the methods the path has).
  struct Route {
    Route(std::string method, const std::string& pattern, Handler handler, bool open = false);
    std::string method;
    std::vector<std::string> segments;  // the pattern split at '/'
    Handler handler;
    bool open;  // served without authentication (read-only: /healthz, /metrics, /v1/stats)
  };
  static const std::vector<Route>& routes();
  // Parses the path segments that `pattern` captures into `req`; throws BadField.
  static void bind(const std::vector<std::string>& pattern, const std::vector<std::string>& seg, Request& req);

  // With a secret: nullopt when the request's Authorization proves it, else the refusal (401, or
  // 503 when the nonce memory is full), counted and logged (registry_auth.cc).
  std::optional<HttpReply> refusal(const Request& req, const std::string& authorization) EXCLUDES(mu_);

  // The handlers, one per route. Each takes mu_ itself, after validating its input.
  HttpReply get_metrics(const Request& req) EXCLUDES(mu_);
  HttpReply get_healthz(const Request& req) EXCLUDES(mu_);
  HttpReply list_peers(const Request& req) EXCLUDES(mu_);
  HttpReply put_peer(const Request& req) EXCLUDES(mu_);
  HttpReply delete_peer(const Request& req) EXCLUDES(mu_);
  HttpReply post_event(const Request& req) EXCLUDES(mu_);
  HttpReply post_failure(const Request& req) EXCLUDES(mu_);
  HttpReply get_stats(const Request& req) EXCLUDES(mu_);
  HttpReply post_progress(const Request& req) EXCLUDES(mu_);
  HttpReply post_join(const Request& req) EXCLUDES(mu_);
  HttpReply get_group(const Request& req) EXCLUDES(mu_);
  HttpReply put_group(const Request& req) EXCLUDES(mu_);

  // Counts `count` events of `kind`: in /v1/stats ("events") and in /metrics.
  void count_event_locked(const std::string& kind, int64_t count) REQUIRES(mu_);
  // Counts `dropped` samples of `peer`'s gradient of (stage, step) as "samples_lost", less what
  // was counted already when it expired.
  void count_dropped_locked(const std::string& peer, int stage, int64_t step, int64_t dropped) REQUIRES(mu_);
  double now() const;
  void maybe_rebalance(double t) REQUIRES(mu_);
  // Drops expired peers, counting what dead workers held (lose_locked).
  void expire_locked(double t) REQUIRES(mu_);
  // A worker is gone without settling: its unaveraged samples count as "samples_lost" and it
  // counts in "peers_lost".
  void lose_locked(const planner::PeerRecord& rec) REQUIRES(mu_);
  // False while this registry may not have heard every live peer: it was started (restarted)
  // mid-run (the first step it heard of a stage was past 0), less than one peer expiry ago. Until then a group is
  // complete only when its gather window ends: a peer not yet re-announced is not left out.
  bool membership_known_locked(double t) const REQUIRES(mu_);
  // A step a peer of `stage` reported (heartbeat, progress, join, restore).
  void note_step_locked(int stage, int64_t step) REQUIRES(mu_);

  RegistryOptions options_;  // set in the constructor, read-only after: no lock
  std::unique_ptr<auth::Verifier> verifier_;  // null without a secret; thread-safe itself
  // mu_ guards every member below. Handlers validate their input without it, then hold it for the
  // rest of the request; the *_locked helpers and maybe_rebalance expect it held.
  swarm::Mutex mu_;
  planner::PeerTable peers_ GUARDED_BY(mu_);
  PeerListing listing_ GUARDED_BY(mu_);  // the text of every record in peers_ (peer_listing.h): changed with it
  std::unique_ptr<RegistryMetrics> metrics_ PT_GUARDED_BY(mu_);  // the object is fixed; its contents guarded by mu_
  planner::StepBook steps_ GUARDED_BY(mu_);
  std::unique_ptr<planner::Rebalancer> rebalancer_ PT_GUARDED_BY(mu_);
  std::map<std::string, int> assignments_ GUARDED_BY(mu_);  // worker -> stage it was told to move to
  int64_t rebalance_moves_ GUARDED_BY(mu_) = 0;
  double started_at_ GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t> events_ GUARDED_BY(mu_);
  std::map<int, int64_t> stage_step_high_ GUARDED_BY(mu_);   // newest step any peer reported progress in, per stage
  std::map<int, int64_t> stage_step_first_ GUARDED_BY(mu_);  // the step this registry first heard of, per stage
  nlohmann::json failure_ GUARDED_BY(mu_);                   // null while healthy; the first failure reported
  int64_t stage_resets_ GUARDED_BY(mu_) = 0;
  std::map<std::string, std::pair<int, int64_t>> last_progress_ GUARDED_BY(mu_);  // peer -> (stage, step) it last reported
  // peer -> (stage, step, samples) counted lost when it expired
  std::map<std::string, std::tuple<int, int64_t, int64_t>> counted_lost_ GUARDED_BY(mu_);
  // Per peer, the highest event sequence applied (POST /v1/events with a seq). At most
  // kMaxEventPeers peers are remembered; beyond it the oldest entry goes (a peer that quiet for
  // that long has long stopped resending).
  static constexpr size_t kMaxEventPeers = 65536;
  std::map<std::string, int64_t> event_seq_ GUARDED_BY(mu_);
  std::deque<std::string> event_seq_order_ GUARDED_BY(mu_);
  double refusal_logged_at_ GUARDED_BY(mu_) = -1e18;  // when a refusal was last logged (now())
  int64_t refusals_unlogged_ GUARDED_BY(mu_) = 0;     // refusals since, not logged
};

}  // namespace swarm::registry
