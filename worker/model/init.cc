#include "worker/model/init.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

namespace swarm::model {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t derive_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return splitmix64(splitmix64(seed) ^ h);
}

void init_normal(at::Tensor& p, uint64_t seed, const std::string& name, double std) {
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(derive_seed(seed, name));
  auto tmp = torch::empty(p.sizes(), torch::TensorOptions().dtype(torch::kFloat));
  tmp.normal_(0.0, std, gen);
  p.copy_(tmp);
}

void init_const(at::Tensor& p, double value) {
  torch::NoGradGuard no_grad;
  p.fill_(value);
}

}  // namespace swarm::model
