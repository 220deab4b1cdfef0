// RegistryService (the REST semantics, no transport) with a fake clock, and the wire codecs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "registry/registry_service.h"
#include "registry/wire.h"

namespace swarm::registry {
namespace {

using nlohmann::json;

class ServiceTest : public ::testing::Test {
 protected:
  ServiceTest() : svc_(RegistryOptions{2.0, [this] { return now_; }}) {}

  json call(const std::string& method, const std::string& path, const std::string& body = "",
            int want_status = 200, const std::string& query = "") {
    HttpReply r = svc_.handle(method, path, query, body);
    EXPECT_EQ(r.status, want_status) << method << " " << path << " -> " << r.body;
    json j = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(j.is_object()) << r.body;
    return j;
  }
  std::string error(const std::string& method, const std::string& path, const std::string& body,
                    int want_status = 400) {
    json j = call(method, path, body, want_status);
    return j.value("error", std::string("<no error field>"));
  }
  // No state: the wire's default, "joining".
  void announce(const std::string& id, int stage, const std::string& role = "worker",
                const std::string& state = "") {
    json body{{"role", role}, {"stage", stage}, {"host", "10.0.0.1"}, {"port", 7000}};
    if (!state.empty()) body["state"] = state;
    call("PUT", "/v1/peers/" + id, body.dump());
  }

  double now_ = 100;
  RegistryService svc_;
};

// A peer's event ledger resends an entry whose reply it did not get: the registry counts each
// sequence number of a peer once, and a plain (unsequenced) event as before.
TEST_F(ServiceTest, ASequencedEventIsCountedOnceHoweverOftenItIsSent) {
  auto count = [&] { return call("GET", "/v1/stats")["events"].value("resyncs", 0); };
  EXPECT_FALSE(call("POST", "/v1/events", R"({"kind":"resyncs","count":2,"peerId":"w0","seq":1})")["duplicate"]);
  EXPECT_TRUE(call("POST", "/v1/events", R"({"kind":"resyncs","count":2,"peerId":"w0","seq":1})")["duplicate"]);
  EXPECT_EQ(count(), 2);
  call("POST", "/v1/events", R"({"kind":"resyncs","count":3,"peerId":"w0","seq":2})");
  call("POST", "/v1/events", R"({"kind":"resyncs","count":5,"peerId":"w1","seq":1})");  // another peer's own numbers
  call("POST", "/v1/events", R"({"kind":"resyncs","count":7})");
  EXPECT_EQ(count(), 2 + 3 + 5 + 7);
  EXPECT_NE(error("POST", "/v1/events", R"({"kind":"resyncs","count":1,"peerId":"w0","seq":0})").find("seq"),
            std::string::npos);
  EXPECT_NE(error("POST", "/v1/events", R"({"kind":"resyncs","count":1,"seq":3})").find("peerId"), std::string::npos);
  EXPECT_EQ(count(), 17);
}

TEST_F(ServiceTest, PeersRoundTripWithDefaultsAndExpiry) {
  json put = call("PUT", "/v1/peers/w-1",
                  R"({"role":"worker","stage":1,"host":"h","port":9,"metricsPort":10,
                      "state":"serving","step":4,"queueLength":2,"samplesPerSecond":1.5})");
  EXPECT_DOUBLE_EQ(put["expiresInSeconds"].get<double>(), 2.0);
  call("PUT", "/v1/peers/t-1", R"({"peerId":"t-1","role":"trainer","host":"h2"})");

  json all = call("GET", "/v1/peers");
  ASSERT_EQ(all["peers"].size(), 2u);
  json w = all["peers"][1];
  EXPECT_EQ(w["peerId"], "w-1");
  EXPECT_EQ(w["stage"], 1);
  EXPECT_EQ(w["metricsPort"], 10);
  EXPECT_EQ(w["state"], "serving");
  EXPECT_EQ(w["step"], 4);
  EXPECT_EQ(w["queueLength"], 2);
  EXPECT_DOUBLE_EQ(w["samplesPerSecond"].get<double>(), 1.5);
  json t = all["peers"][0];
  EXPECT_EQ(t["stage"], -1);
  EXPECT_EQ(t["state"], "joining");  // default

