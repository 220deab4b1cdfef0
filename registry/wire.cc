#include "registry/wire.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <set>

namespace swarm::registry::wire {
namespace {

constexpr int64_t kMaxStage = 1 << 20;
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

const json* find(const json& obj, const std::string& name) {
  auto it = obj.find(name);
  return it == obj.end() ? nullptr : &*it;
}

[[noreturn]] void missing(const std::string& field) { throw BadField(field, "is required", "nothing"); }

std::string get_string(const json& obj, const std::string& name, const std::string& prefix,
                       bool required, const std::string& dflt) {
  const json* v = find(obj, name);
  if (v == nullptr) {
    if (required) missing(prefix + name);
    return dflt;
  }
  if (!v->is_string()) throw BadField(prefix + name, "must be a string", describe(*v));
  return v->get<std::string>();
}

bool is_one_of(const std::string& s, std::initializer_list<const char*> options) {
  for (const char* o : options) {
    if (s == o) return true;
  }
  return false;
}

}  // namespace

BadField::BadField(const std::string& field, const std::string& problem, const std::string& got)
    : std::invalid_argument(field + ": " + problem + ", got " + got), field_(field) {}

std::string describe(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

json parse_object(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    std::string snippet = text.size() > 60 ? text.substr(0, 57) + "..." : text;
    throw BadField("body", "malformed JSON", describe(json(snippet)));
  }
  if (!j.is_object()) throw BadField("body", "must be a JSON object", describe(j));
  return j;
}

bool valid_peer_id(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (unsigned char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool valid_region(const std::string& region) {
  return region.size() <= 63 && (region.empty() || valid_peer_id(region));
}

int64_t parse_path_int(const std::string& segment, const std::string& field, int64_t max) {
  int64_t v = -1;
  const char* end = segment.data() + segment.size();
  auto [ptr, ec] = std::from_chars(segment.data(), end, v);
  if (segment.empty() || ec != std::errc() || ptr != end || v < 0 || v > max) {
    throw BadField(field, "must be an integer in [0, " + std::to_string(max) + "]",
                   describe(json(segment)));
  }
  return v;
}

int64_t get_int_or(const json& obj, const std::string& name, int64_t lo, int64_t hi, int64_t dflt,
                   const std::string& prefix) {
  const json* v = find(obj, name);
  if (v == nullptr) return dflt;
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (hi >= 0 && u <= static_cast<uint64_t>(hi) && static_cast<int64_t>(u) >= lo) {
      return static_cast<int64_t>(u);
    }
  } else if (v->is_number_integer()) {
    int64_t i = v->get<int64_t>();
    if (i >= lo && i <= hi) return i;
  }
  throw BadField(prefix + name, "must be an integer in " + range, describe(*v));
}

int64_t get_int(const json& obj, const std::string& name, int64_t lo, int64_t hi,
                const std::string& prefix) {
  if (find(obj, name) == nullptr) missing(prefix + name);
  return get_int_or(obj, name, lo, hi, 0, prefix);
}

double get_number_or(const json& obj, const std::string& name, double lo, double hi, double dflt,
                     const std::string& prefix) {
  const json* v = find(obj, name);
  if (v == nullptr) return dflt;
  if (v->is_number()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d >= lo && d <= hi) return d;
  }
  json l = lo, h = hi;
  throw BadField(prefix + name, "must be a number in [" + l.dump() + ", " + h.dump() + "]",
                 describe(*v));
}

double get_number(const json& obj, const std::string& name, double lo, double hi,
                  const std::string& prefix) {
  if (find(obj, name) == nullptr) missing(prefix + name);
  return get_number_or(obj, name, lo, hi, 0, prefix);
}

std::string get_peer_id(const json& obj, const std::string& name, const std::string& prefix) {
  std::string id = get_string(obj, name, prefix, true, "");
  if (!valid_peer_id(id)) {
    throw BadField(prefix + name, "must be 1-128 characters of [A-Za-z0-9._-]",
                   describe(json(id)));
  }
  return id;
}

std::string get_host(const json& obj, const std::string& name, const std::string& prefix) {
  std::string host = get_string(obj, name, prefix, true, "");
  bool ok = !host.empty() && host.size() <= 253;
  for (unsigned char c : host) ok = ok && c > 0x20 && c < 0x7f && c != '/';
  if (!ok) {
    throw BadField(prefix + name, "must be a host name or address", describe(json(host)));
  }
  return host;
}

json to_json(const planner::PeerRecord& r) {
  json j{{"peerId", r.peer_id},
          {"role", r.role},
          {"stage", r.stage},
          {"host", r.host},
          {"port", r.port},
          {"metricsPort", r.metrics_port},
          {"state", planner::to_string(r.state)},
          {"step", r.step},
          {"queueLength", r.queue_length},
          {"samplesPerSecond", r.samples_per_second},
          {"loss", r.loss},
          {"lastSeen", r.last_seen}};
  // Left out when "": a region-less record is on the wire exactly as before regions existed.
  if (!r.region.empty()) j["region"] = r.region;
  return j;
}

planner::PeerRecord peer_from_json(const json& j, const std::string& path_peer_id) {
  if (!j.is_object()) throw BadField("body", "must be a JSON object", describe(j));
  planner::PeerRecord r;
  if (path_peer_id.empty() || j.contains("peerId")) {
    r.peer_id = get_peer_id(j, "peerId");
    if (!path_peer_id.empty() && r.peer_id != path_peer_id) {
      throw BadField("peerId", "must match the path's " + describe(json(path_peer_id)),
                     describe(j.at("peerId")));
    }
  } else {
    r.peer_id = path_peer_id;
  }
  r.role = get_string(j, "role", "", true, "");
  if (!is_one_of(r.role, {"worker", "trainer"})) {
    throw BadField("role", "must be \"worker\" or \"trainer\"", describe(j.at("role")));
  }
  const bool worker = r.role == "worker";
  r.stage = static_cast<int>(get_int_or(j, "stage", -1, kMaxStage, -1));
  if (worker && r.stage < 0) {
    throw BadField("stage", "a worker needs a stage >= 0",
                   j.contains("stage") ? describe(j.at("stage")) : "nothing");
  }
  r.host = get_host(j, "host");
  r.port = static_cast<int>(get_int_or(j, "port", 0, 65535, 0));
  if (worker && r.port == 0) {
    throw BadField("port", "a worker needs a port in [1, 65535]",
                   j.contains("port") ? describe(j.at("port")) : "nothing");
  }
  r.metrics_port = static_cast<int>(get_int_or(j, "metricsPort", 0, 65535, 0));
  r.region = get_string(j, "region", "", false, "");
  if (!valid_region(r.region)) {
    throw BadField("region", "must be at most 63 characters of [A-Za-z0-9._-]", describe(j.at("region")));
  }
  // The one place a peer's state is text: parsed here, the enum everywhere inside.
  const std::string state = get_string(j, "state", "", false, planner::to_string(planner::PeerState::Joining));
  if (auto s = planner::find_peer_state(state)) {
    r.state = *s;
  } else {
    throw BadField("state", "must be one of " + planner::peer_state_names(), describe(j.at("state")));
  }
  r.step = get_int_or(j, "step", 0, kI64Max, 0);
  r.queue_length = get_int_or(j, "queueLength", 0, kI64Max, 0);
  r.samples_per_second = get_number_or(j, "samplesPerSecond", 0, 1e18, 0);
  r.loss = get_number_or(j, "loss", 0, 1e18, 0);
  r.last_seen = get_number_or(j, "lastSeen", 0, 1e18, 0);
  return r;
}

json to_json(const planner::Member& m) {
  return json{{"peerId", m.peer_id}, {"host", m.host}, {"port", m.port}, {"samples", m.samples}};
}

planner::Member member_from_json(const json& j, const std::string& prefix) {
  if (!j.is_object()) {
    throw BadField(prefix.empty() ? "body" : prefix.substr(0, prefix.size() - 1),
                   "must be a JSON object", describe(j));
  }
  planner::Member m;
  m.peer_id = get_peer_id(j, "peerId", prefix);
  m.host = get_host(j, "host", prefix);
  m.port = static_cast<int>(get_int(j, "port", 1, 65535, prefix));
  m.samples = get_int_or(j, "samples", 0, kI64Max, 0, prefix);
  return m;
}

json to_json(const planner::ProgressView& v) {
  return json{{"step", v.step},
              {"samplesTotal", v.samples_total},
              {"target", v.target},
              {"targetReached", v.target_reached},
              {"granted", v.granted}};
}

json to_json(const planner::ClaimRequest& r) {
  json out{{"samples", r.done}, {"admitted", std::max(r.used, r.done)}};
  if (r.want >= 0) out["want"] = r.want;
  if (r.unit > 0) out["unit"] = r.unit;
  if (!r.transfers.empty()) {
    out["transfers"] = json::array();
    for (const auto& t : r.transfers) out["transfers"].push_back(json{{"from", t.from}, {"samples", t.samples}});
  }
  return out;
}

planner::ClaimRequest claim_from_json(const json& j) {
  planner::ClaimRequest r;
  r.done = get_int(j, "samples", 0, kI64Max);
  r.used = get_int_or(j, "admitted", r.done, kI64Max, r.done);
  r.want = get_int_or(j, "want", -1, kI64Max, -1);
  r.unit = get_int_or(j, "unit", 0, kI64Max, 0);
  const json* transfers = find(j, "transfers");
  if (transfers == nullptr) return r;
  if (!transfers->is_array() || transfers->size() > kMaxTransfers)
    throw BadField("transfers", "must be an array of at most " + std::to_string(kMaxTransfers) + " transfers",
                   describe(*transfers));
  for (size_t i = 0; i < transfers->size(); ++i) {
    const std::string prefix = "transfers[" + std::to_string(i) + "].";
    const json& t = (*transfers)[i];
    if (!t.is_object()) throw BadField(prefix.substr(0, prefix.size() - 1), "must be a JSON object", describe(t));
    r.transfers.push_back({get_peer_id(t, "from", prefix), get_int(t, "samples", 1, kI64Max, prefix)});
  }
  return r;
}

planner::ProgressView progress_from_json(const json& j) {
  planner::ProgressView v;
  v.step = get_int(j, "step", 0, kI64Max);
  v.samples_total = get_int(j, "samplesTotal", 0, kI64Max);
  v.target = get_int(j, "target", std::numeric_limits<int64_t>::min(), kI64Max);
  const json* r = find(j, "targetReached");
  if (r == nullptr) missing("targetReached");
  if (!r->is_boolean()) throw BadField("targetReached", "must be a boolean", describe(*r));
  v.target_reached = r->get<bool>();
  v.granted = get_int_or(j, "granted", 0, kI64Max, 0);
  return v;
}

std::vector<planner::Member> members_from_json(const json& j, bool restore) {
  const json* members = find(j, "members");
  if (members == nullptr) missing("members");
  if (!members->is_array()) throw BadField("members", "must be an array", describe(*members));
  if (restore && (members->empty() || members->size() > kMaxGroupMembers)) {
    throw BadField("members", "must hold 1 to " + std::to_string(kMaxGroupMembers) + " members",
                   std::to_string(members->size()) + " members");
  }
  std::vector<planner::Member> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < members->size(); ++i) {
    const std::string prefix = "members[" + std::to_string(i) + "].";
    out.push_back(member_from_json((*members)[i], prefix));
    if (restore && !seen.insert(out.back().peer_id).second) {
      throw BadField(prefix + "peerId", "must not name a member twice", describe(json(out.back().peer_id)));
    }
  }
  return out;
}

