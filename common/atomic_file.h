// Writes a small file so that a reader never sees it half-written: the text goes to PATH.tmp,
// then a rename puts it in place (reports and summaries that another process polls).
#pragma once

#include <string>

namespace swarm {

// Throws std::runtime_error naming the file when it cannot be written or renamed.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace swarm
