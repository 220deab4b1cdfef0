// World: what the reconciler reads, shared between the controller's informers and its workers:
// the caches of SwarmJobs, our pods and Nodes, plus when each reclaim notice was first seen (for
// the notice -> replacement latency) and which pods we deleted moments ago (so a cache that has
// not caught up yet never makes us count or delete a pod twice).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/thread_annotations.h"
#include "operator/controller/reclaim.h"
#include "operator/kube/informer.h"
#include "planner/capacity.h"

namespace swarm::op {

class World {
 public:
  // bound_pods: every pod bound to a node, in any namespace, as capacity_facts.h's
  // capacity_view() (null: capacity unknown).
  World(kube::Informer& jobs, kube::Informer& pods, kube::Informer& nodes, kube::Informer* bound_pods = nullptr)
      : jobs(jobs), pods(pods), nodes(nodes), bound_pods(bound_pods) {}

  kube::Informer& jobs;
  kube::Informer& pods;
  kube::Informer& nodes;
  kube::Informer* bound_pods;

  // Capacity facts from the caches (planner/capacity.h); known once both caches synced.
  bool capacity_known() const;
  std::vector<planner::NodeFacts> node_facts() const;
  std::vector<planner::BoundPod> pods_on_nodes() const;

  // The notice on a node name: nullopt = fine; node missing from the cache = deleted. A node
  // that is Unknown only since the API server was away is fine for kApiBackGraceSeconds after it
  // answered again (unknown_after_api_outage).
  std::optional<Notice> notice_for_node(const std::string& node) const;
  // Nodes (from the cache) that currently carry a notice.
  std::vector<std::string> nodes_with_notice() const;

  // The API server answered again after requests could not reach it (kube::Client).
  void note_api_back() EXCLUDES(mu_);
  // Seconds since then; -1 when it never went away.
  double seconds_since_api_back() const EXCLUDES(mu_);

  // Notice bookkeeping: first time a notice on `key` (node name or ns/pod) was seen.
  void note_notice(const std::string& key) EXCLUDES(mu_);
  void clear_notice(const std::string& key) EXCLUDES(mu_);
  // Seconds since the notice was first seen (0 when unknown).
  double notice_age(const std::string& key) const EXCLUDES(mu_);

  // Pods we deleted moments ago, by uid (a name can come back as a new pod).
  void note_deleted(const std::string& pod_uid) EXCLUDES(mu_);
  bool recently_deleted(const std::string& pod_uid) const EXCLUDES(mu_);

  // Pods of one job (labels swarm-operator.io/job), from the cache.
  std::vector<kube::json> pods_of(const std::string& ns, const std::string& job) const;
  // Job keys (ns/name) of our pods on `node`.
  std::vector<std::string> jobs_on_node(const std::string& node) const;

 private:
  using Clock = std::chrono::steady_clock;
  mutable swarm::Mutex mu_;
  std::map<std::string, Clock::time_point> notices_ GUARDED_BY(mu_);
  std::optional<Clock::time_point> api_back_ GUARDED_BY(mu_);
  std::map<std::string, Clock::time_point> deleted_ GUARDED_BY(mu_);
};

}  // namespace swarm::op
