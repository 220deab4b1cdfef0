// Admission -> placement: what an admitted job may run, and where. Pure.
//
// Counts. Stage s runs minPerStage workers from the core Workload plus its share of each admitted
// extension of its worker podSet (an extension's count is spread over the podSet's stages in stage
// order: the first `count % stages` get one more). The registry and trainers run as the core's
// podSets say. Nothing runs beyond that: no surge, no move-back (planner stage_targets).
//
// Where. Kueue names node pools by ResourceFlavor; every flavor assigned to a podSet adds its
// spec.nodeLabels to the pods' nodeSelector and its spec.tolerations to their tolerations (as Kueue's
// own integrations do, podset.FromAssignment). spec.nodePools still place workers inside that:
//   - a pool whose node selector (with region and zone) sets a key of the flavor's nodeLabels to
//     another value can hold none of the admitted pods and is not used while the job runs there;
//   - every other pool gets the flavor's labels and tolerations added: the flavor wins, the pool
//     narrows it down (its priority, maxWorkers, capacity and reclaim handling apply as before);
//   - with no pool left (or none given), the workers go anywhere in the flavor: one pool named
//     after it.
// An extension admitted on flavors whose labels or tolerations differ from its core's workers
// cannot be run by the same pods; it is refused (deactivated, its quota given back) rather than run
// outside what Kueue reserved.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "operator/kueue/workload.h"

namespace swarm::op::kueue {

// A ResourceFlavor as read (kueue.x-k8s.io/v1beta2).
struct Flavor {
  std::string name;
  std::map<std::string, std::string> node_labels;
  json tolerations = json::array();
};
Flavor flavor_view(const json& obj);

// What the assigned flavors add to a podSet's pods.
struct Overlay {
  std::map<std::string, std::string> node_selector;
  json tolerations = json::array();
  std::vector<std::string> flavors;  // their names, sorted
  bool operator==(const Overlay& o) const {
    return node_selector == o.node_selector && tolerations == o.tolerations;
  }
};

// The overlay of one podSet's assignment; nullopt with *problem set when a flavor is not known (not
// in `flavors`) or two flavors set one node label to different values.
std::optional<Overlay> overlay_of(const PodSetAssignment& a, const std::map<std::string, Flavor>& flavors,
                                  std::string* problem);

// Adds the overlay to a pod manifest: its node labels into spec.nodeSelector (a key the pod also
// sets takes the flavor's value) and its tolerations into spec.tolerations (no duplicates).
void apply_overlay(json& pod, const Overlay& o);

// The pools the workers may use inside `o` (see above); never empty.
std::vector<NodePool> pools_within(const std::vector<NodePool>& pools, const Overlay& o);

struct Envelope {
  std::vector<int> workers_per_stage;
  int trainers = 0, registries = 0;
  Overlay registry, trainers_overlay, workers;
  std::string cluster_queue;
  std::vector<std::string> refused_extensions;  // admitted on another flavor than the core's workers
  std::vector<std::string> problems;            // no pods while any: a flavor unknown, labels in conflict
  std::string summary;                          // "workers 6 on spot; trainers 1 on on-demand; ..."
};

// `extensions`: the job's admitted extensions that are not evicted.
Envelope envelope(const SwarmJob& job, const std::vector<WorkerGroup>& groups, const WorkloadView& core,
                  const std::vector<WorkloadView>& extensions, const std::map<std::string, Flavor>& flavors);

}  // namespace swarm::op::kueue
