// Zero-copy conversion between torch tensors and wire tensors.
// A received WireTensor owns a 64-byte aligned buffer; from_wire wraps it without copying and the
// torch tensor keeps the buffer alive. to_wire points the wire tensor at the (contiguous, CPU)
// tensor's memory and keeps the tensor alive until the frame is written.
#pragma once

#include <torch/torch.h>

#include "worker/net/message.h"

namespace swarm::runtime {

net::DType wire_dtype(torch::ScalarType t);
torch::ScalarType torch_dtype(net::DType t);

net::WireTensor to_wire(const torch::Tensor& t);
torch::Tensor from_wire(const net::WireTensor& w);

}  // namespace swarm::runtime
