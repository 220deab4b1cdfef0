// Shared helpers of the operator's integration tests: the node layout and small queries.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/operator/testenv.h"

namespace swarm::optest {

inline std::string label(const json& obj, const std::string& key) {
  auto labels = obj["metadata"].value("labels", json::object());
  return labels.value(key, "");
}

inline bool terminating(const json& pod) { return pod["metadata"].contains("deletionTimestamp"); }

// Worker pods of a job that are not being deleted.
inline std::vector<json> live_workers(TestEnv& env, const std::string& job) {
  std::vector<json> out;
  for (auto& p : env.pods("swarm-operator.io/job=" + job + ",swarm-operator.io/role=worker"))
    if (!terminating(p)) out.push_back(p);
  return out;
}

inline int count_ready(const std::vector<json>& pods) {
  int n = 0;
  for (const auto& p : pods)
    for (const auto& c : p["status"].value("conditions", json::array()))
      if (c.value("type", "") == "Ready" && c.value("status", "") == "True") ++n;
  return n;
}

// Spot nodes in two regions (two zones each in us-central1), one on-demand node.
inline void create_standard_nodes(TestEnv& env) {
  const json spot_taint = json::array({{{"key", "cloud.google.com/gke-spot"}, {"value", "true"}, {"effect", "NoSchedule"}}});
  for (const char* zone : {"a", "b"}) {
    for (int i = 0; i < 2; ++i) {
      env.create_node(std::string("us-spot-") + zone + std::to_string(i),
                      {{"topology.kubernetes.io/region", "us-central1"},
                       {"topology.kubernetes.io/zone", std::string("us-central1-") + zone},
                       {"cloud.google.com/gke-spot", "true"}},
                      spot_taint);
    }
  }
  for (int i = 0; i < 2; ++i) {
    env.create_node("eu-spot-" + std::to_string(i),
                    {{"topology.kubernetes.io/region", "europe-west4"},
                     {"topology.kubernetes.io/zone", "europe-west4-a"},
                     {"cloud.google.com/gke-spot", "true"}},
                    spot_taint);
  }
  env.create_node("us-ondemand-0", {{"topology.kubernetes.io/region", "us-central1"},
                                    {"topology.kubernetes.io/zone", "us-central1-a"},
                                    {"swarm-operator.io/node-class", "on-demand"}});
}

inline std::string job_yaml(const std::string& name, const std::string& spec) {
  return "apiVersion: swarm-operator.io/v1alpha1\nkind: SwarmJob\nmetadata:\n  name: " + name + "\nspec:\n" + spec;
}

// Two spot pools (us preferred) and on-demand; small numbers so tests run fast.
inline std::string two_pool_spec(int stages, int per_stage, int us_max, const std::string& extra = "",
                                 const std::string& us_extra = "") {
  return "  pipeline: {stages: " + std::to_string(stages) + "}\n"
         "  workers: {perStage: " + std::to_string(per_stage) + "}\n"
         "  checkpoint: {path: /checkpoints}\n" + extra +
         "  nodePools:\n"
         "  - name: spot-us\n    region: us-central1\n    nodeSelector: {cloud.google.com/gke-spot: \"true\"}\n"
         "    tolerations: [{key: cloud.google.com/gke-spot, operator: Equal, value: \"true\", effect: NoSchedule}]\n"
         "    preemptible: true\n    priority: 100\n    maxWorkers: " + std::to_string(us_max) + "\n" + us_extra +
         "  - name: spot-eu\n    region: europe-west4\n    nodeSelector: {cloud.google.com/gke-spot: \"true\"}\n"
         "    tolerations: [{key: cloud.google.com/gke-spot, operator: Equal, value: \"true\", effect: NoSchedule}]\n"
         "    preemptible: true\n    priority: 50\n"
         "  - name: on-demand\n    nodeSelector: {swarm-operator.io/node-class: on-demand}\n    priority: 10\n";
}

}  // namespace swarm::optest
