#include "worker/local/baseline.h"

#include <torch/torch.h>

#include <unistd.h>

#include <cstdio>

#include "common/cpu_cores.h"
#include "worker/data/text_dataset.h"
#include "worker/data/tokenizer.h"
#include "worker/checkpoint/hf_init.h"
#include "worker/model/device.h"
#include "worker/model/optimizer.h"
#include "worker/model/stage.h"
#include "worker/runtime/clock.h"
#include "worker/runtime/job_model.h"
#include "worker/local/launcher.h"
#include "worker/local/report.h"

namespace swarm::runtime {

namespace {

// The baseline's state across steps: every stage's model and optimizer in this process, the data
// stream, and the report being filled in.
class SingleProcess {
 public:
  SingleProcess(const JobSpec& spec, const BaselineOptions& options)
      : spec_(spec),
        options_(options),
        device_(model::pick_device(spec.workers.device)),
        dataset_(data::load_dataset(spec)),
        sampler_(dataset_, spec.model.sequence_length, spec.training.seed, 0),
        B_(spec.training.microbatch),
        T_(spec.model.sequence_length),
        per_step_(spec.training.global_batch / B_) {
    const auto cfg = model_config(spec);
    for (int s = 0; s < spec.pipeline.stages; ++s) {
      stages_.push_back(model::make_stage(cfg, s, stage_seed(spec)));
      load_model_init(spec, *stages_.back());  // spec.model.init: the checkpoint's tensors, as a worker's
      stages_.back()->to(device_);
      optimizers_.push_back(std::make_unique<model::StageOptimizer>(*stages_.back(), optimizer_config(spec)));
    }
    report_.peers_per_stage.assign(spec.pipeline.stages, 1);
    if (options_.eval_batches < 0) options_.eval_batches = static_cast<int>(spec.training.eval_batches);
  }

  // One optimizer step: per_step microbatches through every stage, then every stage's update.
  void step() {
    for (int64_t k = 0; k < per_step_; ++k) {
      sampler_.next(B_, in_, tg_);
      auto loss = forward(in_, tg_);
      // Same arithmetic as the swarm: gradients summed over samples, divided by the step's total.
      (loss * static_cast<double>(B_)).backward();
      record_loss(loss.item<double>());
    }
    for (size_t s = 0; s < stages_.size(); ++s) {
      torch::NoGradGuard no_grad;
      for (auto& p : stages_[s]->parameters())
        if (p.grad().defined()) p.mutable_grad().div_(static_cast<double>(per_step_ * B_));
      optimizers_[s]->step();
    }
  }

  // The report's progress sample, and options.on_progress about once a second.
  void progress(double started, double& last_progress) {
    if (report_.progress.empty() || now_seconds() - started - report_.progress.back().first >= 1.0)
      report_.progress.emplace_back(now_seconds() - started, report_.samples);
    if (options_.on_progress && now_seconds() - last_progress >= 1.0) {
      last_progress = now_seconds();
      report_.train_seconds = last_progress - started;
      report_.samples_per_second = report_.samples / report_.train_seconds;
      report_.loss_last = recent_mean();
      options_.on_progress(report_);
    }
  }

  // The validation loss over options.eval_batches microbatches.
  double evaluate() {
    torch::NoGradGuard no_grad;
    double total = 0;
    for (int i = 0; i < options_.eval_batches; ++i) {
      sampler_.validation_batch(B_, i, in_, tg_);
      total += forward(in_, tg_).item<double>();
    }
    return options_.eval_batches ? total / options_.eval_batches : 0;
  }

  double recent_mean() const {
    double m = 0;
    for (double v : recent_) m += v / static_cast<double>(recent_.size());
    return m;
  }

  TrainerReport& report() { return report_; }

