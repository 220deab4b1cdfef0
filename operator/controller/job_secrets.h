// JobSecrets: each job's secret as its pods get it — the Secret `<job>-secret` key `token` that
// the reconciler creates, or the Secret and key spec.secret.secretRef names — read through the API
// server (the operator's ClusterRole may get secrets), for the ProgressPoller to sign its requests
// to the job's registry with (registry/request_auth.h). A value is kept for `ttl_seconds`, so 50
// running jobs cost 50 GETs a minute, and a rotated secret is used within that time. A job
// re-created under its name (a new UID) reads its Secret afresh.
//
// Thread-safe.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "common/thread_annotations.h"
#include "operator/api/swarmjob.h"
#include "operator/kube/client.h"

namespace swarm::op {

class JobSecrets {
 public:
  explicit JobSecrets(kube::Client& client, double ttl_seconds = 60);

  // The job's secret. Throws std::runtime_error naming the Secret, the key and what is wrong when
  // it cannot be read (absent, no such key, empty, not base64); a failure is not kept.
  std::string get(const SwarmJob& job) EXCLUDES(mu_);

 private:
  std::string fetch(const std::string& ns, const std::string& name, const std::string& key);

  kube::Client& client_;
  const double ttl_seconds_;
  swarm::Mutex mu_;
  std::map<std::string, std::pair<std::string, double>> cache_ GUARDED_BY(mu_);  // uid/ns/name/key -> (value, read at)
};

}  // namespace swarm::op