json to_json(const planner::GroupView& v) {
  json members = json::array();
  for (const auto& m : v.members) members.push_back(to_json(m));
  return json{{"state", planner::to_string(v.state)}, {"members", members}, {"leader", v.leader},
              {"stepFull", v.step_full}, {"awaiting", v.awaiting}};
}

planner::GroupView group_from_json(const json& j) {
  planner::GroupView v;
  std::string state = get_string(j, "state", "", true, "");
  if (state == "gathering") {
    v.state = planner::GroupView::Gathering;
  } else if (state == "ready") {
    v.state = planner::GroupView::Ready;
  } else if (state == "unknown") {
    v.state = planner::GroupView::Unknown;
  } else {
    throw BadField("state", "must be gathering, ready or unknown", describe(j.at("state")));
  }
  v.members = members_from_json(j);
  v.leader = get_string(j, "leader", "", false, "");
  if (const json* full = find(j, "stepFull")) {
    if (!full->is_boolean()) throw BadField("stepFull", "must be a boolean", describe(*full));
    v.step_full = full->get<bool>();
  }
  if (const json* awaiting = find(j, "awaiting")) {
    if (!awaiting->is_array() || awaiting->size() > kMaxGroupMembers)
      throw BadField("awaiting", "must be an array of peer ids", describe(*awaiting));
    for (size_t i = 0; i < awaiting->size(); ++i) {
      const json& id = (*awaiting)[i];
      if (!id.is_string() || !valid_peer_id(id.get<std::string>()))
        throw BadField("awaiting[" + std::to_string(i) + "]", "must be a peer id", describe(id));
      v.awaiting.push_back(id.get<std::string>());
    }
  }
  return v;
}

}  // namespace swarm::registry::wire
