// A SwarmJob as Kueue workloads (kueue.x-k8s.io/v1beta2), the way a controller outside Kueue's Go
// jobframework integrates ("Custom Workloads"): the operator creates and owns the Workload objects,
// Kueue admits or evicts them, and the operator runs pods only inside what was admitted. Pure: the
// Workload manifests from a job, the Workloads as read back, and the status patches the protocol
// asks of the owner. No I/O, no clock (`now` is passed in).
//
//   <job>-core       what the swarm needs to make progress: podSets `registry` (1), `trainers`
//                    (spec.trainers.count) and the workers, minPerStage of each stage. Stages whose
//                    worker pods ask for the same (resources, node selector, tolerations) share one
//                    podSet (`workers`, or `workers-<i>` when they differ); at most 8 podSets.
//                    priorityClassRef = the job's WorkloadPriorityClass (label
//                    kueue.x-k8s.io/priority-class) and `priority` its value (Kueue's webhook does
//                    not resolve it for a Workload it did not make).
//   <job>-ext[-<i>]  made once the core is admitted, one per worker podSet: the workers between
//                    minPerStage and maxPerStage of its stages, partial admission (minCount 1), one
//                    below the core's priority (preempted first), its template pinned to the node
//                    labels of the flavor the core's workers got (the same nodes, so the same pods).
// Every Workload: owner reference to the job (controller=true), the finalizer
// kueue.x-k8s.io/resource-in-use (the operator removes it when the job ends or goes), labels
// app.kubernetes.io/managed-by, swarm-operator.io/job and swarm-operator.io/workload (core|extension).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "operator/api/status.h"
#include "operator/api/swarmjob.h"

namespace swarm::op::kueue {

inline constexpr const char* kQueueNameLabel = "kueue.x-k8s.io/queue-name";
inline constexpr const char* kPriorityClassLabel = "kueue.x-k8s.io/priority-class";
inline constexpr const char* kResourceInUseFinalizer = "kueue.x-k8s.io/resource-in-use";
inline constexpr const char* kGroup = "kueue.x-k8s.io";
inline constexpr const char* kGroupVersion = "kueue.x-k8s.io/v1beta2";
inline constexpr const char* kWorkloadsPlural = "workloads";
inline constexpr const char* kResourceFlavorsPlural = "resourceflavors";
inline constexpr const char* kPriorityClassesPlural = "workloadpriorityclasses";
inline constexpr const char* kLabelWorkload = "swarm-operator.io/workload";  // core | extension
inline constexpr int kMaxPodSets = 8;                                           // Kueue's limit per Workload

enum class Role { Core, Extension };
const char* to_string(Role r);

// The pods the operator would create for the job, one per role and per stage, as manifests.h makes
// them (the controller passes them in: this folder never reaches the controller's).
struct JobTemplates {
  json owner_reference;             // the job's, controller=true
  json registry, trainer;           // a registry pod and a trainer pod
  std::vector<json> worker_by_stage;  // a worker pod of each stage, with no pool's placement
};

// A WorkloadPriorityClass as the job names it.
struct Priority {
  std::string class_name;
  std::int32_t value = 0;
};

// Stages whose worker pods ask for the same share one podSet.
struct WorkerGroup {
  std::string pod_set;      // "workers" or "workers-<i>"
  std::vector<int> stages;  // in stage order
  json pod_template;        // the podSet's template
};

// The job's queue (label kueue.x-k8s.io/queue-name), "" when it has none.
std::string queue_name(const SwarmJob& job);
// metadata.labels[kueue.x-k8s.io/queue-name] must name a LocalQueue (a DNS-1123 subdomain): nullopt
// when it does, else the error naming the label and the value.
std::optional<std::string> queue_name_problem(const SwarmJob& job);

// The template a podSet carries for `pod`: its labels and annotations, containers with their name,
// image and resources, its node selector and tolerations; nothing that differs between the pods of
// a podSet (names, args, slots) and nothing Kueue does not read.
json pod_set_template(const json& pod);

// The worker groups of a job: stages with equal templates (pod_set_template of their worker pod,
// plus the node selector every pool of the job sets alike and the tolerations of any pool) share
// one. Throws std::invalid_argument when more than kMaxPodSets - 2 groups would be needed.
std::vector<WorkerGroup> worker_groups(const SwarmJob& job, const JobTemplates& t);

std::string core_name(const SwarmJob& job);
std::string extension_name(const SwarmJob& job, size_t group, size_t groups);

// The core Workload (header). `priority` nullopt: no priorityClassRef, no priority (Kueue's default).
json core_workload(const SwarmJob& job, const JobTemplates& t, const std::optional<Priority>& priority);
// The extension Workload of worker group `g` (nullopt when minPerStage == maxPerStage: nothing to
// extend). `pin` = the node labels of the flavor the core's workers were admitted on.
std::optional<json> extension_workload(const SwarmJob& job, const std::vector<WorkerGroup>& groups, size_t g,
                                       const std::optional<Priority>& priority,
                                       const std::map<std::string, std::string>& pin, const json& owner_reference);
// The priority of an extension: one below the core's (0 without a class), never below INT32_MIN.
std::int32_t extension_priority(const std::optional<Priority>& priority);

// A podSet's admission: its count and the flavor of each resource.
struct PodSetAssignment {
  std::string name;
  int count = 0;
  std::map<std::string, std::string> flavors;  // resource -> ResourceFlavor name
};

// A Workload as read from the API server.
struct WorkloadView {
  std::string name, namespace_, uid, resource_version, owner_uid;
  std::int64_t generation = 0;
  std::optional<Role> role;  // nullopt: not one of ours (no or unknown swarm-operator.io/workload)
  std::vector<std::string> finalizers;
  bool deleting = false, active = true;
  std::string queue_name;
  std::optional<std::int32_t> priority;
  std::vector<std::pair<std::string, int>> pod_sets;  // name, count
  std::vector<Condition> conditions;                   // status.conditions
  bool has_admission = false;                          // status.admission present
  std::string cluster_queue;
  std::vector<PodSetAssignment> assignments;

  const Condition* condition(const std::string& type) const { return find_condition(conditions, type); }
  bool is_true(const std::string& type) const;
  bool has_finalizer() const;
  // Quota held: QuotaReserved=True or an admission still written (what only the owner clears).
  bool quota_reserved() const { return is_true("QuotaReserved") || has_admission; }
  bool admitted() const { return is_true("Admitted") && has_admission; }
  bool evicted() const { return is_true("Evicted"); }
  bool finished() const { return is_true("Finished"); }
  int admitted_count(const std::string& pod_set) const;  // the assignment's count, 0 if none
};

WorkloadView workload_view(const json& obj);

// The /status merge patch that gives an evicted Workload's quota back (Kueue's protocol for the
// job's owner, once none of its pods is left): admission null, QuotaReserved False (Pending),
// Admitted False (NoReservation), Requeued True when evicted for a preemption or node failures
// (Kueue requeues those), else False; each with the Evicted condition's reason and message.
// Carries metadata.resourceVersion: a Workload changed meanwhile refuses it (409) and the next
// reconcile decides again.
json clear_admission_patch(const WorkloadView& w, const std::string& now);
// Finished True (reason Succeeded or Failed) with `message`; also carries the resourceVersion.
json finished_patch(const WorkloadView& w, bool succeeded, const std::string& message, const std::string& now);
// metadata.finalizers without kueue.x-k8s.io/resource-in-use (merge patch, with the resourceVersion).
json release_patch(const WorkloadView& w);

}  // namespace swarm::op::kueue
