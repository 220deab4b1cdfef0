#include "worker/model/config.h"

#include <sstream>
#include <stdexcept>

namespace swarm::model {

void validate(const ModelConfig& c) {
  auto positive = [](int64_t v, const char* name) {
    if (v <= 0) {
      throw std::invalid_argument(std::string("ModelConfig.") + name + " must be positive, got " +
                                  std::to_string(v));
    }
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.hidden_size, "hidden_size");
  positive(c.num_heads, "num_heads");
  positive(c.layers_per_stage, "layers_per_stage");
  positive(c.sequence_length, "sequence_length");
  positive(c.mlp_ratio, "mlp_ratio");
  positive(c.num_stages, "num_stages");
  if (c.hidden_size % c.num_heads != 0) {
    throw std::invalid_argument("ModelConfig.hidden_size (" + std::to_string(c.hidden_size) +
                                ") must be divisible by num_heads (" +
                                std::to_string(c.num_heads) + ")");
  }
}

std::string describe(const ModelConfig& c) {
  std::ostringstream os;
  os << "vocab=" << c.vocab_size << " hidden=" << c.hidden_size << " heads=" << c.num_heads
     << " layers/stage=" << c.layers_per_stage << " seq=" << c.sequence_length
     << " mlp=" << c.mlp_ratio << " stages=" << c.num_stages << " shared=" << c.shared_layers;
  return os.str();
}

}  // namespace swarm::model
