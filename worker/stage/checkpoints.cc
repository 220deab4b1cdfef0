// A stage's checkpoints as its peers use them: which files are the job's (the key ids of its
// secret and of the one before a rotation), opening one, writing one on the writer's thread and
// when to, and what a peer says of files it could not restore (once per file) and of a stage that
// has no checkpoint of its own. The format and the stores: worker/checkpoint/.
#include <spdlog/spdlog.h>

#include "worker/checkpoint/checkpoint.h"
#include "worker/model/state.h"
#include "worker/stage/stage_server_impl.h"

namespace swarm::runtime {

std::vector<std::string> StageServer::Impl::own_key_ids() const {
  std::vector<std::string> ids{checkpoint_key_id(checkpoint_key(opt.secret))};
  if (!opt.previous_secret.empty()) ids.push_back(checkpoint_key_id(checkpoint_key(opt.previous_secret)));
  return ids;
}

void StageServer::Impl::note_unusable_checkpoints(int s, const std::vector<std::string>& foreign,
                                                  const std::vector<std::string>& refused) {
  std::vector<std::string> new_foreign, new_refused;
  {
    swarm::MutexLock lk(mu);
    auto& [f_seen, r_seen] = unusable_checkpoints[s];
    for (const auto& p : foreign)
      if (f_seen.insert(p).second) new_foreign.push_back(p);
    for (const auto& p : refused)
      if (r_seen.insert(p).second) new_refused.push_back(p);
  }
  if (!new_foreign.empty()) {
    spdlog::warn("worker {}: stage {}: {} checkpoint(s) in {} written by another job instance (another secret: a job "
                 "deleted and re-created under its name) left untouched and not restored, newest {}",
                 opt.peer_id, s, new_foreign.size(), opt.spec.checkpoint.path, new_foreign.front());
    report_event("foreign_checkpoints", static_cast<int64_t>(new_foreign.size()));
  }
  for (const auto& why : new_refused) spdlog::error("worker {}: checkpoint {}", opt.peer_id, why);
  if (!new_refused.empty()) report_event("checkpoints_refused", static_cast<int64_t>(new_refused.size()));
}

std::string StageServer::Impl::why_no_checkpoint(int s) const {
  const std::string& path = opt.spec.checkpoint.path;
  if (path.empty()) return "no checkpoint location (give the job spec.checkpoint.path, or more peers per stage)";
  size_t foreign = 0, refused = 0;
  {
    swarm::MutexLock lk(mu);
    auto it = unusable_checkpoints.find(s);
    if (it != unusable_checkpoints.end()) {
      foreign = it->second.first.size();
      refused = it->second.second.size();
    }
  }
  std::string why = "no checkpoint of this job in " + path + "/stage-" + std::to_string(s);
  if (foreign == 0 && refused == 0)
    return why + " (none written yet: the stage lost its last peer before its first checkpoint, spec.checkpoint."
                 "everySteps " + std::to_string(opt.spec.checkpoint.every_steps) + ")";
  return why + " (" + std::to_string(foreign) + " written by another job instance with another secret, left untouched; " +
         std::to_string(refused) + " refused, see the worker's log)";
}

std::string StageServer::Impl::open_checkpoint_of_job(const CheckpointFile& f, int s) const {
  const std::string bytes = read_checkpoint(CheckpointLocation(opt.spec.checkpoint), f);
  try {
    return authenticate_checkpoint(bytes, f, s, checkpoint_key(opt.secret));
  } catch (const std::exception&) {
    if (opt.previous_secret.empty()) throw;
    // Written before the secret's rotation.
    return authenticate_checkpoint(bytes, f, s, checkpoint_key(opt.previous_secret));
  }
}

void StageServer::Impl::write_checkpoint_now(bool wait) {
  {
    swarm::MutexLock lk(mu);
    if (failed) return;  // its parameters are the initial ones, not the stage's: never a checkpoint
  }
  if (!checkpoint_writer) return;
  checkpoint_writer->submit({stage.load(), step.load(), model::save_state(*model, *optimizer)});
  if (wait) checkpoint_writer->flush();
}

void StageServer::Impl::write_checkpoint_job(CheckpointJob& job) {
  try {
    auto path = write_checkpoint(CheckpointLocation(opt.spec.checkpoint), job.stage, job.step, std::move(job.state),
                                 opt.spec.checkpoint.keep, checkpoint_key(opt.secret), own_key_ids());
    spdlog::info("worker {}: checkpoint {}", opt.peer_id, path);
  } catch (const std::exception& e) {
    // Training goes on (the previous checkpoints stay intact); the count shows the stage is at
    // risk should it lose its last peer.
    spdlog::error("worker {}: {}", opt.peer_id, e.what());
    report_event("checkpoint_failures", 1);
  }
}

void StageServer::Impl::maybe_checkpoint(bool writer) {
  if (!writer || opt.spec.checkpoint.path.empty()) return;
  // Every everySteps steps, and the last step of the training (what the export at the end takes).
  const int64_t now = step.load();
  if (now % opt.spec.checkpoint.every_steps != 0 && now != max_steps()) return;
  write_checkpoint_now();
}

}  // namespace swarm::runtime
