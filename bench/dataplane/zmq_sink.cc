// atoll-bench-zmq-sink: the receiving process of bench/dataplane's raw ZeroMQ baseline.
// Connects a DEALER to the benchmark's bound DEALER (argv[1]) and greets it; then, for each
// request ["count", N] it receives N messages and answers with the wall-clock microseconds
// at which the last one arrived. It only receives: no copy, no decoding, the least any
// receiver can do. Exits when the benchmark says ["bye"] or goes silent for a minute.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/net/events.h"
#include "common/net/transport.h"

namespace {

using namespace std::chrono_literals;
constexpr auto kIdle = 60s;

// The next message: taken at once when one is waiting (no poll per message, as a tight
// receive loop would), else awaited for at most kIdle.
atl::Result<std::optional<atl::net::Frames>> Receive(zmq::socket_t& socket) {
  auto got = atl::net::RecvFrames(socket, 0ms);
  if (got.ok() && !got->has_value()) return atl::net::RecvFrames(socket, kIdle);
  return got;
}

int Fail(const atl::Status& status) {
  std::fprintf(stderr, "atoll-bench-zmq-sink: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: atoll-bench-zmq-sink ENDPOINT\n");
    return 2;
  }
  zmq::context_t context;
  zmq::socket_t socket = atl::net::MakeSocket(context, zmq::socket_type::dealer);
  if (auto s = atl::net::Connect(socket, argv[1]); !s.ok()) return Fail(s);
  atl::net::Frames hello;
  hello.emplace_back(std::string_view("hello"));
  if (auto s = atl::net::SendFrames(socket, hello); !s.ok()) return Fail(s);
  while (true) {
    auto request = Receive(socket);
    if (!request.ok()) return Fail(request.status());
    if (!request->has_value()) return Fail(atl::DeadlineExceeded("no request for a minute"));
    const atl::net::Frames& r = **request;
    if (r[0].to_string_view() == "bye") return 0;
    uint64_t count = 0;
    if (r.size() != 2 || r[0].to_string_view() != "count" || r[1].size() != sizeof(count)) {
      return Fail(atl::InvalidArgument("expected [\"count\", N] or [\"bye\"]"));
    }
    std::memcpy(&count, r[1].data(), sizeof(count));
    int64_t last_us = 0;
    for (uint64_t i = 0; i < count; ++i) {
      auto got = Receive(socket);
      if (!got.ok()) return Fail(got.status());
      if (!got->has_value()) return Fail(atl::DeadlineExceeded("a message did not come"));
      last_us = atl::NowMicros();
    }
    atl::net::Frames reply;
    reply.emplace_back(&last_us, sizeof(last_us));
    if (auto s = atl::net::SendFrames(socket, reply); !s.ok()) return Fail(s);
  }
}
