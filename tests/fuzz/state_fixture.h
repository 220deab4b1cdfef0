// What the state and checkpoint fuzz targets and make_seeds share: the tiny stage that blobs are
// loaded into, and how an input becomes a state blob.
//
// A state blob ends with a checksum of everything before it, which a mutation almost always
// breaks, and load_state checks it before it reads any tensor. So the first byte of an input is
// a flag: with bit 0 set the rest is a blob without its checksum and the target appends the right
// one (the mutations reach the tensor reader); otherwise the rest is the whole blob as received.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "tests/fuzz/fuzz_util.h"
#include "worker/model/config.h"
#include "worker/model/optimizer.h"
#include "worker/model/stage.h"
#include "worker/model/state.h"

namespace swarm::fuzz {

inline model::ModelConfig tiny_state_config() {
  model::ModelConfig c;
  c.vocab_size = 4;
  c.hidden_size = 8;
  c.num_heads = 2;
  c.sequence_length = 4;
  c.num_stages = 2;
  c.set_uniform_layers(1);
  c.gpt2.intermediate_size = c.hidden_size;
  return c;
}
inline constexpr int64_t kStateStage = 1;  // the last stage: a block and the LM head

// The stage and optimizer blobs are loaded into (made once; a load only changes their values).
struct TinyStage {
  std::shared_ptr<model::StageModel> model = model::make_stage(tiny_state_config(), kStateStage, 1);
  model::StageOptimizer optimizer{*model, model::OptimizerConfig{}};

  static TinyStage& get() {
    static TinyStage stage;
    return stage;
  }
};

// The blob an input stands for (see the flag above).
inline std::string state_blob(const uint8_t* data, size_t size) {
  if (size == 0) return {};
  std::string blob(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    uint64_t sum = model::state_checksum(blob.data(), blob.size());
    blob.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  }
  return blob;
}

// load_state must load the blob or refuse it with std::runtime_error.
inline void load_or_refuse(const std::string& blob) {
  TinyStage& s = TinyStage::get();
  try {
    model::load_state(blob, *s.model, s.optimizer);
  } catch (const std::runtime_error&) {
  } catch (const std::exception& e) {
    unexpected("load_state", e);
  }
}

}  // namespace swarm::fuzz