  EXPECT_EQ(call("GET", "/v1/peers", "", 200, "role=worker&stage=1")["peers"].size(), 1u);
  EXPECT_EQ(call("GET", "/v1/peers", "", 200, "role=trainer")["peers"].size(), 1u);
  EXPECT_EQ(call("GET", "/v1/peers", "", 200, "stage=0")["peers"].size(), 0u);

  now_ += 1.5;
  call("PUT", "/v1/peers/w-1", R"({"role":"worker","stage":1,"host":"h","port":9})");
  now_ += 1.0;  // t-1 last seen 2.5 s ago: expired
  all = call("GET", "/v1/peers");
  ASSERT_EQ(all["peers"].size(), 1u);
  EXPECT_EQ(all["peers"][0]["peerId"], "w-1");

  EXPECT_EQ(call("DELETE", "/v1/peers/w-1")["removed"], true);
  EXPECT_EQ(call("DELETE", "/v1/peers/w-1")["removed"], false);
  EXPECT_TRUE(call("GET", "/v1/peers")["peers"].empty());
}

TEST_F(ServiceTest, ProgressAndMatchmaking) {
  // Steps past 0 from a registry that just started mean it restarted mid-run: its first expiry
  // period waits for heartbeats (ARestartedRegistryWaitsForThePeersHeartbeatsBeforeAGroupIsComplete).
  // Serving peers: a joining one holds no gradient and is not waited for (StepBookGroup tests).
  now_ += 3;
  announce("a", 0, "worker", "serving");
  announce("b", 0, "worker", "serving");
  json v = call("POST", "/v1/stages/0/steps/3/progress", R"({"peerId":"a","samples":5,"target":8})");
  EXPECT_EQ(v, json::parse(R"({"step":3,"samplesTotal":5,"target":8,"targetReached":false,"granted":5,"newestStep":3})"));
  v = call("POST", "/v1/stages/0/steps/3/progress", R"({"peerId":"b","samples":3,"target":8})");
  EXPECT_EQ(v["targetReached"], true);

  const std::string join = "/v1/stages/0/steps/3/attempts/0/join";
  const std::string group = "/v1/stages/0/steps/3/attempts/0/group";
  EXPECT_EQ(call("GET", group)["state"], "unknown");
  call("POST", join, R"({"peerId":"b","host":"hb","port":2,"samples":3,"gatherSeconds":30})");
  EXPECT_EQ(call("GET", group)["state"], "gathering");
  call("POST", join, R"({"peerId":"a","host":"ha","port":1,"gatherSeconds":30})");
  json g = call("GET", group);
  EXPECT_EQ(g["state"], "ready");
  EXPECT_EQ(g["leader"], "a");
  EXPECT_EQ(g["stepFull"], true);
  EXPECT_EQ(g["awaiting"], json::array());
  EXPECT_EQ(g["members"], json::parse(R"([{"peerId":"a","host":"ha","port":1,"samples":0},
                                          {"peerId":"b","host":"hb","port":2,"samples":3}])"));
  announce("c", 0);
  EXPECT_EQ(error("POST", join, R"({"peerId":"c","host":"hc","port":3,"gatherSeconds":30})", 409),
            "step closed");
}

// Issue 29: claims on the wire. A peer asks for the work waiting in its queue ("want"); the
// registry grants it only as far as the step's global batch allows; a retry naming a killed peer
// ("transfers") takes over that peer's claim, and one the killed peer had done counts as
// samples_readmitted.
TEST_F(ServiceTest, ClaimsAreGrantedUpToTheGlobalBatchAndMoveFromAKilledPeer) {
  now_ += 3;
  announce("a", 0, "worker", "serving");
  announce("b", 0, "worker", "serving");
  const std::string progress = "/v1/stages/0/steps/0/progress";
  json v = call("POST", progress, R"({"peerId":"a","samples":0,"admitted":4,"want":12,"unit":4,"target":16})");
  EXPECT_EQ(v["granted"], 12);
  EXPECT_EQ(v["targetReached"], false);
  v = call("POST", progress, R"({"peerId":"b","samples":0,"want":8,"unit":4,"target":16})");
  EXPECT_EQ(v["granted"], 4);  // only 4 were left
  EXPECT_EQ(v["samplesTotal"], 16);
  EXPECT_EQ(v["targetReached"], true);
  // a is killed with 8 samples owed: withdrawn by its launcher, its claim stays.
  call("POST", progress, R"({"peerId":"a","samples":4,"admitted":12,"target":16})");
  call("DELETE", "/v1/peers/a");
  v = call("POST", progress, R"({"peerId":"b","samples":4,"admitted":4,"want":16,"unit":4,"target":16,
                                 "transfers":[{"from":"a","samples":4},{"from":"a","samples":4}]})");
  EXPECT_EQ(v["granted"], 12);
  EXPECT_EQ(v["samplesTotal"], 16);
  // A retry of work a had done: nothing of its claim is left to move; it waits for the next step,
  // where it takes a fresh claim (not counted: a never held a claim there).
  v = call("POST", progress, R"({"peerId":"b","samples":4,"admitted":12,"want":16,"unit":4,"target":16,
                                 "transfers":[{"from":"a","samples":4}]})");
  EXPECT_EQ(v["granted"], 12);
  const json stats = call("GET", "/v1/stats");
  EXPECT_EQ(stats["stageOpenSamples"]["0"], 16);
  EXPECT_EQ(stats["events"].value("samples_readmitted", 0), 0);
  EXPECT_EQ(stats["events"].value("samples_lost", 0), 4);
}

