// swarm job from-hf: a SwarmJob manifest for a Hugging Face checkpoint (common/hf_job.h), written
// to stdout, its stages' layers balanced by the planner (planner/layer_split.h).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace swarm::cli {

struct JobCommand {
  CLI::App* cmd = nullptr;
  CLI::App* from_hf = nullptr;
  std::string dir, name = "hf-llama", data, tokenizer_model;
  int64_t stages = 3, sequence_length = 0;
  double learning_rate = 1e-4;
  void add_to(CLI::App& app);
  int run() const;
};

}  // namespace swarm::cli
