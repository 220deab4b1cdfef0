#include "operator/kube/leader_election.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "operator/kube/time_format.h"

namespace swarm::kube {

LeaderElector::LeaderElector(Client& client, LeaderElectionOptions options,
                             std::function<void()> on_started_leading,
                             std::function<void()> on_stopped_leading)
    : client_(client), options_(std::move(options)), on_started_(std::move(on_started_leading)),
      on_stopped_(std::move(on_stopped_leading)) {}

LeaderElector::~LeaderElector() { stop(); }

void LeaderElector::start() {
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void LeaderElector::stop() {
  {
    swarm::MutexLock lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  if (leader_) {
    release();
    leader_ = false;
  }
}

bool LeaderElector::try_acquire_or_renew() {
  const std::string path = resource_path("coordination.k8s.io/v1", options_.namespace_, "leases", options_.name);
  const auto now = std::chrono::system_clock::now();
  const std::string now_s = format_micro_time(now);
  const int duration_s = static_cast<int>((options_.lease_duration.count() + 999) / 1000);
  // The leader renews from the Lease it wrote last: one PUT per renewal instead of GET + PUT. A
  // 409 means someone else wrote it; then read it like a candidate does.
  if (leader_ && !last_written_.is_null()) {
    json renewed = last_written_;
    renewed["spec"]["renewTime"] = now_s;
    try {
      last_written_ = client_.replace(path, renewed);
      observed_rv_ = last_written_["metadata"].value("resourceVersion", "");
      observed_at_ = std::chrono::steady_clock::now();
      return true;
    } catch (const ApiError& e) {
      last_written_ = json();
      if (!e.conflict() && !e.not_found()) throw;
    }
  }
  auto current = client_.get_if_exists(path);
  if (!current) {
    json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", options_.name}, {"namespace", options_.namespace_}}},
                  {"spec",
                   {{"holderIdentity", options_.identity}, {"leaseDurationSeconds", duration_s},
                    {"acquireTime", now_s}, {"renewTime", now_s}, {"leaseTransitions", 0}}}};
    last_written_ = client_.create(resource_path("coordination.k8s.io/v1", options_.namespace_, "leases"), lease);
    return true;
  }
  json spec = (*current)["spec"];
  const std::string holder = spec.value("holderIdentity", "");
  const std::string rv = (*current)["metadata"].value("resourceVersion", "");
  if (rv != observed_rv_) {  // the record changed: restart the expiry clock from now
    observed_rv_ = rv;
    observed_spec_ = spec;
    observed_at_ = std::chrono::steady_clock::now();
  }
  const auto held_for = std::chrono::milliseconds(1000LL * spec.value("leaseDurationSeconds", duration_s));
  const bool expired = std::chrono::steady_clock::now() - observed_at_ > held_for;
  if (!holder.empty() && holder != options_.identity && !expired) {
    taken_over_ = true;  // someone else holds it now: a leader must stop at once
    return false;
  }

  json updated = *current;
  updated["spec"]["holderIdentity"] = options_.identity;
  updated["spec"]["leaseDurationSeconds"] = duration_s;
  updated["spec"]["renewTime"] = now_s;
  if (holder != options_.identity) {
    updated["spec"]["acquireTime"] = now_s;
    updated["spec"]["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
  }
  json written = client_.replace(path, updated);  // 409 if someone else wrote first
  last_written_ = written;
  observed_rv_ = written["metadata"].value("resourceVersion", "");
  observed_at_ = std::chrono::steady_clock::now();
  return true;
}

void LeaderElector::release() {
  const std::string path = resource_path("coordination.k8s.io/v1", options_.namespace_, "leases", options_.name);
  try {
    auto current = client_.get_if_exists(path);
    if (!current || (*current)["spec"].value("holderIdentity", "") != options_.identity) return;
    json updated = *current;
    updated["spec"]["holderIdentity"] = "";
    updated["spec"]["leaseDurationSeconds"] = 1;
    updated["spec"]["renewTime"] = format_micro_time(std::chrono::system_clock::now());
    client_.replace(path, updated);
    spdlog::info("leader election: released lease {}/{}", options_.namespace_, options_.name);
  } catch (const std::exception& e) {
    spdlog::warn("leader election: release failed: {}", e.what());
  }
}

void LeaderElector::run() {
  // The renew deadline runs from the first failed renewal, as in client-go: a leader that was
  // merely paused (GC, SIGSTOP, a slow node) gets its full deadline to renew; if someone else
  // took the Lease meanwhile, its PUT fails with 409 and it steps down.
  std::optional<std::chrono::steady_clock::time_point> failing_since;
  while (!stop_) {
    bool ok = false;
    taken_over_ = false;
    try {
      ok = try_acquire_or_renew();
    } catch (const std::exception& e) {
      spdlog::debug("leader election: {}", e.what());
    }
    const auto now = std::chrono::steady_clock::now();
    if (ok) {
      failing_since.reset();
      if (!leader_) {
        leader_ = true;
        ++transitions_;
        spdlog::info("leader election: {} is now the leader ({}/{})", options_.identity,
                     options_.namespace_, options_.name);
        if (on_started_) on_started_();
      }
    } else if (leader_) {
      if (!failing_since) failing_since = now;
      if (taken_over_ || now - *failing_since > options_.renew_deadline) {
        leader_ = false;
        spdlog::error("leader election: {}, stepping down",
                      taken_over_ ? "another replica holds the lease"
                                  : "could not renew for " + std::to_string(options_.renew_deadline.count()) + " ms");
        if (on_stopped_) on_stopped_();
      }
    }
    swarm::MutexLock lock(mu_);
    cv_.wait_for(mu_, options_.retry_period, [this] { return stop_.load(); });
  }
}

}  // namespace swarm::kube
