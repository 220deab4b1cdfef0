#include "worker/checkpoint/hf_import.h"

#include <torch/torch.h>

#include <sstream>
#include <stdexcept>

namespace swarm::runtime {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

// The problem with one ref, or "".
std::string problem_of(const HfCheckpoint& ckpt, const HfTensorRef& ref) {
  const std::string source = hf_source_name(ckpt, ref.hf);
  if (!ckpt.has(source)) {
    std::string why = "tensor " + ref.hf + " is missing from " + ckpt.dir();
    if (ref.hf == "lm_head.weight") why += " (and tie_word_embeddings is false in " + ckpt.config_path() + ")";
    return why + " (the spec's " + ref.internal + " " + shape_text(ref.shape) + " needs it)";
  }
  TensorEntry e;
  try {
    e = ckpt.entry(source);
  } catch (const std::exception& err) {
    return err.what();
  }
  const std::string named = source == ref.hf ? ref.hf : ref.hf + " (tied: " + source + ")";
  if (e.shape != ref.shape)
    return "tensor " + named + " in " + ckpt.file_of(source) + " has shape " + shape_text(e.shape) + ", the spec needs " +
           shape_text(ref.shape) + " for " + ref.internal;
  if (!safetensors_dtype_readable(e.dtype))
    return "tensor " + named + " in " + ckpt.file_of(source) + " has dtype " + e.dtype +
           ", not one that is read (F32, BF16, F16)";
  return "";
}

}  // namespace

std::string hf_source_name(const HfCheckpoint& ckpt, const std::string& hf_name) {
  if (hf_name == "lm_head.weight" && !ckpt.has(hf_name) && ckpt.config().tie_word_embeddings)
    return "model.embed_tokens.weight";
  return hf_name;
}

std::vector<std::string> hf_tensor_problems(const HfCheckpoint& ckpt, const std::vector<HfTensorRef>& refs) {
  std::vector<std::string> out;
  for (const auto& r : refs)
    if (auto p = problem_of(ckpt, r); !p.empty()) out.push_back(std::move(p));
  return out;
}

void load_hf_tensors(const HfCheckpoint& ckpt, const std::vector<HfTensorRef>& refs, torch::nn::Module& stage) {
  torch::NoGradGuard no_grad;
  auto params = stage.named_parameters(true);
  for (const auto& r : refs) {
    at::Tensor* p = params.find(r.internal);
    if (p == nullptr) throw std::runtime_error("import: the stage has no parameter " + r.internal + " (for " + r.hf + ")");
    if (auto problem = problem_of(ckpt, r); !problem.empty()) throw std::runtime_error("import: " + problem);
    if (p->sizes().vec() != r.shape)
      throw std::runtime_error("import: the stage's " + r.internal + " has shape " + shape_text(p->sizes().vec()) +
                               ", its table entry says " + shape_text(r.shape));
    // One tensor at a time: read (float32), copied into the parameter, released.
    p->copy_(ckpt.read(hf_source_name(ckpt, r.hf)));
  }
}

}  // namespace swarm::runtime
