#include "worker/model/state.h"

#include <torch/torch.h>

#include <cstring>
#include <sstream>
#include <stdexcept>

#include "worker/model/arch_table.h"
#include "worker/model/optimizer.h"
#include "worker/model/stage.h"

namespace swarm::model {
namespace {

constexpr char kMagic[8] = {'S', 'W', 'M', 'S', 'T', 'A', 'T', 'E'};
// 3: blocks named by their global layer index ("block<g>"); 2: architectures, blocks named by their
// index within the stage; 1: gpt2 only, local names.
constexpr uint32_t kVersion = 3;        // written
constexpr uint32_t kOldestVersion = 1;  // still read (gpt2 blobs from before architectures)
constexpr uint32_t kFirstGlobalNames = 3;
constexpr int kMaxDims = 8;

// Fast non-cryptographic 64-bit hash, 8 bytes at a time.
class Hasher {
 public:
  void update(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    while (n >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      mix(w);
      p += 8;
      n -= 8;
    }
    if (n > 0) {
      uint64_t w = 0;
      std::memcpy(&w, p, n);
      mix(w ^ (static_cast<uint64_t>(n) << 56));
    }
    length_ += n;
  }
  uint64_t digest() const {
    uint64_t x = h_ ^ length_;
    x = (x ^ (x >> 33)) * 0xFF51AFD7ED558CCDULL;
    x = (x ^ (x >> 33)) * 0xC4CEB9FE1A85EC53ULL;
    return x ^ (x >> 33);
  }

