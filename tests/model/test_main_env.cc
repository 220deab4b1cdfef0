// Every model test runs with 2 intra-op threads (the CI machine has 2 cores).
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

class TorchThreads : public ::testing::Environment {
 public:
  void SetUp() override {
    torch::set_num_threads(2);
    torch::manual_seed(0);
  }
};

[[maybe_unused]] ::testing::Environment* const kEnv =
    ::testing::AddGlobalTestEnvironment(new TorchThreads);

}  // namespace
