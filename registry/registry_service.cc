#include "registry/registry_service.h"

#include <cctype>
#include <chrono>
#include <tuple>
#include <limits>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "registry/wire.h"

namespace swarm::registry {
namespace {

using wire::BadField;
using wire::json;

constexpr int64_t kMaxStage = 1 << 20;
constexpr int64_t kMaxRound = std::numeric_limits<int64_t>::max();
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
    : options_(std::move(options)), peers_(options_.peer_expiry_seconds) {
  if (options_.rebalance && options_.num_stages > 1)
    rebalancer_ = std::make_unique<planner::Rebalancer>(*options_.rebalance);
  if (!options_.clock) {
    options_.clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
  started_at_ = now();
}

double RegistryService::now() const { return options_.clock(); }

bool RegistryService::membership_known_locked(double t) const {
  if (t - started_at_ >= options_.peer_expiry_seconds) return true;
  for (const auto& [stage, round] : stage_round_high_)
    if (round > 0) return false;
  return true;
}

void RegistryService::expire_locked(double t) {
  for (const auto& rec : peers_.expire(t)) lose_locked(rec);
}

void RegistryService::lose_locked(const planner::PeerRecord& rec) {
  if (rec.role != "worker" || rec.stage < 0) return;
  const int64_t lost = rounds_.abandon(rec.stage, rec.peer_id);
  events_["peers_lost"] += 1;
  spdlog::info("registry: worker {} of stage {} lost (expired or withdrawn by its launcher)", rec.peer_id,
               rec.stage);
  if (lost <= 0) return;
  // Should the peer come back (it was frozen, not dead) and drop that gradient itself, it must not
  // count it again (see "dropped" in the progress handler).
  if (auto it = last_progress_.find(rec.peer_id); it != last_progress_.end())
    counted_lost_[rec.peer_id] = {it->second.first, it->second.second, lost};
  events_["samples_lost"] += lost;
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
    if (p.state == "draining") continue;
    const bool joining = p.state == "joining";
    loads.push_back({p.peer_id, p.stage, static_cast<double>(p.queue_length), p.samples_per_second,
                     joining});
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
  spdlog::info("registry: rebalance: {} stage {} -> {} (bottleneck {:.1f} -> {:.1f} samples/s): {}",
               move->peer_id, move->from_stage, move->to_stage, move->bottleneck_before,
               move->bottleneck_after, move->reason);
}

HttpReply RegistryService::handle(const std::string& method, const std::string& path,
                                  const std::string& query, const std::string& body) {
  try {
    if (body.size() > kMaxBodyBytes) {
      return error(413, "body: larger than " + std::to_string(kMaxBodyBytes) + " bytes, got " +
                            std::to_string(body.size()));
    }
    const std::vector<std::string> seg = path_segments(path);
    const size_t n = seg.size();
    auto wrong_method = [&](const char* allowed) {
      return error(405, "method: " + std::string(allowed) + " only on this path, got " +
                            wire::describe(json(method)));
    };

    if (n == 1 && seg[0] == "metrics") {
      if (method != "GET") return wrong_method("GET");
      std::lock_guard<std::mutex> lock(mu_);
      const double t = now();
      std::map<std::tuple<std::string, int, std::string>, int> census;
      for (const auto& p : peers_.live(t)) census[{p.role, p.stage, p.state}]++;
      std::string out =
          "# HELP swarm_rebalance_moves_total Stage moves planned by the rebalancer\n"
          "# TYPE swarm_rebalance_moves_total counter\n"
          "swarm_rebalance_moves_total " + std::to_string(rebalance_moves_) + "\n"
          "# HELP swarm_swarm_events_total Events reported by peers and the launcher (preemptions, "
          "checkpoint restores, lost samples, hand-offs, re-syncs, state downloads)\n"
          "# TYPE swarm_swarm_events_total counter\n";
      for (const auto& [kind, count] : events_)
        out += "swarm_swarm_events_total{kind=\"" + kind + "\"} " + std::to_string(count) + "\n";
      out += "# HELP swarm_registry_peers Live peers by role, stage and state\n"
             "# TYPE swarm_registry_peers gauge\n";
      for (const auto& [key, count] : census)
        out += "swarm_registry_peers{role=\"" + std::get<0>(key) + "\",stage=\"" + std::to_string(std::get<1>(key)) +
               "\",state=\"" + std::get<2>(key) + "\"} " + std::to_string(count) + "\n";
      out += "# HELP swarm_job_failed 1 once the job failed (a stage came back without its state while others "
             "had trained: reason StageReset); see GET /v1/stats \"failure\"\n"
             "# TYPE swarm_job_failed gauge\n"
             "swarm_job_failed " + std::string(failure_.is_null() ? "0" : "1") + "\n"
             "# HELP swarm_stage_reset_total Stages that came back without their state (no live peer, no "
             "checkpoint) after the job had trained\n"
             "# TYPE swarm_stage_reset_total counter\n"
             "swarm_stage_reset_total " + std::to_string(stage_resets_) + "\n";
      if (options_.num_stages > 0) {
        // Every stage of the job, 0 included: an empty stage stalls training, and a series that
        // is absent could not say so.
        std::vector<int> per_stage(static_cast<size_t>(options_.num_stages), 0);
        for (const auto& [key, count] : census)
          if (std::get<0>(key) == "worker" && std::get<1>(key) >= 0 && std::get<1>(key) < options_.num_stages)
            per_stage[static_cast<size_t>(std::get<1>(key))] += count;
        out += "# HELP swarm_registry_stage_workers Live workers per stage of the job (any state)\n"
               "# TYPE swarm_registry_stage_workers gauge\n";
        for (size_t st = 0; st < per_stage.size(); ++st)
          out += "swarm_registry_stage_workers{stage=\"" + std::to_string(st) + "\"} " +
                 std::to_string(per_stage[st]) + "\n";
      }
      return HttpReply{200, out, "text/plain; version=0.0.4"};
    }

    if (n == 1 && seg[0] == "healthz") {
      if (method != "GET") return wrong_method("GET");
      return reply(200, json{{"status", "ok"}});
    }

    if (n == 2 && seg[0] == "v1" && seg[1] == "peers") {
      if (method != "GET") return wrong_method("GET");
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
        }  // unknown parameters are ignored
      }
      std::lock_guard<std::mutex> lock(mu_);
      const double t = now();
      expire_locked(t);
      const double unix_now =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      json list = json::array();
      for (planner::PeerRecord rec : peers_.live(t, role, stage)) {
        rec.last_seen = unix_now - (t - rec.last_seen);  // report Unix time, not our clock
        list.push_back(wire::to_json(rec));
      }
      return reply(200, json{{"peers", list}});
    }

    if (n == 3 && seg[0] == "v1" && seg[1] == "peers") {
      const std::string id = path_peer_id(seg[2]);
      if (method == "PUT") {
        planner::PeerRecord rec = wire::peer_from_json(wire::parse_object(body), id);
        std::lock_guard<std::mutex> lock(mu_);
        const double t = now();
        expire_locked(t);
        const bool worker = rec.role == "worker";
        const int stage = rec.stage;
        // A serving worker's round is a step its stage reached. After a restart this registry
        // knows nothing of the job's rounds: the first heartbeats give them back (stageRounds).
        if (worker && stage >= 0 && rec.state != "joining" && rec.state != "failed") {
          auto& high = stage_round_high_[stage];
          high = std::max(high, rec.round);
        }
        peers_.upsert(std::move(rec), t);
        auto it = assignments_.find(id);
        if (it != assignments_.end() && (!worker || it->second == stage)) assignments_.erase(it);
        if (worker) maybe_rebalance(t);
        json out{{"expiresInSeconds", options_.peer_expiry_seconds}};
        it = assignments_.find(id);
        if (it != assignments_.end()) out["assignedStage"] = it->second;
        return reply(200, out);
      }
      if (method == "DELETE") {
        // ?settled=true: the peer itself leaves and has handed off (or counted) its gradient.
        // Otherwise someone withdraws a dead peer: what it held is lost (lose_locked).
        bool settled = false;
        for (const std::string& kv : split(query, '&')) {
          const size_t eq = kv.find('=');
          if (kv.empty() || decode(kv.substr(0, eq), "query", true) != "settled") continue;
          const std::string value = eq == std::string::npos ? "" : decode(kv.substr(eq + 1), "settled", true);
          if (value != "true" && value != "false")
            throw BadField("settled", "must be \"true\" or \"false\"", wire::describe(json(value)));
          settled = value == "true";
        }
        std::lock_guard<std::mutex> lock(mu_);
        assignments_.erase(id);
        if (!settled) {
          if (auto rec = peers_.stored(id)) lose_locked(*rec);
        }
        return reply(200, json{{"removed", peers_.remove(id)}});
      }
      return wrong_method("PUT or DELETE");
    }

    if (n == 2 && seg[0] == "v1" && seg[1] == "events") {
      if (method != "POST") return wrong_method("POST");
      const json j = wire::parse_object(body);
      auto valid_kind = [](const std::string& k) {
        if (k.empty() || k.size() > 64) return false;
        for (char c : k)
          if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_'))
            return false;
        return true;
      };
      if (!j.contains("kind") || !j.at("kind").is_string() || !valid_kind(j.at("kind").get<std::string>()))
        throw BadField("kind", "must be 1-64 characters of [a-z0-9_]",
                       j.contains("kind") ? wire::describe(j.at("kind")) : "nothing");
      const int64_t count = wire::get_int(j, "count", 0, kMaxRound);
      std::lock_guard<std::mutex> lock(mu_);
      events_[j.at("kind").get<std::string>()] += count;
      return reply(200, json::object());
    }
    if (n == 2 && seg[0] == "v1" && seg[1] == "failure") {
      if (method != "POST") return wrong_method("POST");
      const json j = wire::parse_object(body);
      if (!j.contains("reason") || !j.at("reason").is_string() || j.at("reason").get<std::string>().empty() ||
          j.at("reason").get<std::string>().size() > 64)
        throw BadField("reason", "must be a string of 1-64 characters",
                       j.contains("reason") ? wire::describe(j.at("reason")) : "nothing");
      const int64_t stage = wire::get_int(j, "stage", 0, kMaxStage);
      const int64_t step = wire::get_int(j, "step", 0, kMaxRound);
      std::string message = j.contains("message") && j.at("message").is_string() ? j.at("message").get<std::string>() : "";
      if (message.size() > 1024) message = message.substr(0, 1024);
      std::lock_guard<std::mutex> lock(mu_);
      const std::string reason = j.at("reason").get<std::string>();
      if (reason == "StageReset") ++stage_resets_;
      if (failure_.is_null()) {
        // The first failure stands: later reports are consequences of it.
        failure_ = json{{"reason", reason}, {"stage", stage}, {"step", step}, {"message", message}};
        spdlog::error("registry: the job failed: {} (stage {}, step {}): {}", reason, stage, step, message);
      }
      return reply(200, json{{"failure", failure_}});
    }
    if (n == 2 && seg[0] == "v1" && seg[1] == "stats") {
      if (method != "GET") return wrong_method("GET");
      std::lock_guard<std::mutex> lock(mu_);
      json stage_rounds = json::object();
      for (int st = 0; st < options_.num_stages; ++st) stage_rounds[std::to_string(st)] = std::max<int64_t>(0, rounds_.newest_round(st));
      for (const auto& [st, r] : stage_round_high_)
        stage_rounds[std::to_string(st)] = std::max(r, stage_rounds.value(std::to_string(st), int64_t{0}));
      json out{{"rebalanceMoves", rebalance_moves_}, {"events", events_}, {"assignments", assignments_},
               {"stageRounds", stage_rounds}};
      if (!failure_.is_null()) out["failure"] = failure_;
      return reply(200, out);
    }

    if (n >= 5 && seg[0] == "v1" && seg[1] == "stages" && seg[3] == "rounds") {
      const bool progress = n == 6 && seg[5] == "progress";
      const bool join = n == 8 && seg[5] == "attempts" && seg[7] == "join";
      const bool group = n == 8 && seg[5] == "attempts" && seg[7] == "group";
      if (progress || join || group) {
        const int stage = static_cast<int>(wire::parse_path_int(seg[2], "stage", kMaxStage));
        const int64_t round = wire::parse_path_int(seg[4], "round", kMaxRound);
        const int attempt =
            n == 8 ? static_cast<int>(wire::parse_path_int(seg[6], "attempt", kMaxAttempt)) : 0;

        if (progress) {
          if (method != "POST") return wrong_method("POST");
          const json j = wire::parse_object(body);
          const std::string peer = wire::get_peer_id(j, "peerId");
          const int64_t samples = wire::get_int(j, "samples", 0, kMaxRound);
          const int64_t target = wire::get_int(j, "target", 1, kMaxRound);
          const int64_t admitted = wire::get_int_or(j, "admitted", samples, kMaxRound, samples);
          const int64_t dropped = wire::get_int_or(j, "dropped", 0, kMaxRound, 0);
          std::lock_guard<std::mutex> lock(mu_);
          const double t = now();
          if (dropped > 0) {
            // The peer dropped its gradient of this round (it fell behind). Counted once: not if
            // the registry already counted it when the peer expired (a frozen peer coming back).
            // It may have computed more than it had reported when it froze: the rest counts now.
            auto it = counted_lost_.find(peer);
            if (it != counted_lost_.end() && std::get<0>(it->second) == stage && std::get<1>(it->second) == round) {
              events_["samples_lost"] += std::max<int64_t>(0, dropped - std::get<2>(it->second));
              counted_lost_.erase(it);
            } else {
              events_["samples_lost"] += dropped;
            }
          }
          last_progress_[peer] = {stage, round};
          auto& high = stage_round_high_[stage];
          high = std::max(high, round);
          json out = wire::to_json(rounds_.report_progress(stage, round, peer, samples, target, peers_, t, admitted));
          // The stage's newest round: a peer whose round the book has finished without it learns
          // how far its stage got (stage_membership.cc, resync).
          out["newestRound"] = rounds_.newest_round(stage);
          return reply(200, out);
        }
        if (join) {
          if (method != "POST") return wrong_method("POST");
          const json j = wire::parse_object(body);
          const planner::Member m = wire::member_from_json(j);
          const double gather = wire::get_number(j, "gatherSeconds", 0, kMaxGatherSeconds);
          std::lock_guard<std::mutex> lock(mu_);
          const double t = now();
          // A join is a report of the round too: a registry restarted a moment ago may hear of
          // the job's rounds first through one (membership_known_locked).
          auto& high = stage_round_high_[stage];
          high = std::max(high, round);
          if (rounds_.join(stage, round, attempt, m, gather, t) == planner::JoinResult::Closed) {
            return reply(409, json{{"error", "round closed"}, {"newestRound", rounds_.newest_round(stage)}});
          }
          return reply(200, json{{"joined", true}});
        }
        if (method != "GET") return wrong_method("GET");
        std::lock_guard<std::mutex> lock(mu_);
        const double t = now();
        return reply(200, wire::to_json(rounds_.group(stage, round, attempt, peers_, t, membership_known_locked(t))));
      }
    }

    return error(404, "path: no such resource, got " + wire::describe(json(path)));
  } catch (const BadField& e) {
    return error(400, e.what());
  } catch (const std::exception& e) {
    spdlog::error("registry: {} {} failed: {}", method, path, e.what());
    return error(500, std::string("internal: ") + e.what() + ", got " + method + " " + path);
  }
}

}  // namespace swarm::registry