// Issue 11: a worker that finds its stage without state after the job trained reports the job's
// failure; the first report stands, /v1/stats shows it (absent while healthy), /metrics counts it.
TEST_F(ServiceTest, AStageResetFailsTheJobInStatsAndMetrics) {
  auto metric = [&](const std::string& line) {
    return svc_.handle("GET", "/metrics", "", "").body.find(line) != std::string::npos;
  };
  EXPECT_FALSE(call("GET", "/v1/stats").contains("failure"));
  EXPECT_TRUE(metric("\nswarm_job_failed 0\n"));
  EXPECT_TRUE(metric("\nswarm_stage_reset_total 0\n"));
  json f = call("POST", "/v1/failure",
                R"({"reason":"StageReset","stage":1,"step":33,"message":"stage 1 lost its state at step 33"})");
  const json want = json::parse(
      R"({"reason":"StageReset","stage":1,"step":33,"message":"stage 1 lost its state at step 33"})");
  EXPECT_EQ(f["failure"], want);
  call("POST", "/v1/failure", R"({"reason":"StageReset","stage":0,"step":40,"message":"later"})");
  EXPECT_EQ(call("GET", "/v1/stats")["failure"], want);  // the first stands
  EXPECT_TRUE(metric("\nswarm_job_failed 1\n"));
  EXPECT_TRUE(metric("\nswarm_stage_reset_total 2\n"));
  EXPECT_EQ(error("POST", "/v1/failure", R"({"stage":1,"step":3})"),
            "reason: must be a string of 1-64 characters, got nothing");
  EXPECT_EQ(error("POST", "/v1/failure", R"({"reason":"StageReset","stage":-1,"step":3})").substr(0, 6), "stage:");
}

// The stage's newest step: in /v1/stats (stageSteps), in every progress reply, and in the 409 of
// a join to a finished step (a peer learns how far its stage got).
TEST_F(ServiceTest, TheNewestStepOfAStageIsPublished) {
  announce("a", 0);
  call("POST", "/v1/stages/0/steps/2/progress", R"({"peerId":"a","samples":1,"target":8})");
  call("POST", "/v1/stages/0/steps/9/progress", R"({"peerId":"a","samples":1,"target":8})");
  EXPECT_EQ(call("GET", "/v1/stats")["stageSteps"]["0"], 9);
  json v = call("POST", "/v1/stages/0/steps/2/progress", R"({"peerId":"a","samples":1,"target":8})");
  EXPECT_EQ(v["newestStep"], 9);
  EXPECT_EQ(v["targetReached"], true);  // step 2 is finished as far as the book is concerned
  json closed = call("POST", "/v1/stages/0/steps/2/attempts/0/join", R"({"peerId":"a","host":"h","port":1,"gatherSeconds":5})", 409);
  EXPECT_EQ(closed["newestStep"], 9);
}

