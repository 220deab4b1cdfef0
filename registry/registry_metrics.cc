#include "registry/registry_metrics.h"

#include <algorithm>
#include <vector>

#include <prometheus/text_serializer.h>

#include "registry/request_auth.h"

namespace swarm::registry {

RegistryMetrics::RegistryMetrics(int num_stages)
    : num_stages_(num_stages), registry_(std::make_shared<prometheus::Registry>()) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  rebalance_moves_ = &BuildCounter()
                          .Name("swarm_rebalance_moves_total")
                          .Help("Stage moves planned by the rebalancer")
                          .Register(*registry_)
                          .Add({});
  events_ = &BuildCounter()
                 .Name("swarm_swarm_events_total")
                 .Help("Events reported by peers and the launcher (preemptions, checkpoint restores, lost "
                       "samples, hand-offs, re-syncs, state downloads)")
                 .Register(*registry_);
  peers_ = &BuildGauge().Name("swarm_registry_peers").Help("Live peers by role, stage and state").Register(*registry_);
  job_failed_ = &BuildGauge()
                     .Name("swarm_job_failed")
                     .Help("1 once the job failed (a stage came back without its state while others had "
                           "trained: reason StageReset); see GET /v1/stats \"failure\"")
                     .Register(*registry_)
                     .Add({});
  stage_resets_ = &BuildCounter()
                       .Name("swarm_stage_reset_total")
                       .Help("Stages that came back without their state (no live peer, no checkpoint) after "
                             "the job had trained")
                       .Register(*registry_)
                       .Add({});
  auth_failures_ = &BuildCounter()
                        .Name("swarm_registry_auth_failures_total")
                        .Help("Requests refused for their Authorization (missing, malformed, bad_signature, "
                              "timestamp, replayed, cache_full)")
                        .Register(*registry_);
  for (auth::Failure f : auth::kFailures) auth_failures_->Add({{"reason", auth::reason_label(f)}});
  if (num_stages_ > 0) {
    stage_workers_ = &BuildGauge()
                          .Name("swarm_registry_stage_workers")
                          .Help("Live workers per stage of the job (any state)")
                          .Register(*registry_);
    // Every stage of the job, 0 included: an empty stage stalls training, and a series that is
    // absent could not say so.
    for (int st = 0; st < num_stages_; ++st) stage_workers_->Add({{"stage", std::to_string(st)}});
  }
}

void RegistryMetrics::add_event(const std::string& kind, int64_t count) {
  events_->Add({{"kind", kind}}).Increment(static_cast<double>(count));
}

void RegistryMetrics::add_rebalance_move() { rebalance_moves_->Increment(); }

void RegistryMetrics::add_stage_reset() { stage_resets_->Increment(); }

void RegistryMetrics::set_failed() { job_failed_->Set(1); }

void RegistryMetrics::add_auth_failure(const std::string& reason) {
  auth_failures_->Add({{"reason", reason}}).Increment();
}

void RegistryMetrics::set_census(const Census& census) {
  for (auto it = census_.begin(); it != census_.end();) {
    if (census.count(it->first)) {
      ++it;
    } else {
      peers_->Remove(it->second);
      it = census_.erase(it);
    }
  }
  std::vector<int> per_stage(static_cast<size_t>(std::max(num_stages_, 0)), 0);
  for (const auto& [key, count] : census) {
    const auto& [role, stage, state] = key;
    auto [it, added] = census_.try_emplace(key, nullptr);
    if (added) it->second = &peers_->Add({{"role", role}, {"stage", std::to_string(stage)}, {"state", state}});
    it->second->Set(count);
    if (role == "worker" && stage >= 0 && stage < num_stages_) per_stage[static_cast<size_t>(stage)] += count;
  }
  for (int st = 0; st < num_stages_; ++st)
    stage_workers_->Add({{"stage", std::to_string(st)}}).Set(per_stage[static_cast<size_t>(st)]);
}

std::string RegistryMetrics::exposition() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace swarm::registry
