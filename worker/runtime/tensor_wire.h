// Zero-copy conversion between torch tensors and wire tensors.
// A received WireTensor owns a 64-byte aligned buffer; from_wire wraps it without copying and the
// torch tensor keeps the buffer alive. to_wire points the wire tensor at the (contiguous, CPU)
// tensor's memory and keeps the tensor alive until the frame is written.
#pragma once

#include <torch/torch.h>

#include <string>

#include "common/job_spec.h"
#include "worker/net/message.h"

namespace swarm::runtime {

net::DType wire_dtype(torch::ScalarType t);
torch::ScalarType torch_dtype(net::DType t);  // throws for blockwise8 (decode_float reads it)

net::WireTensor to_wire(const torch::Tensor& t);
torch::Tensor from_wire(const net::WireTensor& w);

// How a float tensor goes on the wire: spec.pipeline's compression for activations and their
// gradients, spec.averaging's for averaged gradients.
struct WireCodec {
  Compression compression = Compression::None;
  uint32_t block = 4096;  // blockwise8: values per block
};
WireCodec pipeline_codec(const JobSpec& spec);
WireCodec averaging_codec(const JobSpec& spec);

// A float tensor encoded with `codec`: float32 as is (zero copy), fp16 as IEEE half, blockwise8 as
// int8 codes and a scale per block. Throws std::invalid_argument naming `what` and the value for
// inf or NaN under blockwise8 (never sent).
net::WireTensor encode_float(const torch::Tensor& t, const WireCodec& codec, const std::string& what);

// A received float tensor (float32, float16, bfloat16 or blockwise8) as float32; float32 is wrapped
// without a copy. Throws std::invalid_argument naming `what` for any other dtype, net::WireError
// for a blockwise8 scale that is not finite.
torch::Tensor decode_float(const net::WireTensor& w, const std::string& what);

}  // namespace swarm::runtime
