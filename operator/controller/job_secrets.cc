#include "operator/controller/job_secrets.h"

#include <chrono>
#include <iterator>
#include <stdexcept>

#include "operator/controller/manifests.h"
#include "operator/kube/config.h"

namespace swarm::op {
namespace {

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

JobSecrets::JobSecrets(kube::Client& client, double ttl_seconds) : client_(client), ttl_seconds_(ttl_seconds) {}

std::string JobSecrets::get(const SwarmJob& job) {
  const auto [name, key] = secret_source(job);
  // Keyed by the job's UID too: a job deleted and re-created under its name may have a new Secret
  // (its old one deleted), and its registry takes only the new one. Kept by name alone, the old
  // value signed every request of the new job with the wrong secret for up to ttl_seconds (issue
  // 29: the status of a re-created job stayed at step 0 for 48 s, its registry answering 401).
  const std::string id = job.uid + "/" + job.namespace_ + "/" + name + "/" + key;
  const double t = steady_now();
  {
    swarm::MutexLock lock(mu_);
    auto it = cache_.find(id);
    if (it != cache_.end() && t - it->second.second < ttl_seconds_) return it->second.first;
  }
  std::string value = fetch(job.namespace_, name, key);
  swarm::MutexLock lock(mu_);
  // Entries past their time are never read again (a deleted job's, a re-created job's old UID):
  // dropped here, so the cache holds at most the jobs read within the last ttl_seconds.
  for (auto it = cache_.begin(); it != cache_.end();) it = t - it->second.second >= ttl_seconds_ ? cache_.erase(it) : std::next(it);
  cache_[id] = {value, t};
  return value;
}

std::string JobSecrets::fetch(const std::string& ns, const std::string& name, const std::string& key) {
  const std::string what = "secret " + ns + "/" + name + " key \"" + key + "\"";
  const auto secret = client_.get_if_exists(kube::resource_path("v1", ns, "secrets", name));
  if (!secret) throw std::runtime_error(what + ": no such Secret");
  const auto data = secret->value("data", kube::json::object());
  if (!data.is_object() || !data.contains(key) || !data.at(key).is_string())
    throw std::runtime_error(what + ": no such key in the Secret's data");
  std::string value;
  try {
    value = kube::base64_decode(data.at(key).get<std::string>());
  } catch (const std::exception& e) {
    throw std::runtime_error(what + ": " + e.what());
  }
  if (value.empty()) throw std::runtime_error(what + ": empty");
  return value;
}

}  // namespace swarm::op
