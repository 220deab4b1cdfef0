// The data-plane RPCs carried by the framed wire format (worker/net). Metadata is a JSON object;
// tensors travel as frame tensors, in the order given here.
//
//   Forward          meta {mb, stage, samples, eval?}          tensors [input]
//     -> ForwardReply meta {step}                            tensors [output]
//   ForwardBackward  meta {mb, stage, samples, eval?}          tensors [input, targets]   (last stage)
//     -> reply        meta {step, loss}                      tensors [grad_input] (none for eval or stage 0)
//   Backward         meta {mb, stage, samples, recompute}      tensors [grad_output, input if recompute]
//     -> reply        meta {step}                            tensors [grad_input] (none for stage 0)
//     A worker that no longer holds the microbatch's activations answers Error code activation_missing;
//     the trainer then re-sends with the stage input (recompute) to any peer of the stage.
//   AveragePush      meta {stage, step, attempt, samples, peer} tensors [flat gradient sum]
//     -> AverageReply meta {samples, members}                 tensors [flat averaged gradient]
//   StateRequest     meta {stage}                              -> StateReply meta {step} tensors [uint8 state]
//   Ping             meta {}                                   -> Pong meta {stage, step, queue}
//   GradientHandoff  meta {stage, step, samples, peer}        tensors [flat gradient sum]
//     -> HandoffReply meta {accepted}   A peer leaving its stage gives its accumulated gradient to
//     a peer that stays, so no sample it processed is lost. Refused (code step_closed) when the
//     receiver already stepped past that step.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "worker/net/message.h"
#include "worker/net/session.h"

namespace swarm::runtime {

inline constexpr uint16_t kGradientHandoff = 22;
inline constexpr uint16_t kHandoffReply = 23;

// The texts of the Error replies with net::ErrorCode::ActivationMissing and ::StepClosed (callers
// branch on the code, RemoteError::code(), never on these texts).
inline constexpr const char* kActivationMissing = "activation_missing";
inline constexpr const char* kStepClosed = "step_closed";

// The frame protection every process of the job uses (spec.security.transport; left out:
// authenticated, as `swarm local` runs on one machine; the operator always sets it).
inline net::Protection protection_of(const JobSpec& spec) {
  return spec.security.transport == Transport::Encrypted ? net::Protection::Encrypted
                                                         : net::Protection::Authenticated;
}

// Parses a message's JSON metadata; a malformed one is a request error naming the message type.
nlohmann::json parse_meta(const net::Message& m);

// Typed field access that names the field and the value in its error.
int64_t meta_int(const nlohmann::json& meta, const char* field);
int64_t meta_int(const nlohmann::json& meta, const char* field, int64_t fallback);
double meta_double(const nlohmann::json& meta, const char* field);
std::string meta_string(const nlohmann::json& meta, const char* field);
bool meta_bool(const nlohmann::json& meta, const char* field, bool fallback);

net::Message make_message(uint16_t type, const nlohmann::json& meta);

}  // namespace swarm::runtime