// A registry restarted mid-run knows no steps: the heartbeats of serving workers give their
// stage's step back at once (a replacement's "did the stage train?" check needs it), those of a
// joining worker (step not yet synced) or a failed one do not.
TEST_F(ServiceTest, ARestartedRegistryLearnsTheStagesStepFromHeartbeats) {
  auto put = [&](const std::string& id, int stage, const std::string& state, int step) {
    json body{{"role", "worker"}, {"stage", stage}, {"host", "h"}, {"port", 1}, {"state", state}, {"step", step}};
    call("PUT", "/v1/peers/" + id, body.dump());
  };
  put("a", 0, "serving", 37);
  put("b", 0, "averaging", 36);
  put("c", 1, "joining", 50);
  put("d", 1, "failed", 60);
  json steps = call("GET", "/v1/stats")["stageSteps"];
  EXPECT_EQ(steps.value("0", -1), 37);
  EXPECT_FALSE(steps.contains("1")) << steps.dump();
  put("c", 1, "serving", 37);
  EXPECT_EQ(call("GET", "/v1/stats")["stageSteps"].value("1", -1), 37);
}

// A registry restarted mid-run (the job is past step 0 in its first expiry period) has not heard
// every live worker yet: a group joined by the only worker it knows stays gathering, so that the
// peers not yet re-announced are not left out of the step (they would find it closed and drop
// their gradient). Once they have announced and joined, the group is complete.
TEST_F(ServiceTest, ARestartedRegistryWaitsForThePeersHeartbeatsBeforeAGroupIsComplete) {
  auto put = [&](const std::string& id) {
    json body{{"role", "worker"}, {"stage", 0}, {"host", "h"}, {"port", 1}, {"state", "averaging"}, {"step", 12}};
    call("PUT", "/v1/peers/" + id, body.dump());
  };
  const std::string path = "/v1/stages/0/steps/12/attempts/0";
  put("a");
  call("POST", path + "/join", R"({"peerId":"a","host":"h","port":1,"gatherSeconds":5})");
  now_ += 0.5;
  EXPECT_EQ(call("GET", path + "/group")["state"], "gathering");
  put("b");
  call("POST", path + "/join", R"({"peerId":"b","host":"h","port":2,"gatherSeconds":5})");
  now_ += 2;  // past the expiry: every live peer has announced
  put("a");
  put("b");
  json g = call("GET", path + "/group");
  EXPECT_EQ(g["state"], "ready");
  EXPECT_EQ(g["members"].size(), 2u) << g.dump();
}

// A fresh job: the registry heard every stage from step 0, so a stage that is one step ahead (the
// last stage steps first) does not make it doubt who is in the others: stage 0's first group is
// complete once its only worker joined, without waiting out the expiry period (it used to wait
// ~3 s there, 15 % of a 30-step run of the default job).
TEST_F(ServiceTest, AFreshRegistryCompletesTheFirstStepsGroupsAtOnce) {
  announce("w0", 0, "worker", "serving");
  announce("w1", 1, "worker", "serving");
  call("POST", "/v1/stages/1/steps/0/progress", R"({"peerId":"w1","samples":8,"target":8})");
  call("POST", "/v1/stages/1/steps/1/progress", R"({"peerId":"w1","samples":0,"target":8})");
  call("POST", "/v1/stages/0/steps/0/progress", R"({"peerId":"w0","samples":8,"target":8})");
  const std::string path = "/v1/stages/0/steps/0/attempts/0";
  call("POST", path + "/join", R"({"peerId":"w0","host":"h","port":1,"samples":8,"gatherSeconds":15})");
  json g = call("GET", path + "/group");
  EXPECT_EQ(g["state"], "ready") << g.dump();
  EXPECT_EQ(g["members"].size(), 1u) << g.dump();
}

