// The planner library: pure decisions (routing, averaging matchmaking, rebalancing, placement).
// Each concept has its own header and source file in this folder; see docs/architecture.md.
namespace swarm::planner {
const char* library_name() { return "swarm_planner"; }
}  // namespace swarm::planner
