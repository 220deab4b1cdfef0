// The training loops of a trainer: SWARM's lanes (inflightMicrobatches microbatches in flight,
// each routed on its own) and the GPipe baseline (a step's microbatches at once, then a flush).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "worker/trainer/trainer_impl.h"

namespace swarm::runtime {

void Trainer::Impl::train(const std::atomic<bool>& stop) {
  train_started = now_seconds();
  const double deadline = opt.max_seconds > 0 ? train_started + opt.max_seconds : 0;
  std::atomic<uint64_t> seq{0};
  auto keep_going = [&] {
    return !stop && min_step() < opt.max_steps && (deadline == 0 || now_seconds() < deadline);
  };
  if (opt.gpipe) return train_gpipe(keep_going);
  std::vector<std::thread> lanes;
  for (int i = 0; i < opt.spec.trainers.inflight_microbatches; ++i) {
    lanes.emplace_back([&] {
      while (keep_going()) {
        try {
          run_microbatch(seq++);
        } catch (const std::exception& e) {
          lost++;
          metrics->add_microbatch_lost();
          spdlog::warn("trainer {}: microbatch lost: {}", opt.peer_id, e.what());
        }
      }
    });
  }
  for (auto& t : lanes) t.join();
  end_training();
}

// Training is over: the bytes it moved are counted before the eval batches add theirs.
void Trainer::Impl::end_training() {
  {
    swarm::MutexLock lk(peers_mu);
    account_bytes();
    train_wire_bytes = wire_bytes;
  }
  train_ended = now_seconds();
}

// After a flush every stage steps on the flushed samples: asks each stage until it reports that step
// (a reply carries the step it was computed at, so the last flush's step shows only in a later one).
void Trainer::Impl::await_stage_steps(int64_t target) {
  const double until = now_seconds() + opt.spec.timeouts.averaging_seconds;
  for (int s = 0; s < stages; ++s) {
    while (stage_step[s].load() < target && now_seconds() < until) {
      const auto peer = routers[s]->pick_peer(planner::Op::Forward, 1, now_seconds(), {});
      if (auto client = peer ? client_for(*peer) : nullptr) {
        try {
          note_step(s, parse_meta(client->call(make_message(net::Ping, nlohmann::json::object()), to_ms(1.0))));
        } catch (const std::exception&) {
        }
      }
      if (stage_step[s].load() < target) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

// GPipe: a step's global batch as microbatches all in flight at once (each stage's queue takes their
// forwards before their backwards), then a flush: the next step starts when every one is done, so
// each stage steps on exactly this step's samples. A lost microbatch ends the run.
void Trainer::Impl::train_gpipe(const std::function<bool()>& keep_going) {
  // With several pipelines, this one's share of the global batch (the launcher checks it divides).
  const int64_t per_step =
      opt.spec.training.global_batch / opt.spec.training.microbatch / std::max(1, opt.gpipe_pipelines);
  uint64_t seq = 0;
  // Steps are counted here: a stage reports the step its last flush completed only in a later reply.
  for (int64_t step = min_step(); step < opt.max_steps && keep_going(); ++step) {
    std::vector<std::thread> microbatches;
    std::atomic<bool> failed{false};
    for (int64_t i = 0; i < per_step; ++i) {
      microbatches.emplace_back([this, &failed, s = seq++] {
        try {
          run_microbatch(s);
        } catch (const std::exception& e) {
          lost++;
          metrics->add_microbatch_lost();
          failed = true;
          spdlog::error("trainer {}: microbatch lost: {}", opt.peer_id, e.what());
        }
      });
    }
    for (auto& t : microbatches) t.join();
    if (!failed) await_stage_steps(step + 1);
    if (failed) {
      end_training();
      throw std::runtime_error("trainer " + opt.peer_id + ": gpipe lost a microbatch (no failover); stopping");
    }
  }
  end_training();
}

}  // namespace swarm::runtime