// The first thing a restarted registry hears may be a join, from a peer whose heartbeat has not
// come yet: the group is not complete (no joined peer is live), and the join tells the registry
// the job is past step 0. Before, the group was complete with no member and the joiner, finding
// itself left out, dropped its gradient.
TEST_F(ServiceTest, ARestartedRegistryHearingAJoinFirstKeepsTheGroupGathering) {
  const std::string path = "/v1/stages/0/steps/12/attempts/0";
  call("POST", path + "/join", R"({"peerId":"a","host":"h","port":1,"gatherSeconds":5})");
  EXPECT_EQ(call("GET", path + "/group")["state"], "gathering");
  EXPECT_EQ(call("GET", "/v1/stats")["stageSteps"].value("0", -1), 12);
}

// A group a member saw Ready before the registry restarted: re-told (PUT .../group) it is Ready
// at once with exactly those members, the join of a member is accepted, that of another peer
// closed. Bad bodies are refused by field.
TEST_F(ServiceTest, ARestartedRegistryAdoptsTheGroupAMemberReTells) {
  const std::string path = "/v1/stages/0/steps/12/attempts/1";
  // Their heartbeats carry the step they are at: a restarted registry first hears of step 12.
  call("PUT", "/v1/peers/a", R"({"role":"worker","stage":0,"host":"ha","port":1,"state":"averaging","step":12})");
  call("PUT", "/v1/peers/c", R"({"role":"worker","stage":0,"host":"hc","port":3,"state":"serving","step":12})");
  call("POST", path + "/join", R"({"peerId":"a","host":"ha","port":1,"gatherSeconds":5})");
  call("POST", path + "/join", R"({"peerId":"c","host":"hc","port":3,"gatherSeconds":5})");
  EXPECT_EQ(call("GET", path + "/group")["state"], "gathering");
  json g = call("PUT", path + "/group", R"({"members":[{"peerId":"b","host":"hb","port":2,"samples":8},
                                                       {"peerId":"a","host":"ha","port":1,"samples":4}]})");
  EXPECT_EQ(g["state"], "ready");
  EXPECT_EQ(g["leader"], "a");
  EXPECT_EQ(g["members"], json::parse(R"([{"peerId":"a","host":"ha","port":1,"samples":4},
                                          {"peerId":"b","host":"hb","port":2,"samples":8}])"));
  EXPECT_EQ(call("GET", path + "/group"), g);
  call("POST", path + "/join", R"({"peerId":"a","host":"ha","port":1,"gatherSeconds":5})");
  EXPECT_EQ(error("POST", path + "/join", R"({"peerId":"c","host":"hc","port":3,"gatherSeconds":5})", 409),
            "step closed");
  EXPECT_EQ(call("GET", "/v1/stats")["stageSteps"].value("0", -1), 12);

  EXPECT_EQ(error("PUT", path + "/group", R"({"members":[]})"), "members: must hold 1 to 4096 members, got 0 members");
  EXPECT_EQ(error("PUT", path + "/group", R"({})"), "members: is required, got nothing");
  EXPECT_EQ(error("PUT", path + "/group", R"({"members":[{"peerId":"a","host":"h","port":1},{"peerId":"a","host":"h","port":2}]})"),
            "members[1].peerId: must not name a member twice, got \"a\"");
  EXPECT_EQ(error("PUT", path + "/group", R"({"members":[{"peerId":"a","host":"h","port":0}]})").substr(0, 16),
            "members[0].port:");
}

// A frozen worker's unaveraged samples are counted lost when it expires; when it comes back and
// drops that gradient itself ("dropped" with its progress), they are not counted again. A drop the
// registry had not counted is counted.
TEST_F(ServiceTest, DroppedSamplesCountOnceWhenTheRegistryAlreadyCountedThem) {
  auto lost = [&] { return call("GET", "/v1/stats")["events"].value("samples_lost", 0); };
  announce("a", 0);
  announce("b", 0);
  call("POST", "/v1/stages/0/steps/4/progress", R"({"peerId":"a","samples":12,"target":64})");
  call("POST", "/v1/stages/0/steps/4/progress", R"({"peerId":"b","samples":5,"target":64})");
  now_ += 1.5;
  announce("b", 0);
  now_ += 1.0;  // a: silent for 2.5 s, expired, its 12 samples lost
  call("GET", "/v1/peers");
  EXPECT_EQ(lost(), 12);
  EXPECT_EQ(call("GET", "/v1/stats")["events"].value("peers_lost", 0), 1);
  announce("a", 0);  // SIGCONT: it is back, finds step 4 closed and drops its gradient: 15
  // samples, 3 more than it had reported before it froze: those 3 count now, the 12 not again
  call("POST", "/v1/stages/0/steps/4/progress", R"({"peerId":"a","samples":0,"target":64,"dropped":15})");
  EXPECT_EQ(lost(), 15) << "counted twice, or the unreported rest not at all";
  // b falls behind on its own (never expired): its drop counts.
  call("POST", "/v1/stages/0/steps/4/progress", R"({"peerId":"b","samples":0,"target":64,"dropped":5})");
  EXPECT_EQ(lost(), 20);
}

