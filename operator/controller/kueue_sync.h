// KueueSync: the I/O edge of the Kueue integration (operator/kueue/ decides). It reads a job's
// Workloads, the ResourceFlavors and WorkloadPriorityClasses from their watch caches, and writes
// what a decision asks: Workloads created (owner reference, finalizer, priority), their spec
// (priority, active) and /status (admission cleared, Finished) merge-patched with the
// resourceVersion they were read at, finalizers removed, Workloads deleted (the reconciler writes the
// job's spec.suspend). A write refused with 409 (the object changed since it was read) is not an error: the
// reconcile asks to run again shortly and decides from the newer object.
//
// Only with --kueue (chart value kueue.enabled): without it no informer is started, no Workload is
// touched and the queue label is ignored (the job runs as before).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "operator/api/swarmjob.h"
#include "operator/kube/client.h"
#include "operator/kube/informer.h"
#include "operator/kueue/lifecycle.h"

namespace swarm::op {

class KueueSync {
 public:
  KueueSync(kube::Client& client, kube::Informer& workloads, kube::Informer& flavors, kube::Informer& priority_classes)
      : client_(client), workloads_(workloads), flavors_(flavors), priority_classes_(priority_classes) {}

  // Whether the caches have been filled (the Kueue CRDs exist and were listed).
  bool synced() const { return workloads_.synced() && flavors_.synced() && priority_classes_.synced(); }

  // The job's Workloads (label swarm-operator.io/job, its namespace), read from the cache.
  std::vector<kueue::WorkloadView> workloads_of(const std::string& ns, const std::string& job) const;
  std::map<std::string, kueue::Flavor> flavors() const;
  // The job's WorkloadPriorityClass (label kueue.x-k8s.io/priority-class): nullopt without the
  // label; *problem set when the class is named but not found.
  std::optional<kueue::Priority> priority(const SwarmJob& job, std::string* problem) const;

  // Applies the decision's Workload writes, in order. Returns false when a write was refused as
  // stale (409): run the reconcile again soon.
  bool apply(const SwarmJob& job, const kueue::Decision& d);
  // The job is gone: its Workloads released and deleted.
  void release_all(const std::string& ns, const std::string& job);

 private:
  bool write(const std::string& ns, const kueue::WorkloadWrite& w);

  kube::Client& client_;
  kube::Informer& workloads_;
  kube::Informer& flavors_;
  kube::Informer& priority_classes_;
};

}  // namespace swarm::op
