// atoll-bench-zmq-echo: the other process of bench/client's raw ZeroMQ round trip. Connects a
// DEALER to the benchmark's bound DEALER (argv[1]) and sends every message it receives straight
// back, unread: the least a peer can do for a round trip. Exits on ["bye"] or after a minute
// without a message.
#include <cstdio>

#include "common/net/transport.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: atoll-bench-zmq-echo ENDPOINT\n");
    return 2;
  }
  zmq::context_t context;
  zmq::socket_t socket = atl::net::MakeSocket(context, zmq::socket_type::dealer);
  if (auto s = atl::net::Connect(socket, argv[1]); !s.ok()) {
    std::fprintf(stderr, "atoll-bench-zmq-echo: %s\n", s.ToString().c_str());
    return 1;
  }
  atl::net::Frames hello;
  hello.emplace_back(std::string_view("hello"));
  if (!atl::net::SendFrames(socket, hello).ok()) return 1;
  while (true) {
    auto got = atl::net::RecvFrames(socket, std::chrono::minutes(1));
    if (!got.ok() || !got->has_value()) return 1;
    if ((**got)[0].to_string_view() == "bye") return 0;
    if (!atl::net::SendFrames(socket, **got).ok()) return 1;
  }
}