 private:
  torch::Tensor forward(const std::vector<int64_t>& ids, const std::vector<int64_t>& tgt) {
    auto x = torch::from_blob(const_cast<int64_t*>(ids.data()), {B_, T_}, torch::kInt64).to(device_);
    auto y = torch::from_blob(const_cast<int64_t*>(tgt.data()), {B_, T_}, torch::kInt64).to(device_);
    for (auto& st : stages_) x = st->forward(x);
    return stages_.back()->loss(x, y);
  }

  void record_loss(double l) {
    if (static_cast<int64_t>(report_.loss_curve.size()) < per_step_) report_.loss_first += l / per_step_;
    recent_.push_back(l);
    if (static_cast<int64_t>(recent_.size()) > per_step_) recent_.erase(recent_.begin());
    report_.loss_ema = report_.microbatches == 0 ? l : 0.9 * report_.loss_ema + 0.1 * l;
    report_.samples += B_;
    report_.microbatches++;
    if (report_.loss_curve.size() < 4096) report_.loss_curve.emplace_back(report_.samples, l);
  }

  const JobSpec& spec_;
  BaselineOptions options_;  // a copy: eval_batches resolved against the spec
  const torch::Device device_;
  std::vector<std::shared_ptr<model::StageModel>> stages_;
  std::vector<std::unique_ptr<model::StageOptimizer>> optimizers_;
  data::TextDataset dataset_;
  data::BatchSampler sampler_;
  const int64_t B_, T_, per_step_;
  TrainerReport report_;
  std::vector<double> recent_;
  std::vector<int64_t> in_, tg_;
};

// At most about 256 points of the loss curve (every stride-th one).
void thin_loss_curve(TrainerReport& report) {
  if (report.loss_curve.size() <= 256) return;
  std::vector<std::pair<int64_t, double>> thin;
  const size_t stride = report.loss_curve.size() / 256;
  for (size_t i = 0; i < report.loss_curve.size(); i += stride) thin.push_back(report.loss_curve[i]);
  report.loss_curve.swap(thin);
}

}  // namespace

TrainerReport run_single_process(const JobSpec& spec, const BaselineOptions& options,
                                 const std::atomic<bool>& stop) {
  const int threads = options.threads > 0 ? options.threads
                                          : usable_cores();
  torch::set_num_threads(threads);
  const int64_t max_steps = options.max_steps > 0 ? options.max_steps : spec.training.max_steps;
  SingleProcess run(spec, options);
  TrainerReport& report = run.report();
  const double started = now_seconds();
  double last_progress = started;
  int64_t step = 0;
  while (step < max_steps && !stop &&
         (options.max_seconds <= 0 || now_seconds() - started < options.max_seconds)) {
    run.step();
    ++step;
    report.steps = step;
    run.progress(started, last_progress);
  }
  report.train_seconds = now_seconds() - started;
  report.samples_per_second = report.train_seconds > 0 ? report.samples / report.train_seconds : 0;
  report.loss_last = run.recent_mean();
  report.stage_steps.assign(spec.pipeline.stages, step);
  report.finished = step >= max_steps;
  if (!stop) report.eval_loss = run.evaluate();
  thin_loss_curve(report);
  return report;
}

int run_local_baseline(const LocalOptions& o, const JobSpec& spec, int64_t max_steps, double started,
                 const std::atomic<bool>& stop) {
  const bool tty = o.progress && ::isatty(1);
  BaselineOptions bo;
  bo.max_steps = max_steps;
  bo.max_seconds = o.max_seconds;
  bo.threads = o.threads_per_worker;
  if (o.progress) bo.on_progress = [&](const TrainerReport& r) { show(r.to_json(), max_steps, tty, false); };
  auto report = run_single_process(spec, bo, stop).to_json();
  if (o.progress) show(report, max_steps, tty, true);
  auto summary = make_summary(report, "single-process", now_seconds() - started);
  summary.erase("loss_curve");
  summary.erase("progress");
  write_summary(o.summary_path, make_summary(report, "single-process", now_seconds() - started));
  std::printf("%s\n", summary.dump(2).c_str());
  return stop ? 130 : 0;
}

}  // namespace swarm::runtime
