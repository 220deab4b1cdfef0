#include "operator/controller/controller.h"

#include <spdlog/spdlog.h>

#include "operator/api/swarmjob.h"
#include "operator/controller/capacity_facts.h"
#include "operator/controller/manifests.h"
#include "operator/kueue/workload.h"

namespace swarm::op {

Controller::Controller(kube::Client& client, kube::EventRecorder& events, OperatorMetrics& metrics,
                       ControllerOptions options)
    : client_(client), metrics_(metrics), options_(std::move(options)) {
  kube::InformerOptions jobs, pods, nodes, bound;
  jobs.group_version = kGroupVersion;
  jobs.plural = kPlural;
  jobs.namespace_ = options_.namespace_;
  pods.group_version = "v1";
  pods.plural = "pods";
  pods.namespace_ = options_.namespace_;
  pods.label_selector = std::string(kLabelManagedBy) + "=" + kManagedByValue;  // only ours
  nodes.group_version = "v1";
  nodes.plural = "nodes";
  // Capacity: every pod that holds a node's resources, whoever owns it, in every namespace (a
  // node is shared); cached as its requests only.
  bound.group_version = "v1";
  bound.plural = "pods";
  bound.field_selector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";
  bound.transform = [](kube::json& pod) { pod = capacity_view(pod); };
  jobs_ = std::make_unique<kube::Informer>(client, jobs);
  pods_ = std::make_unique<kube::Informer>(client, pods);
  nodes_ = std::make_unique<kube::Informer>(client, nodes);
  bound_pods_ = std::make_unique<kube::Informer>(client, bound);
  world_ = std::make_unique<World>(*jobs_, *pods_, *nodes_, bound_pods_.get());
  reconciler_ = std::make_unique<Reconciler>(client, events, metrics, *world_);
  if (options_.network_policies) reconciler_->set_network_policy(options_.network_policy);
  if (options_.progress.period_seconds > 0) {
    secrets_ = std::make_unique<JobSecrets>(client);
    progress_ = std::make_unique<ProgressPoller>(
        options_.progress, [this] { return progress_targets(); }, [this](const std::string& key) { queue_.add(key); },
        [this](const std::string& result) { metrics_.add_registry_read(result); });
    reconciler_->set_progress_source(progress_.get());
  }
  if (options_.kueue) setup_kueue();
  jobs_->add_handler([this](kube::EventType t, const kube::json& o, const kube::json*) { on_job(t, o); });
  pods_->add_handler([this](kube::EventType t, const kube::json& o, const kube::json* old) { on_pod(t, o, old); });
  nodes_->add_handler([this](kube::EventType t, const kube::json& o, const kube::json* old) { on_node(t, o, old); });
  // Someone else's pod that leaves a node frees room: jobs short of workers can place them now
  // (one pass per second at most, whatever the churn; our own pods' events reconcile their job).
  bound_pods_->add_handler([this](kube::EventType t, const kube::json& o, const kube::json*) {
    if (t != kube::EventType::Deleted) return;
    if (o["metadata"].value("labels", kube::json::object()).contains(kLabelManagedBy)) return;
    for (const auto& j : jobs_->list()) queue_.add_after(kube::object_key(j), std::chrono::seconds(1));
  });
  // The API server answers again after a spell away (restarted, upgraded, a network cut): every
  // informer retries its watch now and every job whose reconcile failed meanwhile is reconciled
  // now, instead of each waiting out its backoff (up to 6 s; issue 29, item 3).
  client_.on_reachable_again = [this] {
    spdlog::info("the API server answers again: informers and backed-off jobs retry now");
    for (auto* i : informers()) i->nudge();
    queue_.retry_waiting_now();
    // Nodes that turn Unknown now are the outage's doing, not theirs (World::notice_for_node):
    // every job looks again once the grace has passed, at nodes still silent then.
    world_->note_api_back();
    for (const auto& j : jobs_->list())
      queue_.add_after(kube::object_key(j), std::chrono::milliseconds(static_cast<long long>(kApiBackGraceSeconds * 1000) + 500));
  };
}

Controller::~Controller() {
  stop();
  client_.on_reachable_again = nullptr;  // the client may outlive this controller
}

void Controller::setup_kueue() {
  kube::InformerOptions workloads, flavors, classes;
  workloads.group_version = flavors.group_version = classes.group_version = kueue::kGroupVersion;
  workloads.plural = kueue::kWorkloadsPlural;
  workloads.namespace_ = options_.namespace_;
  workloads.label_selector = std::string(kLabelManagedBy) + "=" + kManagedByValue;  // only ours
  flavors.plural = kueue::kResourceFlavorsPlural;
  classes.plural = kueue::kPriorityClassesPlural;
  workloads_ = std::make_unique<kube::Informer>(client_, workloads);
  flavors_ = std::make_unique<kube::Informer>(client_, flavors);
  priority_classes_ = std::make_unique<kube::Informer>(client_, classes);
  kueue_ = std::make_unique<KueueSync>(client_, *workloads_, *flavors_, *priority_classes_);
  reconciler_->set_kueue(kueue_.get(), options_.kueue_default_queue);
  // Kueue admitted, evicted or finished a Workload: its job decides at once.
  workloads_->add_handler([this](kube::EventType, const kube::json& o, const kube::json*) {
    const auto& md = o["metadata"];
    const std::string job = md.value("labels", kube::json::object()).value(kLabelJob, "");
    if (!job.empty()) queue_.add(md.value("namespace", "") + "/" + job);
  });
  // A flavor or a priority class changed (rare): every job in a queue looks again.
  auto queued_jobs = [this](kube::EventType, const kube::json&, const kube::json*) {
    for (const auto& j : jobs_->list())
      if (!options_.kueue_default_queue.empty() ||
          j["metadata"].value("labels", kube::json::object()).contains(kueue::kQueueNameLabel))
        queue_.add_after(kube::object_key(j), std::chrono::milliseconds(200));
  };
  flavors_->add_handler(queued_jobs);
  priority_classes_->add_handler(queued_jobs);
}

std::vector<kube::Informer*> Controller::informers() const {
  std::vector<kube::Informer*> out = {nodes_.get(), bound_pods_.get(), pods_.get(), jobs_.get()};
  for (auto* k : {workloads_.get(), flavors_.get(), priority_classes_.get()})
    if (k) out.push_back(k);
  return out;
}

void Controller::start() {
  // With --kueue and no Kueue CRDs, its caches stay unsynced: jobs in a queue wait (the reconcile
  // says why), the others run.
  for (auto* i : informers()) i->start();
  stats_ = std::thread([this] {
    while (!stop_) {
      metrics_.set_queue_depth(static_cast<double>(queue_.depth()));
      metrics_.set_relists("swarmjobs", static_cast<double>(jobs_->relists()));
      metrics_.set_relists("pods", static_cast<double>(pods_->relists()));
      metrics_.set_relists("nodes", static_cast<double>(nodes_->relists()));
      metrics_.set_relists("boundpods", static_cast<double>(bound_pods_->relists()));
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
}

bool Controller::wait_synced(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto* i : informers()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!i->wait_synced(std::max(left, std::chrono::milliseconds(0)))) return false;
  }
  return true;
}

void Controller::lead() {
  if (leading_.exchange(true)) return;
  // Level-based: a new leader looks at every job once, whatever it missed.
  for (const auto& j : jobs_->list()) queue_.add(kube::object_key(j));
  for (int i = 0; i < options_.workers; ++i) threads_.emplace_back([this] { work(); });
  if (progress_) progress_->start();
}

std::vector<ProgressTarget> Controller::progress_targets() const {
  std::vector<ProgressTarget> out;
  for (const auto& obj : jobs_->list()) {
    const auto status = obj.value("status", kube::json::object());
    const std::string phase = status.value("phase", "");
    if (phase != "Running" && phase != "Degraded") continue;
    if (obj["metadata"].contains("deletionTimestamp")) continue;
    SwarmJob job;
    try {
      job = parse_swarmjob(obj);
    } catch (const std::exception&) {
      continue;  // an invalid spec is reported by the reconcile; nothing to read for it
    }
    ProgressTarget t{kube::object_key(obj), job.uid, registry_url_for(obj, options_.progress.url_template),
                     static_cast<int>(job.spec.pipeline.stages), job.spec.training.global_batch};
    try {
      t.secret = secrets_->get(job);
    } catch (const std::exception& e) {
      t.secret_error = e.what();
    }
    out.push_back(std::move(t));
  }
  return out;
}

void Controller::stop() {
  if (stop_.exchange(true)) return;
  if (progress_) progress_->stop();
  queue_.shutdown();
  for (auto& t : threads_) t.join();
  threads_.clear();
  for (auto* i : informers()) i->stop();
  if (stats_.joinable()) stats_.join();
}

void Controller::on_job(kube::EventType, const kube::json& obj) { queue_.add(kube::object_key(obj)); }

void Controller::on_pod(kube::EventType t, const kube::json& obj, const kube::json* old) {
  const auto& md = obj["metadata"];
  const std::string job = md.value("labels", kube::json::object()).value(kLabelJob, "");
  if (job.empty()) return;
  const std::string key = md.value("namespace", "") + "/" + job;
  const std::string pod_key = md.value("namespace", "") + "/" + md.value("name", "");
  const bool notice = t != kube::EventType::Deleted && pod_notice(obj).has_value();
  if (notice && !(old && pod_notice(*old))) world_->note_notice(pod_key);
  if (t == kube::EventType::Deleted) world_->clear_notice(pod_key);
  queue_.add(key);
}

void Controller::on_node(kube::EventType t, const kube::json& obj, const kube::json* old) {
  const std::string node = obj["metadata"].value("name", "");
  const bool had = old && node_notice(*old).has_value();
  const bool has = t == kube::EventType::Deleted || node_notice(obj).has_value();
  if (has && !had) world_->note_notice(node);
  if (!has && had) world_->clear_notice(node);
  if (has != had || t == kube::EventType::Deleted || t == kube::EventType::Added) {
    // A reclaim notice (or capacity coming back): every job with pods there, right away.
    for (const auto& key : world_->jobs_on_node(node)) queue_.add(key);
  }
  // Capacity changed (a node came, went, was cordoned, turned NotReady or Ready, or changed its
  // allocatable): every job places against it, after a moment so a burst of node events is one pass.
  bool capacity_changed = t != kube::EventType::Modified || !old;
  if (!capacity_changed) {
    const auto a = node_facts(*old), b = node_facts(obj);
    capacity_changed = planner::usable(a) != planner::usable(b) || a.allocatable != b.allocatable ||
                       a.labels != b.labels || a.taints.size() != b.taints.size();
  }
  if (capacity_changed)
    for (const auto& j : jobs_->list()) queue_.add_after(kube::object_key(j), std::chrono::milliseconds(200));
}

void Controller::work() {
  std::string key;
  while (queue_.get(key)) {
    const auto start = std::chrono::steady_clock::now();
    bool ok = true;
    try {
      auto r = reconciler_->reconcile(key);
      queue_.forget(key);
      const double resync = options_.resync_seconds;
      const double after = r.requeue_after_seconds > 0 ? std::min(r.requeue_after_seconds, resync) : resync;
      queue_.add_after(key, std::chrono::milliseconds(static_cast<long long>(after * 1000)));
    } catch (const std::exception& e) {
      ok = false;
      spdlog::warn("reconcile {}: {} (retry in {} ms)", key, e.what(),
                   std::chrono::duration_cast<std::chrono::milliseconds>(queue_.next_backoff(key)).count());
      queue_.add_rate_limited(key);
    }
    metrics_.observe_reconcile(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), ok);
    queue_.done(key);
  }
}

}  // namespace swarm::op
