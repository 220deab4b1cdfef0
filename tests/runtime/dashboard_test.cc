// The Grafana dashboard (dashboards/swarm-operator.json, shipped by the chart) against a real
// Prometheus that scrapes a training swarm (workers with fp16 loss scaling, a trainer, the
// registry) and an operator's metrics: every query the dashboard sends is valid PromQL, names only
// metrics these processes export, and every panel shows data.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "operator/controller/metrics.h"
#include "registry/registry_client.h"
#include "tests/stage/swarm_fixture.h"
#include "common/ports.h"
#include "worker/trainer/trainer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace swarm {
namespace {

const std::string kDashboard = std::string(SWARM_SOURCE_DIR) + "/dashboards/swarm-operator.json";
const std::string kRules = std::string(SWARM_SOURCE_DIR) + "/dashboards/swarm-operator.rules.yaml";

std::string sh(const std::string& cmd) { return testing::shell(cmd).second; }

json load_dashboard() {
  std::ifstream in(kDashboard);
  return json::parse(in);
}

struct Query {
  std::string panel;
  std::string expr;
};

std::vector<Query> queries(const json& dash) {
  std::vector<Query> out;
  for (const auto& p : dash.at("panels"))
    if (p.at("type") != "row")
      for (const auto& t : p.at("targets")) out.push_back({p.at("title").get<std::string>(), t.at("expr")});
  return out;
}

// The alerting rules' expressions (promtool's unit tests check what they fire on; here, that they
// read metrics the processes really export).
std::vector<Query> rule_queries() {
  std::vector<Query> out;
  for (const auto& group : YAML::LoadFile(kRules)["groups"])
    for (const auto& rule : group["rules"])
      out.push_back({"alert " + rule["alert"].as<std::string>(), rule["expr"].as<std::string>()});
  return out;
}

// The metric names an expression reads: every metric of the project starts with `swarm_` (labels
// such as `swarmjob` do not).
std::set<std::string> metric_names(const std::string& expr) {
  std::set<std::string> names;
  static const std::regex id(R"(\bswarm_[a-zA-Z0-9_:]*)");
  for (std::sregex_iterator it(expr.begin(), expr.end(), id), end; it != end; ++it) names.insert(it->str());
  return names;
}

// Grafana's variables as the test's targets carry them.
std::string substitute(std::string expr) {
  const std::pair<const char*, const char*> vars[] = {{"$__rate_interval", "15s"},
                                                      {"$operator_namespace", "swarm-system"},
                                                      {"$namespace", "ml-team"},
                                                      {"$swarmjob", "tiny-test"}};
  for (const auto& [from, to] : vars)
    for (size_t at; (at = expr.find(from)) != std::string::npos;) expr.replace(at, std::strlen(from), to);
  return expr;
}

std::string url_encode(const std::string& s) {
  std::string out;
  char hex[4];
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

TEST(Dashboard, IsAWellFormedGrafanaDashboard) {
  ASSERT_TRUE(fs::exists(kDashboard)) << kDashboard;
  const auto dash = load_dashboard();
  EXPECT_EQ(dash.at("uid"), "swarm-operator");
  std::set<int> ids;
  std::set<std::string> variables;
  for (const auto& v : dash.at("templating").at("list")) variables.insert(v.at("name"));
  for (const char* v : {"datasource", "namespace", "swarmjob", "operator_namespace"})
    EXPECT_TRUE(variables.count(v)) << "variable " << v;
  int panels = 0;
  for (const auto& p : dash.at("panels")) {
    SCOPED_TRACE(p.at("title").get<std::string>());
    EXPECT_TRUE(ids.insert(p.at("id").get<int>()).second) << "duplicate panel id";
    const auto& g = p.at("gridPos");
    EXPECT_LE(g.at("x").get<int>() + g.at("w").get<int>(), 24);
    if (p.at("type") == "row") continue;
    ++panels;
    EXPECT_EQ(p.at("datasource").at("uid"), "${datasource}");
    EXPECT_FALSE(p.at("description").get<std::string>().empty());
    ASSERT_FALSE(p.at("targets").empty());
    for (const auto& t : p.at("targets")) {
      const std::string expr = t.at("expr");
      // Data-plane panels filter by job; operator panels by the operator's namespace.
      if (expr.find("swarm_operator_") != std::string::npos)
        EXPECT_NE(expr.find("$operator_namespace"), std::string::npos) << expr;
      else
        EXPECT_NE(expr.find("swarmjob=~\"$swarmjob\""), std::string::npos) << expr;
    }
  }
  EXPECT_GE(panels, 20);
}

TEST(Dashboard, EveryQueryReturnsDataFromARealPrometheus) {
  ASSERT_NE(sh("command -v prometheus"), "") << "prometheus missing: run scripts/install-deps.sh";
  torch::set_num_threads(1);
  auto spec = testing::tiny_job(2, 100000);
  spec.workers.device = "cpu";
  spec.workers.precision = "fp16";
  testing::LocalSwarm swarm(spec, 1, [](runtime::WorkerOptions& o) { o.force_loss_scaling = true; });

  // The trainer runs until the end of the test, so every target stays up while Prometheus reads.
  const int trainer_metrics = runtime::pick_free_port();
  std::atomic<bool> stop{false};
  std::thread trainer([&] {
    runtime::TrainerOptions t;
    t.spec = swarm.spec;
    t.peer_id = "trainer0";
    t.registry_url = swarm.registry->url();
    t.secret = testing::kSecret;
    t.metrics_bind = "127.0.0.1:" + std::to_string(trainer_metrics);
    t.eval_batches = 0;
    runtime::Trainer(t).run(stop);
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } join{stop, trainer};

  // A peer that is announced but dead (nothing listens on its port): the trainer's requests to it
  // fail and are retried on the live peer, the registry counts it lost when it is withdrawn.
  registry::RegistryClient client(swarm.registry->url(), std::chrono::seconds(2), testing::kSecret);
  planner::PeerRecord ghost;
  ghost.peer_id = "ghost";
  ghost.role = "worker";
  ghost.stage = 0;
  ghost.host = "127.0.0.1";
  ghost.port = runtime::pick_free_port();
  ghost.state = planner::PeerState::Serving;
  ghost.samples_per_second = 1000;
  const auto began = std::chrono::steady_clock::now();
  auto seconds_since = [](auto t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  for (int i = 0; i < 100; ++i) {
    ghost.step = swarm.workers[0]->status().step;
    client.announce(ghost);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (testing::scrape_metrics(trainer_metrics).find("swarm_requests_retried_total{") != std::string::npos) break;
  }
  client.withdraw("ghost", false);
  std::cout << "dead peer retried around after " << seconds_since(began) << " s\n";
  client.add_event("preemptions", 1);
  ASSERT_NE(testing::scrape_metrics(trainer_metrics).find("swarm_requests_retried_total{"), std::string::npos)
      << "the trainer never retried away from the dead peer";

  // The operator's metrics, as a leader managing one job.
  op::OperatorMetrics om;
  const int operator_port = runtime::pick_free_port();
  om.serve("127.0.0.1", operator_port);
  om.set_leader(true);
  om.set_job("ml-team/tiny-test", "Running", {{{"spot-a", 0, "Running"}, 1}, {{"spot-a", 1, "Running"}, 1}});
  om.observe_reconcile(0.01, true);
  om.set_queue_depth(0);
  om.add_preemption("spot-a", "reclaim-notice");
  om.observe_reclaim_to_replacement(0.05);
  om.add_registry_read("ok");

  const auto dir = fs::temp_directory_path() / ("swarm-dashboard-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int prom_port = runtime::pick_free_port();
  const std::string registry_target = swarm.registry->url().substr(std::string("http://").size());
  {
    std::ofstream cfg(dir / "prometheus.yml");
    cfg << "global: {scrape_interval: 1s}\nscrape_configs:\n"
        << "  - job_name: swarm\n    static_configs:\n      - labels: {namespace: ml-team, swarmjob: tiny-test}\n"
        << "        targets: ['127.0.0.1:" << trainer_metrics << "', '" << registry_target << "'";
    for (auto& w : swarm.workers) cfg << ", '127.0.0.1:" << w->metrics_port() << "'";
    cfg << "]\n  - job_name: operator\n    static_configs:\n      - labels: {namespace: swarm-system}\n"
        << "        targets: ['127.0.0.1:" << operator_port << "']\n";
  }
  const std::string pid = sh("prometheus --config.file=" + (dir / "prometheus.yml").string() +
                             " --storage.tsdb.path=" + (dir / "data").string() +
                             " --web.listen-address=127.0.0.1:" + std::to_string(prom_port) + " > " +
                             (dir / "prometheus.log").string() + " 2>&1 & echo $!");
  struct Kill {
    std::string pid;
    ~Kill() { sh("kill " + pid); }
  } kill{pid};

  const std::string api = "http://127.0.0.1:" + std::to_string(prom_port) + "/api/v1/";
  auto query = [&](const std::string& expr) {
    auto text = sh("curl -s '" + api + "query?query=" + url_encode(expr) + "'");
    try {
      return json::parse(text);
    } catch (const std::exception&) {
      return json{{"status", "unparsable"}, {"text", text}};
    }
  };
  // Rates over 15 s need a few scrapes of every target: wait until the slowest panel has data.
  const auto all = queries(load_dashboard());
  std::map<std::string, bool> panel_has_data;
  const auto scraping = std::chrono::steady_clock::now();
  for (int attempt = 0; attempt < 90; ++attempt) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    panel_has_data.clear();
    for (const auto& q : all) {
      auto r = query(substitute(q.expr));
      panel_has_data[q.panel] |= r.value("status", "") == "success" && !r["data"]["result"].empty();
    }
    bool every = true;
    for (const auto& [_, has] : panel_has_data) every = every && has;
    if (every && attempt >= 5) break;
    if (attempt % 10 == 9)
      for (const auto& [panel, has] : panel_has_data)
        if (!has) std::cout << "  after " << attempt + 1 << " s still empty: " << panel << "\n";
  }
  std::cout << "every panel had data after " << seconds_since(scraping) << " s of scraping\n";
  for (const auto& [panel, has] : panel_has_data)
    if (!has) std::cout << "  still empty: " << panel << "\n";

  // Every query is valid PromQL; every metric it names exists in Prometheus.
  std::set<std::string> scraped;
  const std::string names_reply = sh("curl -s '" + api + "label/__name__/values'");
  for (const auto& n : json::parse(names_reply).value("data", json::array())) scraped.insert(n.get<std::string>());
  ASSERT_FALSE(scraped.empty()) << names_reply;
  auto checked = all;
  for (auto& q : rule_queries()) checked.push_back(q);
  for (const auto& q : checked) {
    SCOPED_TRACE(q.panel + ": " + q.expr);
    auto r = query(substitute(q.expr));
    EXPECT_EQ(r.value("status", ""), "success") << r.dump();
    for (const auto& name : metric_names(q.expr))
      EXPECT_TRUE(scraped.count(name)) << "metric " << name << " is not exported by any process";
  }
  for (const auto& [panel, has] : panel_has_data) EXPECT_TRUE(has) << "panel \"" << panel << "\" shows no data";
  if (::testing::Test::HasFailure()) {
    std::cerr << "targets: " << sh("curl -s '" + api + "targets'").substr(0, 4000) << "\nprometheus.log:\n"
              << sh("tail -20 " + (dir / "prometheus.log").string()) << "\n";
    return;  // keep the directory for a look
  }
  std::cout << panel_has_data.size() << " panels, " << all.size() << " queries, " << checked.size() - all.size()
            << " alert expressions, " << scraped.size()
            << " metric names scraped\n";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace swarm
