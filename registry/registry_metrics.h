// RegistryMetrics: the registry's Prometheus metrics (GET /metrics), kept in a prometheus-cpp
// Registry and rendered by its TextSerializer.
//
//   swarm_rebalance_moves_total          counter  stage moves planned by the rebalancer
//   swarm_swarm_events_total{kind}       counter  events peers and the launcher report; a kind's
//                                                 series exists once the kind was first counted
//   swarm_registry_peers{role,stage,state} gauge  live peers; only label sets with live peers
//   swarm_job_failed                     gauge    0, then 1 once the job failed
//   swarm_stage_reset_total              counter  stages that came back without their state
//   swarm_registry_stage_workers{stage}  gauge    live workers of every stage 0..num_stages-1 (an
//                                                 empty stage included); absent without num_stages
//   swarm_registry_auth_failures_total{reason} counter requests refused for their Authorization
//                                                 (request_auth.h): missing, malformed,
//                                                 bad_signature, timestamp, replayed, cache_full;
//                                                 every reason from the start, at 0
//
// The counters only grow within one registry process (a restarted registry starts from 0, as
// Prometheus counters may). The two census gauges are a snapshot: set_census() replaces them.
//
// Not thread-safe by itself: RegistryService calls every method with its mutex held.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace swarm::registry {

class RegistryMetrics {
 public:
  // (role, stage, state) -> number of live peers with them.
  using Census = std::map<std::tuple<std::string, int, std::string>, int>;

  // `num_stages` > 0 adds swarm_registry_stage_workers for stages 0..num_stages-1.
  explicit RegistryMetrics(int num_stages);

  void add_event(const std::string& kind, int64_t count);
  void add_rebalance_move();
  void add_stage_reset();
  void set_failed();
  // One request refused; `reason` is an auth::reason_label().
  void add_auth_failure(const std::string& reason);
  // Replaces the live-peer census (swarm_registry_peers, swarm_registry_stage_workers): a label
  // set that is not in `census` any more loses its series.
  void set_census(const Census& census);

  // Prometheus text exposition format (version 0.0.4).
  std::string exposition() const;

 private:
  int num_stages_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* rebalance_moves_ = nullptr;
  prometheus::Family<prometheus::Counter>* events_ = nullptr;
  prometheus::Family<prometheus::Gauge>* peers_ = nullptr;
  prometheus::Gauge* job_failed_ = nullptr;
  prometheus::Counter* stage_resets_ = nullptr;
  prometheus::Family<prometheus::Gauge>* stage_workers_ = nullptr;  // null without num_stages
  prometheus::Family<prometheus::Counter>* auth_failures_ = nullptr;
  std::map<std::tuple<std::string, int, std::string>, prometheus::Gauge*> census_;  // live series
};

}  // namespace swarm::registry