TEST_F(ServiceTest, BadInputNamesTheField) {
  const std::string progress = "/v1/stages/0/steps/1/progress";
  EXPECT_EQ(error("POST", progress, "{not json"), "body: malformed JSON, got \"{not json\"");
  EXPECT_EQ(error("POST", progress, "[1,2]"), "body: must be a JSON object, got [1,2]");
  EXPECT_EQ(error("POST", progress, ""), "body: malformed JSON, got \"\"");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","target":5})"), "samples: is required, got nothing");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","samples":"7","target":5})"),
            "samples: must be an integer in [0, 9223372036854775807], got \"7\"");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","samples":1.5,"target":5})"),
            "samples: must be an integer in [0, 9223372036854775807], got 1.5");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","samples":-1,"target":5})"),
            "samples: must be an integer in [0, 9223372036854775807], got -1");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","samples":1,"target":0})"),
            "target: must be an integer in [1, 9223372036854775807], got 0");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a b","samples":1,"target":1})"),
            "peerId: must be 1-128 characters of [A-Za-z0-9._-], got \"a b\"");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","samples":18446744073709551615,"target":1})"),
            "samples: must be an integer in [0, 9223372036854775807], got 18446744073709551615");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","samples":4,"admitted":3,"target":8})"),
            "admitted: must be an integer in [4, 9223372036854775807], got 3");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","samples":1,"want":-2,"target":8})"),
            "want: must be an integer in [-1, 9223372036854775807], got -2");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","samples":1,"unit":"4","target":8})"),
            "unit: must be an integer in [0, 9223372036854775807], got \"4\"");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","samples":1,"target":8,"transfers":{}})"),
            "transfers: must be an array of at most 1024 transfers, got {}");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","samples":1,"target":8,"transfers":[{"from":"a b","samples":4}]})"),
            "transfers[0].from: must be 1-128 characters of [A-Za-z0-9._-], got \"a b\"");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","samples":1,"target":8,"transfers":[{"from":"b","samples":0}]})"),
            "transfers[0].samples: must be an integer in [1, 9223372036854775807], got 0");
  EXPECT_EQ(error("POST", progress, R"({"peerId":"a","samples":1,"target":8,"transfers":[7]})"),
            "transfers[0]: must be a JSON object, got 7");

  EXPECT_EQ(error("POST", "/v1/stages/one/steps/1/progress", "{}"),
            "stage: must be an integer in [0, 1048576], got \"one\"");
  EXPECT_EQ(error("POST", "/v1/stages/-1/steps/1/progress", "{}"),
            "stage: must be an integer in [0, 1048576], got \"-1\"");
  EXPECT_EQ(error("POST", "/v1/stages/0/steps/99999999999999999999/progress", "{}"),
            "step: must be an integer in [0, 9223372036854775807], got \"99999999999999999999\"");
  EXPECT_EQ(error("GET", "/v1/stages/0/steps/1/attempts/x/group", ""),
            "attempt: must be an integer in [0, 2147483647], got \"x\"");

  const std::string join = "/v1/stages/0/steps/1/attempts/0/join";
  EXPECT_EQ(error("POST", join, R"({"peerId":"a","host":"h","port":1})"),
            "gatherSeconds: is required, got nothing");
  EXPECT_EQ(error("POST", join, R"({"peerId":"a","host":"h","port":1,"gatherSeconds":-2})"),
            "gatherSeconds: must be a number in [0.0, 3600.0], got -2");
  EXPECT_EQ(error("POST", join, R"({"peerId":"a","host":"","port":1,"gatherSeconds":1})"),
            "host: must be a host name or address, got \"\"");
  EXPECT_EQ(error("POST", join, R"({"peerId":"a","host":"h","port":70000,"gatherSeconds":1})"),
            "port: must be an integer in [1, 65535], got 70000");

  EXPECT_EQ(error("PUT", "/v1/peers/w1", R"({"role":"boss","host":"h"})"),
            "role: must be \"worker\" or \"trainer\", got \"boss\"");
  EXPECT_EQ(error("PUT", "/v1/peers/w1", R"({"role":"worker","host":"h","port":1})"),
            "stage: a worker needs a stage >= 0, got nothing");
  EXPECT_EQ(error("PUT", "/v1/peers/w1", R"({"role":"worker","stage":0,"host":"h"})"),
            "port: a worker needs a port in [1, 65535], got nothing");
  EXPECT_EQ(error("PUT", "/v1/peers/w1", R"({"peerId":"w2","role":"trainer","host":"h"})"),
            "peerId: must match the path's \"w1\", got \"w2\"");
  EXPECT_EQ(error("PUT", "/v1/peers/w1", R"({"role":"trainer","host":"h","state":"asleep"})"),
            "state: must be one of joining, serving, averaging, draining, failed, got \"asleep\"");
  EXPECT_EQ(error("PUT", "/v1/peers/w%201", R"({"role":"trainer","host":"h"})"),
            "peerId: must be 1-128 characters of [A-Za-z0-9._-], got \"w 1\"");
  EXPECT_EQ(error("PUT", "/v1/peers/w%2", "{}"), "path: malformed percent-encoding, got \"w%2\"");
  EXPECT_EQ(error("PUT", "/v1/peers/w1", "{\"role\":\"trainer\",\"host\":\"\xff\"}"),
            "body: malformed JSON, got \"{\\\"role\\\":\\\"trainer\\\",\\\"host\\\":\\\"\xEF\xBF\xBD\\\"}\"");

  HttpReply r = svc_.handle("GET", "/v1/peers", "role=king", "");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("role: must be"), std::string::npos);
  r = svc_.handle("GET", "/v1/peers", "stage=x", "");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("stage: must be an integer"), std::string::npos);

  EXPECT_EQ(error("GET", "/v2/peers", "", 404), "path: no such resource, got \"/v2/peers\"");
  EXPECT_EQ(error("GET", "/v1/stages/0/steps/1/bogus", "", 404),
            "path: no such resource, got \"/v1/stages/0/steps/1/bogus\"");
  EXPECT_EQ(error("POST", "/v1/peers", "", 405), "method: GET only on this path, got \"POST\"");
  EXPECT_EQ(error("GET", "/v1/stages/0/steps/1/progress", "", 405),
            "method: POST only on this path, got \"GET\"");
  EXPECT_EQ(svc_.handle("POST", progress, "", std::string(RegistryService::kMaxBodyBytes + 1, ' '))
                .status,
            413);
  // Nothing above changed any state.
  EXPECT_TRUE(call("GET", "/v1/peers")["peers"].empty());
  EXPECT_EQ(call("GET", "/healthz")["status"], "ok");
  EXPECT_EQ(call("GET", "/healthz/")["status"], "ok");
}

