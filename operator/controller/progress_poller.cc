#include "operator/controller/progress_poller.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <stdexcept>

#include "registry/registry_client.h"

namespace swarm::op {
namespace {

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The job's secret could not be read (ProgressTarget::secret_error).
struct SecretUnreadable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whether a reading differs from the last in anything status shows.
bool differs(const ProgressReading& a, const ProgressReading& b) {
  if (a.ok != b.ok || a.error_reason != b.error_reason || a.url != b.url) return true;
  if (!a.ok) return false;  // the same failure again: nothing new to write
  const auto& x = a.progress;
  const auto& y = b.progress;
  if (x.step != y.step || x.samples_per_second != y.samples_per_second || x.stats.rebalance_moves != y.stats.rebalance_moves ||
      x.stats.events != y.stats.events || x.stats.failure != y.stats.failure || x.stages.size() != y.stages.size())
    return true;
  for (size_t i = 0; i < x.stages.size(); ++i) {
    const auto& s = x.stages[i];
    const auto& t = y.stages[i];
    if (s.step != t.step || s.samples_per_second != t.samples_per_second || s.queue_length != t.queue_length ||
        s.live_workers != t.live_workers)
      return true;
  }
  return false;
}

}  // namespace

ProgressPoller::ProgressPoller(ProgressPollerOptions options, Targets targets, Changed changed, Observed observed)
    : options_(std::move(options)), targets_(std::move(targets)), changed_(std::move(changed)),
      observed_(std::move(observed)) {}

ProgressPoller::~ProgressPoller() { stop(); }

void ProgressPoller::start() {
  swarm::MutexLock lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { loop(); });
}

void ProgressPoller::stop() {
  {
    swarm::MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<ProgressReading> ProgressPoller::latest(const std::string& key) const {
  swarm::MutexLock lock(mu_);
  auto it = readings_.find(key);
  if (it == readings_.end()) return std::nullopt;
  return it->second;
}

void ProgressPoller::loop() {
  const auto period = std::chrono::milliseconds(static_cast<long long>(options_.period_seconds * 1000));
  while (true) {
    const auto tick = std::chrono::steady_clock::now();
    std::vector<ProgressTarget> targets;
    try {
      targets = targets_();
    } catch (const std::exception& e) {
      spdlog::warn("progress: listing jobs failed: {}", e.what());
    }
    {
      // Forget jobs no longer read (deleted, or not running); the status keeps their last figures.
      swarm::MutexLock lock(mu_);
      std::map<std::string, std::string> keep;
      for (const auto& t : targets) keep[t.key] = t.uid;
      for (auto it = readings_.begin(); it != readings_.end();) {
        auto k = keep.find(it->first);
        if (k == keep.end() || k->second != uids_[it->first]) {
          uids_.erase(it->first);
          clock_offsets_.erase(it->first);
          it = readings_.erase(it);
        } else {
          ++it;
        }
      }
    }
    std::atomic<size_t> next{0};
    auto stopping = [this]() EXCLUDES(mu_) {
      swarm::MutexLock lock(mu_);
      return stop_;
    };
    // stop() waits only for the requests in flight: no new one starts once it was called.
    auto work = [&] {
      for (size_t i = next++; i < targets.size() && !stopping(); i = next++) poll_one(targets[i]);
    };
    std::vector<std::thread> pool;
    const size_t n = std::min<size_t>(targets.size(), static_cast<size_t>(std::max(1, options_.concurrency)));
    for (size_t i = 1; i < n; ++i) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();

    swarm::MutexLock lock(mu_);
    if (cv_.wait_until(mu_, tick + period, [this]() REQUIRES(mu_) { return stop_; })) return;
  }
}

void ProgressPoller::poll_one(const ProgressTarget& t) {
  ProgressReading r;
  r.url = t.base_url;
  std::vector<planner::PeerRecord> workers;
  RegistryStats stats;
  int64_t offset = 0;  // the registry's clock minus ours, as last seen
  {
    swarm::MutexLock lock(mu_);
    if (auto it = clock_offsets_.find(t.key); it != clock_offsets_.end()) offset = it->second;
  }
  try {
    if (!t.secret_error.empty()) throw SecretUnreadable(t.secret_error);
    registry::RegistryClient client(
        t.base_url, std::chrono::milliseconds(static_cast<long long>(options_.timeout_seconds * 1000)), t.secret,
        [offset] { return unix_ms() + offset; });
    workers = client.peers();  // workers and trainers (their loss)
    {
      swarm::MutexLock lock(mu_);
      if (stop_) return;
      clock_offsets_[t.key] = offset + client.clock_offset_ms();
    }
    stats = parse_registry_stats(client.stats());
    r.ok = true;
  } catch (const SecretUnreadable& e) {
    r.error = "registry " + t.base_url + ": cannot sign requests without the job secret: " + e.what();
    r.error_reason = "RegistrySecretUnreadable";
  } catch (const registry::RegistryError& e) {
    r.error = e.what();
    const bool bad_url = r.error.find("bad base URL") != std::string::npos;
    r.error_reason = e.status() == 401   ? "RegistryUnauthorized"
                     : e.status() == 0 && !bad_url ? "RegistryUnreachable"
                                                   : "RegistryBadReply";
  } catch (const std::exception& e) {
    r.error = "registry " + t.base_url + "/v1/stats: " + e.what();
    r.error_reason = "RegistryBadReply";
  }

  if (observed_) observed_(r.ok ? "ok" : r.error_reason);
  bool notify = false;
  {
    swarm::MutexLock lock(mu_);
    if (stop_) return;
    auto& uid = uids_[t.key];
    auto it = readings_.find(t.key);
    const bool fresh = it == readings_.end() || uid != t.uid;
    uid = t.uid;
    ProgressReading previous;
    if (!fresh) previous = it->second;
    r.progress = previous.progress;
    r.has_progress = previous.has_progress;
    r.step_changed_unix = previous.step_changed_unix;
    r.read_unix = previous.read_unix;
    if (r.ok) {
      r.read_unix = unix_now();
      const double now = steady_now();
      r.progress = merge_progress(previous.progress, workers, stats, t.stages, t.global_batch, now, options_.window_seconds);
      r.has_progress = true;
      if (r.progress.step_changed_at == now) r.step_changed_unix = unix_now();
    }
    notify = fresh || differs(r, previous);
    if (!r.ok && (fresh || previous.ok))
      spdlog::warn("progress {}: {}", t.key, r.error);
    readings_[t.key] = std::move(r);
  }
  if (notify && changed_) changed_(t.key);
}

}  // namespace swarm::op
