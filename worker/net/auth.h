// Frame authentication primitives: HMAC-SHA256 keyed by the job secret (OpenSSL), constant-time
// compare. They live in common/crypto.h (the registry signs its requests with them too).
#pragma once

#include "common/crypto.h"

namespace swarm::net {

constexpr size_t kMacBytes = crypto::kMacBytes;
using Mac = crypto::Mac;
using crypto::Hmac;
using crypto::hmac_sha256;
using crypto::mac_equal;

}  // namespace swarm::net