// A peer's state is parsed once, where the JSON enters: every state round-trips with its wire
// string, and a bad one is refused with the parser's error (naming the field and the value).
TEST(Wire, PeerStatesRoundTripAndABadOneIsRefusedWithTheParsersError) {
  for (planner::PeerState s : planner::kPeerStates) {
    SCOPED_TRACE(planner::to_string(s));
    planner::PeerRecord r;
    r.peer_id = "w-1";
    r.role = "worker";
    r.stage = 0;
    r.host = "h";
    r.port = 7000;
    r.state = s;
    json j = wire::to_json(r);
    EXPECT_EQ(j["state"], planner::to_string(s));  // the same strings on the wire as before
    EXPECT_EQ(wire::peer_from_json(j).state, s);
  }
  json bad{{"peerId", "w-1"}, {"role", "worker"}, {"stage", 0}, {"host", "h"}, {"port", 7000}, {"state", "servng"}};
  std::string parser_error;
  try {
    planner::parse_peer_state("servng");
  } catch (const std::invalid_argument& e) {
    parser_error = e.what();
  }
  ASSERT_FALSE(parser_error.empty());
  try {
    wire::peer_from_json(bad);
    FAIL() << "a bad state was accepted";
  } catch (const wire::BadField& e) {
    EXPECT_EQ(e.field(), "state");
    EXPECT_EQ(std::string(e.what()), parser_error);
    EXPECT_NE(parser_error.find("\"servng\""), std::string::npos) << parser_error;
  }
  bad["state"] = 3;
  EXPECT_THROW(wire::peer_from_json(bad), wire::BadField);  // not a string
  bad.erase("state");
  EXPECT_EQ(wire::peer_from_json(bad).state, planner::PeerState::Joining);  // the wire's default
}

