#include "worker/swarm/baseline.h"

#include <torch/torch.h>

#include <thread>

#include "worker/data/text_dataset.h"
#include "worker/model/device.h"
#include "worker/model/optimizer.h"
#include "worker/model/stage.h"
#include "worker/swarm/clock.h"
#include "worker/swarm/job_model.h"

namespace swarm::runtime {

TrainerReport run_single_process(const JobSpec& spec, const BaselineOptions& options,
                                 const std::atomic<bool>& stop) {
  check_runtime_support(spec);
  const int threads = options.threads > 0 ? options.threads
                                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(threads);
  const int64_t max_steps = options.max_steps > 0 ? options.max_steps : spec.training.max_steps;
  const auto cfg = model_config(spec);
  const auto device = model::pick_device(spec.workers.device);
  std::vector<std::shared_ptr<model::StageModel>> stages;
  std::vector<std::unique_ptr<model::StageOptimizer>> optimizers;
  for (int s = 0; s < spec.pipeline.stages; ++s) {
    stages.push_back(model::make_stage(cfg, s, stage_seed(spec)));
    stages.back()->to(device);
    optimizers.push_back(std::make_unique<model::StageOptimizer>(*stages.back(), optimizer_config(spec)));
  }
  auto dataset = data::TextDataset::load(spec.training.dataset.path);
  data::BatchSampler sampler(dataset, spec.model.sequence_length, spec.training.seed, 0);
  const int64_t B = spec.training.microbatch, T = spec.model.sequence_length;
  const int64_t per_step = spec.training.global_batch / B;

  TrainerReport report;
  report.peers_per_stage.assign(spec.pipeline.stages, 1);
  std::vector<double> recent;
  const double started = now_seconds();
  double last_progress = started;
  std::vector<int64_t> in, tg;
  auto forward = [&](const std::vector<int64_t>& ids, const std::vector<int64_t>& tgt) {
    auto x = torch::from_blob(const_cast<int64_t*>(ids.data()), {B, T}, torch::kInt64).to(device);
    auto y = torch::from_blob(const_cast<int64_t*>(tgt.data()), {B, T}, torch::kInt64).to(device);
    for (auto& st : stages) x = st->forward(x);
    return stages.back()->loss(x, y);
  };
  int64_t step = 0;
  while (step < max_steps && !stop &&
         (options.max_seconds <= 0 || now_seconds() - started < options.max_seconds)) {
    for (int64_t k = 0; k < per_step; ++k) {
      sampler.next(B, in, tg);
      auto loss = forward(in, tg);
      // Same arithmetic as the swarm: gradients summed over samples, divided by the step's total.
      (loss * static_cast<double>(B)).backward();
      const double l = loss.item<double>();
      if (static_cast<int64_t>(report.loss_curve.size()) < per_step) report.loss_first += l / per_step;
      recent.push_back(l);
      if (static_cast<int64_t>(recent.size()) > per_step) recent.erase(recent.begin());
      report.loss_ema = report.microbatches == 0 ? l : 0.9 * report.loss_ema + 0.1 * l;
      report.samples += B;
      report.microbatches++;
      if (report.loss_curve.size() < 4096) report.loss_curve.emplace_back(report.samples, l);
    }
    for (size_t s = 0; s < stages.size(); ++s) {
      torch::NoGradGuard no_grad;
      for (auto& p : stages[s]->parameters())
        if (p.grad().defined()) p.mutable_grad().div_(static_cast<double>(per_step * B));
      optimizers[s]->step();
    }
    ++step;
    report.steps = step;
    if (report.progress.empty() || now_seconds() - started - report.progress.back().first >= 1.0)
      report.progress.emplace_back(now_seconds() - started, report.samples);
    if (options.on_progress && now_seconds() - last_progress >= 1.0) {
      last_progress = now_seconds();
      report.train_seconds = last_progress - started;
      report.samples_per_second = report.samples / report.train_seconds;
      report.loss_last = 0;
      for (double v : recent) report.loss_last += v / static_cast<double>(recent.size());
      options.on_progress(report);
    }
  }
  report.train_seconds = now_seconds() - started;
  report.samples_per_second = report.train_seconds > 0 ? report.samples / report.train_seconds : 0;
  report.loss_last = 0;
  for (double v : recent) report.loss_last += v / static_cast<double>(recent.size());
  report.stage_steps.assign(spec.pipeline.stages, step);
  report.finished = step >= max_steps;
  if (!stop) {
    torch::NoGradGuard no_grad;
    double total = 0;
    for (int i = 0; i < options.eval_batches; ++i) {
      sampler.validation_batch(B, i, in, tg);
      total += forward(in, tg).item<double>();
    }
    report.eval_loss = options.eval_batches ? total / options.eval_batches : 0;
  }
  if (report.loss_curve.size() > 256) {
    std::vector<std::pair<int64_t, double>> thin;
    const size_t stride = report.loss_curve.size() / 256;
    for (size_t i = 0; i < report.loss_curve.size(); i += stride) thin.push_back(report.loss_curve[i]);
    report.loss_curve.swap(thin);
  }
  return report;
}

}  // namespace swarm::runtime
