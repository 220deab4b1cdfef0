#include "registry/discovery.h"

namespace swarm::registry {

Discovery::~Discovery() = default;
StepCoordinator::~StepCoordinator() = default;

}  // namespace swarm::registry
