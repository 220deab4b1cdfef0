// swarm export | eval | generate: the trained model out of the checkpoints, its loss on data, and
// text sampled from it (worker/checkpoint/export.h).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace swarm::cli {

struct ExportCommand {
  std::string job, from, out, secret_file;
  std::string format = "swarm";            // swarm | huggingface
  std::string max_shard_size = "5GB";      // huggingface: shards with an index above this
  bool initial = false;
  CLI::App* cmd = nullptr;
  void add_to(CLI::App& app);
  int run() const;
};

struct EvalCommand {
  std::string model, data, tokenizer_model;
  int64_t batches = 16, batch = 8, sequence_length = 0;
  CLI::App* cmd = nullptr;
  void add_to(CLI::App& app);
  int run() const;
};

struct GenerateCommand {
  std::string model, prompt, tokenizer_model;
  std::string prompt_ids;  // --prompt-ids: the prompt as ids (a tokenizer the swarm cannot encode with)
  int64_t max_tokens = 200, top_k = 0, sequence_length = 0;
  double temperature = 0.8;
  uint64_t seed = 1;
  CLI::App* cmd = nullptr;
  void add_to(CLI::App& app);
  int run() const;
};

}  // namespace swarm::cli
