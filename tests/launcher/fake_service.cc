// A stand-in for atoll-rm, atoll-objectstore, atoll-executor and atoll-scheduler, so that
// LocalCluster and the CLI can be tested without the real services. The test links it
// into a directory as atoll-<role>; the role comes from the name it was started by.
//
// It follows the services' command-line contract (--config, --host/--island, --store,
// --rm, --events-in, --ready-file, --log-level), prints its command line to stderr (the
// log), writes a ready file with the contract's keys, and runs until SIGTERM/SIGINT, then
// exits 0. The fake RM is real enough for `atoll status` and `atoll watch`: it answers
// GetClusterStatus from the config (every host alive) and forwards events from events_in to
// events_out. The others bind nothing; their endpoints are placeholders.
//
// The environment steers one service, named as in LocalCluster ("rm", "executor-i0h1",
// "scheduler-island0"):
//   ATOLL_FAKE_FAIL=<name>          print "boom" and exit 3 before becoming ready
//   ATOLL_FAKE_HANG=<name>          never write the ready file
//   ATOLL_FAKE_IGNORE_TERM=<name>   ignore SIGTERM (only SIGKILL stops it)
//   ATOLL_FAKE_FAIL_AGAIN=<name>    like ATOLL_FAKE_FAIL, but only when started again by a
//                                   supervisor (given the endpoints of its first start)
// Started again, a fake writes the endpoints it was given (--endpoint, --control-endpoint,
// --data-endpoint) to its ready file, as the real services bind them.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "common/net/event_loop.h"
#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "common/service/config.h"
#include "common/service/ready_file.h"
#include "common/service/service_main.h"