 private:
  void mix(uint64_t w) {
    h_ ^= w * 0x9E3779B97F4A7C15ULL;
    h_ = ((h_ << 31) | (h_ >> 33)) * 0x87C37B91114253D5ULL;
    length_ += 8;
  }
  uint64_t h_ = 0x243F6A8885A308D3ULL;
  uint64_t length_ = 0;
};

torch::Tensor to_cpu_contiguous(const torch::Tensor& t) {
  return t.detach().to(torch::kCPU).contiguous();
}

class Writer {
 public:
  template <typename T>
  void put(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put_bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void put_string(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  void put_tensor(const torch::Tensor& t) {
    auto c = to_cpu_contiguous(t);
    put<uint8_t>(static_cast<uint8_t>(c.scalar_type()));
    put<uint8_t>(static_cast<uint8_t>(c.dim()));
    for (int64_t d : c.sizes()) put<int64_t>(d);
    const uint64_t nbytes = c.numel() * c.element_size();
    put<uint64_t>(nbytes);
    put_bytes(c.data_ptr(), nbytes);
  }
  void reserve(size_t bytes) { out_.reserve(bytes); }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

// What save_state writes for `tensors`, per tensor: its dtype, rank, up to 8 sizes, byte count and
// bytes (a little over, never under, for ranks up to 8).
size_t tensor_bytes(const std::vector<torch::Tensor>& tensors) {
  size_t n = 0;
  for (const auto& t : tensors) n += 2 + 8 * 8 + 8 + static_cast<size_t>(t.numel()) * t.element_size();
  return n;
}

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  T get(const char* what) {
    T v;
    need(sizeof(T), what);
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string get_string(const char* what) {
    const uint32_t n = get<uint32_t>(what);
    need(n, what);
    std::string s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // One tensor of the parameter `name` (`what`: name and which of its tensors, for errors), whose
  // shape must be `expected`: checked before anything is allocated, so the bytes of a blob decide
  // no allocation but the model's own shapes.
  torch::Tensor get_tensor(const std::string& name, const std::string& what, at::IntArrayRef expected) {
    const int raw_dtype = get<uint8_t>("tensor dtype");
    const auto dtype = static_cast<torch::ScalarType>(raw_dtype);
    if (dtype != torch::kFloat && dtype != torch::kDouble && dtype != torch::kHalf &&
        dtype != torch::kBFloat16) {
      fail("unsupported dtype " + std::to_string(raw_dtype) + " for " + what);
    }
    const int ndim = get<uint8_t>("tensor rank");
    if (ndim > kMaxDims) fail("rank " + std::to_string(ndim) + " too large for " + what);
    std::vector<int64_t> dims;
    for (int i = 0; i < ndim; ++i) dims.push_back(get<int64_t>("tensor dims"));
    if (!expected.equals(dims)) {
      std::ostringstream os;
      os << "shape of '" << name << "' is " << at::IntArrayRef(dims) << ", expected " << expected;
      fail(os.str());
    }
    const uint64_t want = static_cast<uint64_t>(c10::multiply_integers(expected)) * c10::elementSize(dtype);
    const uint64_t nbytes = get<uint64_t>("tensor size");
    if (nbytes != want) {
      fail("byte count of " + what + " is " + std::to_string(nbytes) + ", its shape and dtype need " +
           std::to_string(want));
    }
    need(nbytes, what.c_str());
    auto t = torch::empty(dims, torch::TensorOptions().dtype(dtype));
    if (nbytes > 0) std::memcpy(t.data_ptr(), in_.data() + pos_, nbytes);
    pos_ += nbytes;
    return t;
  }
  size_t pos() const { return pos_; }
  [[noreturn]] static void fail(const std::string& msg) {
    throw std::runtime_error("load_state: " + msg);
  }

 private:
  void need(uint64_t n, const char* what) {
    if (n > in_.size() - pos_) {
      fail(std::string("truncated state (while reading ") + what + ")");
    }
  }
  const std::string& in_;
  size_t pos_ = 0;
};

// Version 2's config: u8 architecture | i64 vocab, hidden, heads, sequence, stages | u32 n |
// n x i64 layers of each stage | the architecture's parameters (put_gpt2 / put_llama).
void put_config(Writer& w, const ModelConfig& c) {
  w.put<uint8_t>(static_cast<uint8_t>(c.architecture));
  for (int64_t v : {c.vocab_size, c.hidden_size, c.num_heads, c.sequence_length, c.num_stages}) w.put<int64_t>(v);
  w.put<uint32_t>(static_cast<uint32_t>(c.stage_layers.size()));
  for (int64_t v : c.stage_layers) w.put<int64_t>(v);
  if (c.is_llama()) {
    const LlamaParams& l = c.llama;
    for (int64_t v : {l.intermediate_size, l.num_kv_heads, l.head_dim}) w.put<int64_t>(v);
    for (double v : {l.rms_norm_eps, l.rope_theta, l.rope_scaling.factor, l.rope_scaling.low_freq_factor,
                     l.rope_scaling.high_freq_factor}) {
      w.put<double>(v);
    }
    w.put<int64_t>(l.rope_scaling.original_max_position_embeddings);
    w.put<uint8_t>(l.attention_bias ? 1 : 0);
    w.put<uint8_t>(l.mlp_bias ? 1 : 0);
  } else {
    w.put<int64_t>(c.gpt2.intermediate_size);
    w.put<uint8_t>(c.gpt2.shared_layers ? 1 : 0);
    w.put<double>(c.gpt2.layer_norm_eps);
  }
}

ModelConfig get_config(Reader& r) {
  ModelConfig c;
  const int arch = r.get<uint8_t>("config");
  if (arch != static_cast<int>(Architecture::Gpt2) && arch != static_cast<int>(Architecture::Llama)) {
    Reader::fail("unknown architecture " + std::to_string(arch) + " in the state's config");
  }
  c.architecture = static_cast<Architecture>(arch);
  for (int64_t* f : {&c.vocab_size, &c.hidden_size, &c.num_heads, &c.sequence_length, &c.num_stages}) {
    *f = r.get<int64_t>("config");
  }
  const uint32_t n = r.get<uint32_t>("config");
  if (n > 4096) Reader::fail("config with " + std::to_string(n) + " stages");
  c.stage_layers.assign(n, 0);
  for (int64_t& v : c.stage_layers) v = r.get<int64_t>("config");
  if (c.is_llama()) {
    LlamaParams& l = c.llama;
    for (int64_t* f : {&l.intermediate_size, &l.num_kv_heads, &l.head_dim}) *f = r.get<int64_t>("config");
    for (double* f : {&l.rms_norm_eps, &l.rope_theta, &l.rope_scaling.factor, &l.rope_scaling.low_freq_factor,
                      &l.rope_scaling.high_freq_factor}) {
      *f = r.get<double>("config");
    }
    l.rope_scaling.original_max_position_embeddings = r.get<int64_t>("config");
    l.attention_bias = r.get<uint8_t>("config") != 0;
    l.mlp_bias = r.get<uint8_t>("config") != 0;
  } else {
    c.gpt2.intermediate_size = r.get<int64_t>("config");
    c.gpt2.shared_layers = r.get<uint8_t>("config") != 0;
    c.gpt2.layer_norm_eps = r.get<double>("config");
  }
  return c;
}

// Version 1 (before architectures): a gpt2 model with the same layers on every stage,
// 7 x i64 (vocab, hidden, heads, layers per stage, sequence, mlp ratio, stages) | u8 shared.
ModelConfig get_config_v1(Reader& r) {
  ModelConfig c;
  int64_t per_stage = 0, mlp_ratio = 0;
  for (int64_t* f : {&c.vocab_size, &c.hidden_size, &c.num_heads, &per_stage, &c.sequence_length, &mlp_ratio,
                     &c.num_stages}) {
    *f = r.get<int64_t>("config");
  }
  c.gpt2.shared_layers = r.get<uint8_t>("config") != 0;
  // Read from a file: the product is checked before it is formed (the config's own checks come later).
  if (__builtin_mul_overflow(mlp_ratio, c.hidden_size, &c.gpt2.intermediate_size))
    Reader::fail("config with mlp ratio " + std::to_string(mlp_ratio) + " x hidden size " + std::to_string(c.hidden_size));
  if (c.num_stages < 0 || c.num_stages > 4096) Reader::fail("config with " + std::to_string(c.num_stages) + " stages");
  c.set_uniform_layers(per_stage);
  return c;
}

// Versions 1 and 2 named a stage's blocks by their index within the stage ("block<j>.<p>");
// today's names carry the layer's global index (arch_table.h: global_block_name).
std::string local_to_global_name(const std::string& name, const ModelConfig& c, int64_t stage) {
  const size_t dot = name.find('.');
  if (name.rfind("block", 0) != 0 || dot == std::string::npos || dot == 5 || stage < 0 || stage >= c.num_stages) {
    return name;
  }
  int64_t j = 0;
  for (size_t i = 5; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || j > 1000000) return name;
    j = j * 10 + (name[i] - '0');
  }
  return global_block_name(c, stage, j) + name.substr(dot);
}

uint64_t checksum(const char* data, size_t n) { return state_checksum(data, n); }

}  // namespace

uint64_t state_checksum(const void* data, size_t n) {
  Hasher h;
  h.update(data, n);
  return h.digest();
}

std::string save_state(StageModel& model, StageOptimizer& optimizer) {
  const auto& names = optimizer.names();
  const auto& params = optimizer.params();
  Writer w;
  // The whole blob in one allocation: grown by doubling, a stage's state (hundreds of MB) would
  // pass through buffers of up to twice its size, each copied into the next. The slack holds the
  // header, the config and what a checkpoint appends (its trailer: write_checkpoint, in place).
  size_t names_bytes = 0;
  for (const auto& n : names) names_bytes += 4 + n.size();
  w.reserve(tensor_bytes(params) + tensor_bytes(optimizer.exp_avg()) + tensor_bytes(optimizer.exp_avg_sq()) +
            names_bytes + 64 * 1024);
  w.put_bytes(kMagic, sizeof(kMagic));
  w.put<uint32_t>(kVersion);
  put_config(w, model.config());
  w.put<int64_t>(model.stage_index());
  w.put<uint8_t>(static_cast<uint8_t>(optimizer.config().kind));
  w.put<int64_t>(optimizer.step_count());
  w.put<int64_t>(optimizer.moment_steps());
  w.put<uint32_t>(static_cast<uint32_t>(params.size()));
  for (size_t i = 0; i < params.size(); ++i) {
    w.put_string(names[i]);
    w.put_tensor(params[i]);
    w.put_tensor(optimizer.exp_avg()[i]);
    w.put_tensor(optimizer.exp_avg_sq()[i]);
  }
  w.put<uint64_t>(checksum(w.str().data(), w.str().size()));
  return std::move(w.str());
}

void load_state(const std::string& bytes, StageModel& model, StageOptimizer& optimizer) {
  if (bytes.size() < sizeof(kMagic) + 4 + 8 ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    Reader::fail("not a swarm model state (bad magic)");
  }
  uint64_t stored_sum;
  std::memcpy(&stored_sum, bytes.data() + bytes.size() - 8, 8);
  const bool checksum_ok = stored_sum == checksum(bytes.data(), bytes.size() - 8);

  Reader r(bytes);
  r.get<uint64_t>("magic");
  const auto version = r.get<uint32_t>("version");
  if (version < kOldestVersion || version > kVersion) {
    Reader::fail("state version " + std::to_string(version) + ", this build reads versions " +
                 std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
  }
  const ModelConfig cfg = version == 1 ? get_config_v1(r) : get_config(r);
  const int64_t stage = r.get<int64_t>("stage");
  if (cfg != model.config() || stage != model.stage_index()) {
    Reader::fail("state is for stage " + std::to_string(stage) + " of model {" + describe(cfg) +
                 "}, cannot load into stage " + std::to_string(model.stage_index()) +
                 " of model {" + describe(model.config()) + "}");
  }
  if (!checksum_ok) Reader::fail("checksum mismatch (corrupt or truncated state)");
  const int raw_kind = r.get<uint8_t>("optimizer kind");
  if (raw_kind != OptimizerConfig::AdamW && raw_kind != OptimizerConfig::Lamb) {
    Reader::fail("optimizer kind " + std::to_string(raw_kind) + " is neither adamw (" +
                 std::to_string(OptimizerConfig::AdamW) + ") nor lamb (" +
                 std::to_string(OptimizerConfig::Lamb) + ")");
  }
  const auto kind = static_cast<OptimizerConfig::Kind>(raw_kind);
  if (kind != optimizer.config().kind) {
    Reader::fail(std::string("state holds ") + kind_name(kind) + " optimizer state, this peer uses " +
                 kind_name(optimizer.config().kind));
  }
  const int64_t step_count = r.get<int64_t>("step count");
  const int64_t moment_steps = r.get<int64_t>("moment steps");
  const uint32_t n = r.get<uint32_t>("parameter count");
  const auto& names = optimizer.names();
  const auto& params = optimizer.params();
  if (n != params.size()) {
    Reader::fail("state has " + std::to_string(n) + " parameters, model has " +
                 std::to_string(params.size()));
  }
  std::vector<torch::Tensor> p_in, m_in, v_in;
  for (size_t i = 0; i < n; ++i) {
    const std::string name = version < kFirstGlobalNames
                                 ? local_to_global_name(r.get_string("parameter name"), cfg, stage)
                                 : r.get_string("parameter name");
    if (name != names[i]) {
      Reader::fail("parameter " + std::to_string(i) + " is '" + name + "', expected '" +
                   names[i] + "'");
    }
    p_in.push_back(r.get_tensor(name, "'" + name + "'", params[i].sizes()));
    m_in.push_back(r.get_tensor(name, "'" + name + "' exp_avg", params[i].sizes()));
    v_in.push_back(r.get_tensor(name, "'" + name + "' exp_avg_sq", params[i].sizes()));
  }
  if (r.pos() != bytes.size() - 8) Reader::fail("trailing bytes after the last tensor");

  // Everything checked: apply.
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < n; ++i) {
    auto p = params[i];
    p.copy_(p_in[i]);
    optimizer.exp_avg()[i] = m_in[i].to(p.device(), p.scalar_type()).contiguous();
    optimizer.exp_avg_sq()[i] = v_in[i].to(p.device(), p.scalar_type()).contiguous();
  }
  optimizer.set_step_count(step_count);
  optimizer.set_moment_steps(moment_steps);
}

std::vector<at::Tensor> grads(StageModel& model) {
  std::vector<at::Tensor> out;
  for (const auto& p : model.parameters()) {
    const auto& g = p.grad();
    out.push_back(g.defined() ? g.detach() : torch::zeros_like(p));
  }
  return out;
}

void set_grads(StageModel& model, const std::vector<at::Tensor>& grads) {
  auto params = model.parameters();
  if (grads.size() != params.size()) {
    throw std::invalid_argument("set_grads: got " + std::to_string(grads.size()) +
                                " tensors for " + std::to_string(params.size()) + " parameters");
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    auto& p = params[i];
    if (!grads[i].defined() || !grads[i].sizes().equals(p.sizes())) {
      std::ostringstream os;
      os << "set_grads: gradient " << i << " has shape "
         << (grads[i].defined() ? grads[i].sizes() : c10::IntArrayRef{}) << ", parameter has "
         << p.sizes();
      throw std::invalid_argument(os.str());
    }
    if (p.grad().defined()) {
      p.mutable_grad().copy_(grads[i]);
    } else {
      p.mutable_grad() = torch::empty_like(p).copy_(grads[i]);
    }
  }
}

at::Tensor flatten(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return torch::empty({0});
  std::vector<torch::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}).to(tensors[0].options()));
  return torch::cat(flat);
}

void unflatten_into(const at::Tensor& flat, const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const auto& t : tensors) total += t.numel();
  if (flat.dim() != 1 || flat.numel() != total) {
    throw std::invalid_argument("unflatten_into: flat tensor has " +
                                std::to_string(flat.numel()) + " elements, targets need " +
                                std::to_string(total));
  }
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (const auto& t : tensors) {
    const int64_t n = t.numel();
    at::Tensor target = t;  // shares storage
    target.copy_(flat.narrow(0, offset, n).view(t.sizes()));
    offset += n;
  }
}

uint64_t param_fingerprint(StageModel& model) {
  Hasher h;
  for (const auto& item : model.named_parameters()) {
    const auto& key = item.key();
    h.update(key.data(), key.size());
    auto c = to_cpu_contiguous(item.value());
    const auto dtype = static_cast<int64_t>(c.scalar_type());
    h.update(&dtype, sizeof(dtype));
    h.update(c.sizes().data(), c.sizes().size() * sizeof(int64_t));
    h.update(c.data_ptr(), c.numel() * c.element_size());
  }
  return h.digest();
}

}  // namespace swarm::model
