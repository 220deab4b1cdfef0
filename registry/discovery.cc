#include "registry/discovery.h"

namespace swarm::registry {

Discovery::~Discovery() = default;
RoundCoordinator::~RoundCoordinator() = default;

}  // namespace swarm::registry