namespace {

bool EnvNames(const char* var, const std::string& name) {
  const char* v = std::getenv(var);
  return v != nullptr && name == v;
}

atl::proto::ClusterStatus StatusFrom(const atl::ClusterConfig& config) {
  atl::proto::ClusterStatus status;
  uint32_t next_id = 0;
  for (const auto& island : config.islands) {
    atl::proto::IslandStatus is;
    is.name = island.name;
    is.scheduler_endpoint = "tcp://127.0.0.1:1";
    for (const auto& host : island.hosts) {
      atl::proto::HostStatus hs;
      hs.name = host.name;
      hs.alive = true;
      hs.control_endpoint = "tcp://127.0.0.1:2";
      hs.store_endpoint = "tcp://127.0.0.1:3";
      for (uint32_t d = 0; d < host.devices; ++d) {
        hs.devices.push_back({next_id++, host.kind, host.device_memory_bytes, 0});
      }
      is.hosts.push_back(std::move(hs));
    }
    status.islands.push_back(std::move(is));
  }
  return status;
}

void Forward(zmq::socket_t& from, zmq::socket_t& to) {
  auto frames = atl::net::RecvFrames(from, std::chrono::milliseconds(0));
  if (frames.ok() && *frames) static_cast<void>(atl::net::SendFrames(to, **frames));
}

// `flags`: --endpoint, --events-in and --events-out replace the config's addresses, as they do
// for the real RM (LocalCluster passes them to an RM it starts again).
int RunRm(atl::ClusterConfig config, std::map<std::string, std::string>& flags,
          const std::string& ready_file, bool ready) {
  for (auto [flag, address] : {std::pair{"--endpoint", &config.rm_endpoint},
                               std::pair{"--events-in", &config.events_in_endpoint},
                               std::pair{"--events-out", &config.events_out_endpoint}}) {
    if (!flags[flag].empty()) *address = flags[flag];
  }
  zmq::context_t context(1);
  // Secured as the real RM is, so that the CLI's keys work against it.
  config.security.keys_dir = flags["--keys"];
  auto zap = atl::SecureService(context, config);
  if (!zap.ok()) {
    std::cerr << "fake rm: " << zap.status().ToString() << std::endl;
    return 1;
  }
  auto router = atl::net::MakeSocket(context, zmq::socket_type::router);
  auto xsub = atl::net::MakeSocket(context, zmq::socket_type::xsub);
  auto xpub = atl::net::MakeSocket(context, zmq::socket_type::xpub);
  auto endpoint = atl::net::Bind(router, config.rm_endpoint);
  auto events_in = atl::net::Bind(xsub, config.events_in_endpoint);
  auto events_out = atl::net::Bind(xpub, config.events_out_endpoint);
  for (const auto* r : {&endpoint, &events_in, &events_out}) {
    if (!r->ok()) {
      std::cerr << "fake rm: " << r->status().ToString() << std::endl;
      return 1;
    }
  }
  if (ready) {
    auto s = atl::WriteReadyFile(
        ready_file,
        {{"endpoint", *endpoint}, {"events_in", *events_in}, {"events_out", *events_out}});
    if (!s.ok()) return 1;
  }
  std::cerr << "fake rm: serving on " << *endpoint << std::endl;
  zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0},
                             {xsub.handle(), 0, ZMQ_POLLIN, 0},
                             {xpub.handle(), 0, ZMQ_POLLIN, 0}};
  while (!atl::ShutdownRequested()) {
    try {
      zmq::poll(items, 3, std::chrono::milliseconds(100));
    } catch (const zmq::error_t&) {
      continue;  // EINTR from the shutdown signal
    }
    if (items[0].revents & ZMQ_POLLIN) {
      auto frames = atl::net::RecvFrames(router, std::chrono::milliseconds(0));
      if (!frames.ok() || !*frames) continue;
      auto in = atl::proto::ParseIncoming(std::move(**frames), /*routed=*/true);
      if (!in.ok()) continue;
      if (in->header.kind() == atl::proto::Kind::kGetClusterStatus) {
        static_cast<void>(atl::net::Reply(router, *in, StatusFrom(config)));
      } else {
        static_cast<void>(
            atl::net::ReplyError(router, *in, atl::Unavailable("the fake RM only answers status")));
      }
    }
    if (items[1].revents & ZMQ_POLLIN) Forward(xsub, xpub);
    if (items[2].revents & ZMQ_POLLIN) Forward(xpub, xsub);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string program = std::filesystem::path(argv[0]).filename().string();
  const std::string role = program.rfind("atoll-", 0) == 0 ? program.substr(6) : program;
  std::map<std::string, std::string> flags;
  std::cerr << "fake " << role << ":";
  for (int i = 1; i < argc; ++i) std::cerr << " " << argv[i];
  std::cerr << std::endl;
  for (int i = 1; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];

  std::string name = role;
  if (role == "objectstore" || role == "executor") name += "-" + flags["--host"];
  if (role == "scheduler") name += "-" + flags["--island"];

  auto config = atl::LoadClusterConfig(flags["--config"]);
  if (!config.ok()) {
    std::cerr << "fake " << name << ": " << config.status().ToString() << std::endl;
    return 1;
  }
  // The contract: who must be told what.
  std::vector<std::string> required = {"--ready-file"};
  if (role != "rm") required.push_back("--events-in");
  if (role == "executor") required.insert(required.end(), {"--host", "--store", "--rm"});
  if (role == "objectstore") required.push_back("--host");
  if (role == "scheduler") required.insert(required.end(), {"--island", "--rm"});
  for (const auto& flag : required) {
    if (flags[flag].empty()) {
      std::cerr << "fake " << name << ": missing " << flag << std::endl;
      return 2;
    }
  }
  // LocalCluster passes these only to a service it starts again.
  const bool restarted = !flags["--endpoint"].empty() || !flags["--control-endpoint"].empty();
  if (EnvNames("ATOLL_FAKE_FAIL", name) || (restarted && EnvNames("ATOLL_FAKE_FAIL_AGAIN", name))) {
    std::cerr << "fake " << name << ": boom, failing on purpose" << std::endl;
    return 3;
  }
  atl::InstallShutdownSignals();
  if (EnvNames("ATOLL_FAKE_IGNORE_TERM", name)) signal(SIGTERM, SIG_IGN);
  const bool ready = !EnvNames("ATOLL_FAKE_HANG", name);
  const std::string& ready_file = flags["--ready-file"];
  if (role == "rm") return RunRm(*config, flags, ready_file, ready);

  auto given = [&](const std::string& flag, const std::string& placeholder) {
    return flags[flag].empty() ? placeholder : flags[flag];
  };
  std::map<std::string, std::string> values;
  if (role == "objectstore") {
    values = {{"endpoint", given("--endpoint", "tcp://127.0.0.1:3")},
              {"arena", "/atoll-fake-" + flags["--host"]}};
  } else if (role == "executor") {
    values = {{"control", given("--control-endpoint", "tcp://127.0.0.1:2")},
              {"data", given("--data-endpoint", "tcp://127.0.0.1:4")}};
  } else {
    values = {{"endpoint", given("--endpoint", "tcp://127.0.0.1:1")}};
  }
  if (ready && !atl::WriteReadyFile(ready_file, values).ok()) return 1;
  while (!atl::ShutdownRequested()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::cerr << "fake " << name << ": stopped" << std::endl;
  return 0;
}