TEST(Wire, RoundTrips) {
  planner::GroupView g;
  g.state = planner::GroupView::Ready;
  g.members = {{"a", "ha", 1, 10}, {"b", "hb", 2, 0}};
  g.leader = "a";
  planner::GroupView back = wire::group_from_json(wire::to_json(g));
  EXPECT_EQ(back.state, planner::GroupView::Ready);
  ASSERT_EQ(back.members.size(), 2u);
  EXPECT_EQ(back.members[0].samples, 10);
  EXPECT_EQ(back.members[1].host, "hb");
  EXPECT_EQ(back.leader, "a");

  g.state = planner::GroupView::Gathering;
  g.step_full = false;
  g.awaiting = {"gone-peer"};
  back = wire::group_from_json(wire::to_json(g));
  EXPECT_FALSE(back.step_full);
  EXPECT_EQ(back.awaiting, std::vector<std::string>{"gone-peer"});
  json older = wire::to_json(g);  // a registry before claims: full, nobody awaited
  older.erase("stepFull");
  older.erase("awaiting");
  EXPECT_TRUE(wire::group_from_json(older).step_full);
  EXPECT_TRUE(wire::group_from_json(older).awaiting.empty());

  planner::ProgressView p{7, 100, 200, true, 40, 0};
  planner::ProgressView pb = wire::progress_from_json(wire::to_json(p));
  EXPECT_EQ(pb.step, 7);
  EXPECT_EQ(pb.samples_total, 100);
  EXPECT_EQ(pb.target, 200);
  EXPECT_TRUE(pb.target_reached);
  EXPECT_EQ(pb.granted, 40);

  planner::ClaimRequest c;
  c.done = 4;
  c.used = 8;
  c.want = 16;
  c.unit = 4;
  c.transfers = {{"gone-peer", 4}};
  planner::ClaimRequest cb = wire::claim_from_json(wire::to_json(c));
  EXPECT_EQ(cb.done, 4);
  EXPECT_EQ(cb.used, 8);
  EXPECT_EQ(cb.want, 16);
  EXPECT_EQ(cb.unit, 4);
  ASSERT_EQ(cb.transfers.size(), 1u);
  EXPECT_EQ(cb.transfers[0].from, "gone-peer");
  EXPECT_EQ(cb.transfers[0].samples, 4);
  EXPECT_EQ(wire::claim_from_json(json{{"samples", 3}}).want, -1);  // a report without a claim
  json bad_group = wire::to_json(g);
  bad_group["awaiting"] = json::array({"ok", 5});
  try {
    wire::group_from_json(bad_group);
    FAIL() << "expected BadField";
  } catch (const wire::BadField& e) {
    EXPECT_EQ(e.field(), "awaiting[1]");
  }

  json bad = wire::to_json(g);
  bad["members"][1]["port"] = "x";
  try {
    wire::group_from_json(bad);
    FAIL() << "expected BadField";
  } catch (const wire::BadField& e) {
    EXPECT_EQ(e.field(), "members[1].port");
  }
}

}  // namespace
}  // namespace swarm::registry
