// Random secrets and tokens from the operating system's CSPRNG (OpenSSL RAND_bytes): the job secret
// `swarm local` makes when none is set, the operator's per-job secret and its holder identities.
#pragma once

#include <cstddef>
#include <string>

namespace swarm {

// `bytes` random bytes as lower-case hex (2 * bytes characters). Throws std::runtime_error when
// the generator fails (it never returns a weak value).
std::string random_hex_token(size_t bytes = 32);

// The token kept in the file `path` (its first line), or a fresh random_hex_token written there
// with mode 0600 when the file is missing or empty. Throws std::runtime_error naming the path when
// it can neither read one nor write one.
std::string kept_token(const std::string& path, size_t bytes = 32);

}  // namespace swarm
