// VirtualNetwork: machines on one machine, for tests and benchmarks whose traffic between
// "machines" must cross a real network path that can be cut. Each machine is a network
// namespace with its own address on 10.77.0.0/24 and a veth pair to a bridge; the bridge
// lives in a namespace of its own (the switch), so nothing is added to the namespace this
// process started in. Since the whole network is private to its namespaces, every instance
// may use the same addresses; the namespaces' names carry this process's pid.
//
// Needs CAP_NET_ADMIN and iproute2's `ip`. Everything it made is removed by its destructor:
// every process running in its namespaces is SIGKILLed (by pid) and the namespaces are
// deleted, which deletes their links. Namespaces left by an instance whose process died
// without that (SIGKILL) are removed by the next Create.
//
// Example:
//   auto network = VirtualNetwork::Create({"head", "worker"});
//   if (network.status().code() == Code::kFailedPrecondition) skip: no namespaces here
//   RunCommand((*network)->Inside("head", {"/path/to/atoll-rm", ...}));
//   (*network)->Enter("worker");        // this thread's sockets now live on "worker"
//   (*network)->SetLink("head", false); // its cable pulled at the switch
//
// Not thread-safe. Enter() and Leave() move the calling thread only (and what it starts
// afterwards: threads, forked processes, a ZeroMQ context's I/O threads); call them, and
// destroy the network, from the thread that created it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "atoll/status.h"

namespace atl {

class VirtualNetwork {
 public:
  struct Machine {
    std::string name;
    std::string netns;    // the namespace's name (`ip netns`), unique to this process
    std::string address;  // its IPv4 address, "10.77.0.N"
    std::string port;     // its veth's end on the switch, which SetLink sets down or up
  };

  // Machines with these names (letters, digits, '-' and '_', up to 64 each; at most 200
  // machines), addressed 10.77.0.1, .2, ... in this order, each with its loopback up.
  // FailedPrecondition when this machine cannot make network namespaces (no CAP_NET_ADMIN,
  // no `ip`), with why; any other error is a failure to build the network once namespaces
  // could be made.
  static Result<std::unique_ptr<VirtualNetwork>> Create(const std::vector<std::string>& machines);

  ~VirtualNetwork();
  VirtualNetwork(const VirtualNetwork&) = delete;
  VirtualNetwork& operator=(const VirtualNetwork&) = delete;

  // The machine named `name`, which must be one given to Create (std::out_of_range if not).
  const Machine& machine(const std::string& name) const { return machines_.at(name); }
  const std::string& Address(const std::string& name) const { return machine(name).address; }

  // `argv` run inside the machine's namespace: `ip netns exec NETNS argv...` (ip execs the
  // program, so the pid of a process started so is the program's).
  std::vector<std::string> Inside(const std::string& name,
                                  const std::vector<std::string>& argv) const;

  // Cuts (up = false) or restores the machine's link, at the switch: its packets are
  // dropped both ways meanwhile, and its connections live on, as when a cable is pulled.
  Status SetLink(const std::string& name, bool up);

  // Moves the calling thread into the machine's namespace; Leave() moves it back to the
  // namespace it was in at Create.
  Status Enter(const std::string& name);
  Status Leave();

 private:
  VirtualNetwork() = default;
  // Runs `ip args...`, bounded; Unavailable with its output when it fails.
  Status Ip(const std::vector<std::string>& args) const;
  Status Build(const std::vector<std::string>& machines);

  std::string ip_;                    // the `ip` program's path
  std::string switch_netns_;          // holds the bridge; empty until made
  std::vector<std::string> created_;  // every namespace made, in order
  std::map<std::string, Machine> machines_;
  int home_netns_fd_ = -1;  // the creating thread's namespace at Create
  bool entered_ = false;
};

}  // namespace atl
