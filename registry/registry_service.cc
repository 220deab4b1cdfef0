#include "registry/registry_service.h"

#include <cctype>
#include <chrono>
#include <tuple>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "registry/registry_metrics.h"
#include "registry/wire.h"

namespace swarm::registry {
namespace {

using wire::BadField;
using wire::json;

constexpr int64_t kMaxStage = 1 << 20;
constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxAttempt = std::numeric_limits<int>::max();
constexpr double kMaxGatherSeconds = 3600;

HttpReply reply(int status, const json& body) {
  return HttpReply{status, body.dump(-1, ' ', false, json::error_handler_t::replace)};
}
HttpReply error(int status, const std::string& message) {
  return reply(status, json{{"error", message}});
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes one path segment or query component (`plus_is_space` for queries).
std::string decode(const std::string& s, const std::string& field, bool plus_is_space) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      int hi = i + 2 < s.size() ? hex(s[i + 1]) : -1;
      int lo = hi >= 0 ? hex(s[i + 2]) : -1;
      if (lo < 0) throw BadField(field, "malformed percent-encoding", wire::describe(json(s)));
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (plus_is_space && s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<std::string> path_segments(const std::string& path) {
  std::vector<std::string> out;
  for (const std::string& seg : split(path, '/')) {
    if (!seg.empty()) out.push_back(decode(seg, "path", false));
  }
  return out;
}

std::string path_peer_id(const std::string& segment) {
  if (!wire::valid_peer_id(segment)) {
    throw BadField("peerId", "must be 1-128 characters of [A-Za-z0-9._-]",
                   wire::describe(json(segment)));
  }
  return segment;
}

}  // namespace

RegistryService::RegistryService(RegistryOptions options)
    : options_(std::move(options)),
      peers_(options_.peer_expiry_seconds),
      metrics_(std::make_unique<RegistryMetrics>(options_.num_stages)) {
  if (options_.rebalance && options_.num_stages > 1)
    rebalancer_ = std::make_unique<planner::Rebalancer>(*options_.rebalance);
  if (!options_.clock) {
    options_.clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
  if (!options_.unix_ms_clock) {
    options_.unix_ms_clock = [] {
      return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count());
    };
  }
  if (!options_.secret.empty())
    verifier_ = std::make_unique<auth::Verifier>(options_.secret, options_.auth_nonce_capacity);
  started_at_ = now();
}

int64_t RegistryService::unix_now_ms() const { return options_.unix_ms_clock(); }

RegistryService::~RegistryService() = default;

double RegistryService::now() const { return options_.clock(); }

void RegistryService::count_event_locked(const std::string& kind, int64_t count) {
  events_[kind] += count;
  metrics_->add_event(kind, count);
}

bool RegistryService::membership_known_locked(double t) const {
  if (t - started_at_ >= options_.peer_expiry_seconds) return true;
  // A stage first heard of past step 0 means this registry started mid-run (a restart): peers it
  // has not heard yet may hold gradient of the step. A stage it watched from step 0 has told it
  // every peer since (a fresh job's first steps must not wait out the expiry period).
  for (const auto& [stage, step] : stage_step_first_)
    if (step > 0) return false;
  return true;
}

void RegistryService::note_step_locked(int stage, int64_t step) {
  auto& high = stage_step_high_[stage];
  high = std::max(high, step);
  stage_step_first_.emplace(stage, step);
}

void RegistryService::expire_locked(double t) {
  for (const auto& rec : peers_.expire(t)) {
    listing_.erase(rec.peer_id);
    lose_locked(rec);
  }
}

void RegistryService::lose_locked(const planner::PeerRecord& rec) {
  if (rec.role != "worker" || rec.stage < 0) return;
  int64_t owed = 0;
  const int64_t lost = steps_.abandon(rec.stage, rec.peer_id, now(), &owed);
  count_event_locked("peers_lost", 1);
  spdlog::info("registry: worker {} of stage {} lost (expired or withdrawn by its launcher); {} samples of its "
               "claim on the step were owed work, retried on the stage's other peers",
               rec.peer_id, rec.stage, owed);
  if (lost <= 0) return;
  // Should the peer come back (it was frozen, not dead) and drop that gradient itself, it must not
  // count it again (see "dropped" in the progress handler).
  if (auto it = last_progress_.find(rec.peer_id); it != last_progress_.end())
    counted_lost_[rec.peer_id] = {it->second.first, it->second.second, lost};
  count_event_locked("samples_lost", lost);
  spdlog::warn("registry: worker {} of stage {} is gone with {} samples of gradient not averaged: "
               "counted as lost",
               rec.peer_id, rec.stage, lost);
}

void RegistryService::maybe_rebalance(double t) {
  if (!rebalancer_ || !assignments_.empty()) return;
  // Without a live trainer there is no work to balance (before training starts, or while the job
  // shuts down and its workers drain one by one).
  if (peers_.live(t, "trainer").empty()) return;
  std::vector<planner::PeerLoad> loads;
  std::vector<bool> served(static_cast<size_t>(options_.num_stages), false);
  bool settled = true;  // every stage served, nobody joining, every capacity measured
  for (const auto& p : peers_.live(t, "worker")) {
    if (p.state == planner::PeerState::Draining) continue;
    const bool joining = p.state == planner::PeerState::Joining;
    loads.push_back({p.peer_id, p.stage, static_cast<double>(p.queue_length), p.samples_per_second,
                     joining, p.region});
    if (joining || !(p.samples_per_second > 0)) settled = false;
    if (!joining && p.stage >= 0 && p.stage < options_.num_stages)
      served[static_cast<size_t>(p.stage)] = true;
  }
  for (bool s : served) settled = settled && s;
  // The first period after start is for workers to register: a stage that looks empty then is
  // only late, and moving a peer into it would unbalance the swarm it is about to have. The wait
  // ends early once the swarm is settled: then the stages are what they are and every reading is
  // a measurement, not a guess, and an imbalanced start is fixed one period sooner.
  if (t - started_at_ < options_.rebalance->period_seconds && !settled) return;
  auto move = rebalancer_->plan(loads, options_.num_stages, t);
  if (!move) return;
  rebalancer_->record_move(*move, t);
  assignments_[move->peer_id] = move->to_stage;
  ++rebalance_moves_;
  metrics_->add_rebalance_move();
  spdlog::info("registry: rebalance: {} stage {} -> {} (bottleneck {:.1f} -> {:.1f} samples/s): {}",
               move->peer_id, move->from_stage, move->to_stage, move->bottleneck_before,
               move->bottleneck_after, move->reason);
}

// --- Routing -------------------------------------------------------------------------------------

RegistryService::Route::Route(std::string m, const std::string& pattern, Handler h, bool o)
    : method(std::move(m)), segments(split(pattern.substr(1), '/')), handler(h), open(o) {}

const std::vector<RegistryService::Route>& RegistryService::routes() {
  static const std::vector<Route> table = {
      // Open: read-only, nothing a peer could act on (registry_service.h, Authentication).
      {"GET", "/metrics", &RegistryService::get_metrics, /*open=*/true},
      {"GET", "/healthz", &RegistryService::get_healthz, /*open=*/true},
      {"GET", "/v1/stats", &RegistryService::get_stats, /*open=*/true},
      {"GET", "/v1/peers", &RegistryService::list_peers},
      {"PUT", "/v1/peers/{peerId}", &RegistryService::put_peer},
      {"DELETE", "/v1/peers/{peerId}", &RegistryService::delete_peer},
      {"POST", "/v1/events", &RegistryService::post_event},
      {"POST", "/v1/failure", &RegistryService::post_failure},
      {"POST", "/v1/stages/{stage}/steps/{step}/progress", &RegistryService::post_progress},
      {"POST", "/v1/stages/{stage}/steps/{step}/attempts/{attempt}/join", &RegistryService::post_join},
      {"GET", "/v1/stages/{stage}/steps/{step}/attempts/{attempt}/group", &RegistryService::get_group},
      {"PUT", "/v1/stages/{stage}/steps/{step}/attempts/{attempt}/group", &RegistryService::put_group},
  };
  return table;
}

namespace {

bool is_capture(const std::string& pattern_segment) {
  return pattern_segment.size() > 2 && pattern_segment.front() == '{' && pattern_segment.back() == '}';
}

// Whether the path's segments have the pattern's shape: as many, and every literal equal.
bool fits(const std::vector<std::string>& pattern, const std::vector<std::string>& seg) {
  if (pattern.size() != seg.size()) return false;
  for (size_t i = 0; i < seg.size(); ++i)
    if (!is_capture(pattern[i]) && pattern[i] != seg[i]) return false;
  return true;
}

}  // namespace

void RegistryService::bind(const std::vector<std::string>& pattern, const std::vector<std::string>& seg,
                           Request& req) {
  for (size_t i = 0; i < seg.size(); ++i) {
    if (!is_capture(pattern[i])) continue;
    const std::string name = pattern[i].substr(1, pattern[i].size() - 2);
    if (name == "peerId") {
      req.peer_id = path_peer_id(seg[i]);
    } else if (name == "stage") {
      req.stage = static_cast<int>(wire::parse_path_int(seg[i], "stage", kMaxStage));
    } else if (name == "step") {
      req.step = wire::parse_path_int(seg[i], "step", kMaxI64);
    } else if (name == "attempt") {
      req.attempt = static_cast<int>(wire::parse_path_int(seg[i], "attempt", kMaxAttempt));
    } else {
      throw std::logic_error("route capture {" + name + "} has no parser");
    }
  }
}

HttpReply RegistryService::handle(const std::string& method, const std::string& path,
                                  const std::string& query, const std::string& body,
                                  const std::string& authorization) {
  try {
    if (body.size() > kMaxBodyBytes) {
      return error(413, "body: larger than " + std::to_string(kMaxBodyBytes) + " bytes, got " +
                            std::to_string(body.size()));
    }
    const std::vector<std::string> seg = path_segments(path);
    std::vector<const Route*> fitting;  // the routes of this path, one per method
    bool open = false;                  // the route of this method and path is open
    for (const Route& r : routes()) {
      if (!fits(r.segments, seg)) continue;
      fitting.push_back(&r);
      open = open || (r.open && r.method == method);
    }
    Request req{method, path, query, body};
    // Who may ask comes first: an unsigned request learns nothing of paths or parameters.
    if (verifier_ && !open) {
      if (auto refused = refusal(req, authorization)) return *refused;
    }
    if (fitting.empty()) return error(404, "path: no such resource, got " + wire::describe(json(path)));
    // The path's parameters are checked before the method: a bad one is a 400 whatever the method.
    bind(fitting.front()->segments, seg, req);
    std::string allowed;
    for (const Route* r : fitting) {
      if (r->method == method) return (this->*(r->handler))(req);
      allowed += (allowed.empty() ? "" : " or ") + r->method;
    }
    return error(405, "method: " + allowed + " only on this path, got " + wire::describe(json(method)));
  } catch (const BadField& e) {
    return error(400, e.what());
  } catch (const std::exception& e) {
    spdlog::error("registry: {} {} failed: {}", method, path, e.what());
    return error(500, std::string("internal: ") + e.what() + ", got " + method + " " + path);
  }
}

// --- Handlers ------------------------------------------------------------------------------------

HttpReply RegistryService::get_metrics(const Request&) {
  swarm::MutexLock lock(mu_);
  const double t = now();
  RegistryMetrics::Census census;
  for (const auto& p : peers_.live(t)) census[{p.role, p.stage, planner::to_string(p.state)}]++;
  metrics_->set_census(census);
  return HttpReply{200, metrics_->exposition(), "text/plain; version=0.0.4"};
}

HttpReply RegistryService::get_healthz(const Request&) { return reply(200, json{{"status", "ok"}}); }

namespace {

// GET /v1/peers' filters: role ("" = any) and stage (-1 = any); unknown parameters are ignored.
std::pair<std::string, int> peer_filters(const std::string& query) {
  std::string role;
  int stage = -1;
  for (const std::string& kv : split(query, '&')) {
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    std::string key = decode(kv.substr(0, eq), "query", true);
    std::string value = eq == std::string::npos ? "" : decode(kv.substr(eq + 1), key, true);
    if (key == "role") {
      if (value != "worker" && value != "trainer") {
        throw BadField("role", "must be \"worker\" or \"trainer\"", wire::describe(json(value)));
      }
      role = value;
    } else if (key == "stage") {
      stage = static_cast<int>(wire::parse_path_int(value, "stage", kMaxStage));
    }
  }
  return {role, stage};
}

// DELETE /v1/peers/{id}'s ?settled=true|false (default false).
bool settled_flag(const std::string& query) {
  bool settled = false;
  for (const std::string& kv : split(query, '&')) {
    const size_t eq = kv.find('=');
    if (kv.empty() || decode(kv.substr(0, eq), "query", true) != "settled") continue;
    const std::string value = eq == std::string::npos ? "" : decode(kv.substr(eq + 1), "settled", true);
    if (value != "true" && value != "false")
      throw BadField("settled", "must be \"true\" or \"false\"", wire::describe(json(value)));
    settled = value == "true";
  }
  return settled;
}

bool valid_event_kind(const std::string& k) {
  if (k.empty() || k.size() > 64) return false;
  for (char c : k)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return true;
}

}  // namespace

HttpReply RegistryService::list_peers(const Request& req) {
  const auto [role, stage] = peer_filters(req.query);
  swarm::MutexLock lock(mu_);
  const double t = now();
  expire_locked(t);
  const double unix_now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Every stored record is live after expire_locked(t): the listing is peers_.live(t, role, stage),
  // lastSeen reported in Unix time, not our clock.
  return HttpReply{200, listing_.render(role, stage, t, unix_now)};
}

HttpReply RegistryService::put_peer(const Request& req) {
  planner::PeerRecord rec = wire::peer_from_json(wire::parse_object(req.body), req.peer_id);
  swarm::MutexLock lock(mu_);
  const double t = now();
  expire_locked(t);
  const bool worker = rec.role == "worker";
  const int stage = rec.stage;
  // A serving worker's step is one its stage reached. After a restart this registry
  // knows nothing of the job's steps: the first heartbeats give them back (stageSteps).
  if (worker && stage >= 0 && rec.state != planner::PeerState::Joining && rec.state != planner::PeerState::Failed) {
    note_step_locked(stage, rec.step);
  }
  listing_.put(rec, t);
  peers_.upsert(std::move(rec), t);
  auto it = assignments_.find(req.peer_id);
  if (it != assignments_.end() && (!worker || it->second == stage)) assignments_.erase(it);
  if (worker) maybe_rebalance(t);
  json out{{"expiresInSeconds", options_.peer_expiry_seconds}};
  it = assignments_.find(req.peer_id);
  if (it != assignments_.end()) out["assignedStage"] = it->second;
  return reply(200, out);
}

HttpReply RegistryService::delete_peer(const Request& req) {
  // ?settled=true: the peer itself leaves and has handed off (or counted) its gradient.
  // Otherwise someone withdraws a dead peer: what it held is lost (lose_locked).
  const bool settled = settled_flag(req.query);
  swarm::MutexLock lock(mu_);
  assignments_.erase(req.peer_id);
  if (!settled) {
    if (auto rec = peers_.stored(req.peer_id)) lose_locked(*rec);
  }
  listing_.erase(req.peer_id);
  return reply(200, json{{"removed", peers_.remove(req.peer_id)}});
}

HttpReply RegistryService::post_event(const Request& req) {
  const json j = wire::parse_object(req.body);
  if (!j.contains("kind") || !j.at("kind").is_string() || !valid_event_kind(j.at("kind").get<std::string>()))
    throw BadField("kind", "must be 1-64 characters of [a-z0-9_]",
                   j.contains("kind") ? wire::describe(j.at("kind")) : "nothing");
  const int64_t count = wire::get_int(j, "count", 0, kMaxI64);
  const bool sequenced = j.contains("seq");
  const std::string peer = sequenced ? wire::get_peer_id(j, "peerId") : "";
  const int64_t seq = sequenced ? wire::get_int(j, "seq", 1, kMaxI64) : 0;
  swarm::MutexLock lock(mu_);
  if (sequenced) {
    auto [it, fresh] = event_seq_.emplace(peer, 0);
    if (fresh) {
      event_seq_order_.push_back(peer);
      if (event_seq_order_.size() > kMaxEventPeers) {
        event_seq_.erase(event_seq_order_.front());
        event_seq_order_.pop_front();
      }
    }
    if (seq <= it->second) return reply(200, json{{"duplicate", true}});
    it->second = seq;
  }
  count_event_locked(j.at("kind").get<std::string>(), count);
  return reply(200, json{{"duplicate", false}});
}

HttpReply RegistryService::post_failure(const Request& req) {
  const json j = wire::parse_object(req.body);
  if (!j.contains("reason") || !j.at("reason").is_string() || j.at("reason").get<std::string>().empty() ||
      j.at("reason").get<std::string>().size() > 64)
    throw BadField("reason", "must be a string of 1-64 characters",
                   j.contains("reason") ? wire::describe(j.at("reason")) : "nothing");
  const int64_t stage = wire::get_int(j, "stage", 0, kMaxStage);
  const int64_t step = wire::get_int(j, "step", 0, kMaxI64);
  std::string message = j.contains("message") && j.at("message").is_string() ? j.at("message").get<std::string>() : "";
  if (message.size() > 1024) message = message.substr(0, 1024);
  swarm::MutexLock lock(mu_);
  const std::string reason = j.at("reason").get<std::string>();
  if (reason == "StageReset") {
    ++stage_resets_;
    metrics_->add_stage_reset();
  }
  if (failure_.is_null()) {
    // The first failure stands: later reports are consequences of it.
    failure_ = json{{"reason", reason}, {"stage", stage}, {"step", step}, {"message", message}};
    metrics_->set_failed();
    spdlog::error("registry: the job failed: {} (stage {}, step {}): {}", reason, stage, step, message);
  }
  return reply(200, json{{"failure", failure_}});
}

HttpReply RegistryService::get_stats(const Request&) {
  swarm::MutexLock lock(mu_);
  json stage_steps = json::object();
  for (int st = 0; st < options_.num_stages; ++st)
    stage_steps[std::to_string(st)] = std::max<int64_t>(0, steps_.newest_step(st));
  for (const auto& [st, r] : stage_step_high_)
    stage_steps[std::to_string(st)] = std::max(r, stage_steps.value(std::to_string(st), int64_t{0}));
  // The claims of each stage's newest (open) step: with stageSteps and the trainers' completed
  // samples, the step invariant of the summary (worker/local/launcher.cc).
  json open_samples = json::object();
  for (const auto& [key, r] : stage_steps.items())
    open_samples[key] = steps_.claims(std::stoi(key), r.get<int64_t>());
  json out{{"rebalanceMoves", rebalance_moves_}, {"events", events_}, {"assignments", assignments_},
           {"stageSteps", stage_steps}, {"stageOpenSamples", open_samples}};
  if (!failure_.is_null()) out["failure"] = failure_;
  return reply(200, out);
}

void RegistryService::count_dropped_locked(const std::string& peer, int stage, int64_t step, int64_t dropped) {
  // The peer dropped its gradient of this step (it fell behind). Counted once: not if the
  // registry already counted it when the peer expired (a frozen peer coming back). It may have
  // computed more than it had reported when it froze: the rest counts now.
  auto it = counted_lost_.find(peer);
  if (it != counted_lost_.end() && std::get<0>(it->second) == stage && std::get<1>(it->second) == step) {
    count_event_locked("samples_lost", std::max<int64_t>(0, dropped - std::get<2>(it->second)));
    counted_lost_.erase(it);
  } else {
    count_event_locked("samples_lost", dropped);
  }
}

HttpReply RegistryService::post_progress(const Request& req) {
  const json j = wire::parse_object(req.body);
  const std::string peer = wire::get_peer_id(j, "peerId");
  const planner::ClaimRequest claim = wire::claim_from_json(j);
  const int64_t target = wire::get_int(j, "target", 1, kMaxI64);
  const int64_t dropped = wire::get_int_or(j, "dropped", 0, kMaxI64, 0);
  swarm::MutexLock lock(mu_);
  const double t = now();
  if (dropped > 0) count_dropped_locked(peer, req.stage, req.step, dropped);
  last_progress_[peer] = {req.stage, req.step};
  note_step_locked(req.stage, req.step);
  // A registry restarted a moment ago grants nothing until every live peer had its chance to
  // re-tell its claims (membership_known_locked): granted again, they would pass the target.
  const planner::ProgressView view =
      steps_.claim(req.stage, req.step, peer, claim, target, peers_, t, membership_known_locked(t));
  // Retries of a gone peer's work that took a fresh claim: the stage admitted those samples twice
  // (bench/soak.sh and the summary's step invariant account for them).
  if (view.readmitted > 0) count_event_locked("samples_readmitted", view.readmitted);
  json out = wire::to_json(view);
  // The stage's newest step: a peer whose step the book has finished without it learns how far
  // its stage got (worker/stage/membership.cc, resync).
  out["newestStep"] = steps_.newest_step(req.stage);
  return reply(200, out);
}

HttpReply RegistryService::post_join(const Request& req) {
  const json j = wire::parse_object(req.body);
  const planner::Member m = wire::member_from_json(j);
  const double gather = wire::get_number(j, "gatherSeconds", 0, kMaxGatherSeconds);
  swarm::MutexLock lock(mu_);
  const double t = now();
  // A join is a report of the step too: a registry restarted a moment ago may hear of the job's
  // steps first through one (membership_known_locked).
  note_step_locked(req.stage, req.step);
  if (steps_.join(req.stage, req.step, req.attempt, m, gather, t) == planner::JoinResult::Closed) {
    return reply(409, json{{"error", "step closed"}, {"newestStep", steps_.newest_step(req.stage)}});
  }
  return reply(200, json{{"joined", true}});
}

HttpReply RegistryService::get_group(const Request& req) {
  swarm::MutexLock lock(mu_);
  const double t = now();
  const planner::GroupView view = steps_.group(req.stage, req.step, req.attempt, peers_, t, membership_known_locked(t));
  // The step closed without work gone peers owed it: it averages that much less (counted once,
  // by the call that froze the group; the retries land in a later step).
  if (view.unretried > 0) count_event_locked("samples_unretried", view.unretried);
  return reply(200, wire::to_json(view));
}

HttpReply RegistryService::put_group(const Request& req) {
  const auto members = wire::members_from_json(wire::parse_object(req.body), /*restore=*/true);
  swarm::MutexLock lock(mu_);
  const double t = now();
  note_step_locked(req.stage, req.step);
  return reply(200, wire::to_json(steps_.restore(req.stage, req.step, req.attempt, members, t)));
}

}  // namespace swarm::registry
