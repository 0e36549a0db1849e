// The atoll-objectstore binary started alone for a test: a real process, real sockets on
// loopback, the real shared-memory arena; no RM (every client counts as live) and plain
// text. Its checkpoint root is <dir_>/checkpoints.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <msgpack.hpp>
#include <zmq.hpp>

#include "common/base/shm_arena.h"
#include "common/net/event_reader.h"
#include "common/net/transport.h"
#include "common/proto/codec.h"
#include "common/service/ready_file.h"
#include "tests/status_matchers.h"

namespace atl::testing {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kCallTimeout = 5000ms;

inline std::vector<std::byte> Bytes(const std::vector<float>& values) {
  std::vector<std::byte> out(values.size() * sizeof(float));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline net::Frames DataFrame(const std::vector<std::byte>& bytes) {
  net::Frames frames;
  frames.emplace_back(bytes.data(), bytes.size());
  return frames;
}

inline std::vector<std::byte> FrameBytes(const zmq::message_t& frame) {
  const auto* p = static_cast<const std::byte*>(frame.data());
  return {p, p + frame.size()};
}

class StoreProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/atoll-store-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    events_.set(zmq::sockopt::subscribe, "");
    auto bound = net::Bind(events_, "tcp://127.0.0.1:*");
    ASSERT_THAT(bound, IsOk());
    events_endpoint_ = *bound;
  }

  void TearDown() override {
    if (pid_ > 0) StopStore();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Starts the store with a one-island, one-host configuration and waits (10 s at most) for
  // its ready file. `heartbeat_ms` * 4 is how long a silent client keeps its objects. The
  // host has one cpu device of `device_memory_mb` when that is not 0.
  void StartStore(uint32_t heartbeat_ms = 1000, uint32_t device_memory_mb = 0) {
    const std::string config = dir_ + "/cluster.toml";
    const std::string ready = dir_ + "/store.ready";
    {
      std::ofstream out(config);
      out << "[cluster]\nbind_host = \"127.0.0.1\"\nheartbeat_ms = " << heartbeat_ms
          << "\nliveness = 4\nlog_level = \"info\"\n"
          // No RM: the store alone, which then takes every client as live.
          << "[rm]\nendpoint = \"tcp://127.0.0.1:*\"\nevents_in = \"" << events_endpoint_ << "\"\n"
          << "[security]\nmode = \"plain\"\n"  // the store alone, spoken to in plain text
          << "[checkpoints]\nroot = \"" << checkpoint_root() << "\"\n"
          << "[[islands]]\nname = \"i0\"\n"
          << "[[islands.hosts]]\nname = \"h0\"\narena_mb = 4\n";
      if (device_memory_mb != 0) {
        out << "devices = 1\nkind = \"cpu\"\ndevice_memory_mb = " << device_memory_mb << "\n";
      }
    }
    const std::string binary = ATOLL_BIN_DIR "/atoll-objectstore";
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      execl(binary.c_str(), binary.c_str(), "--config", config.c_str(), "--host", "h0",
            "--ready-file", ready.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    const auto deadline = Clock::now() + 10s;
    while (true) {
      if (std::filesystem::exists(ready)) break;
      int status = 0;
      ASSERT_EQ(waitpid(pid_, &status, WNOHANG), 0) << "atoll-objectstore exited early";
      ASSERT_LT(Clock::now(), deadline) << "no ready file within 10 s";
      std::this_thread::sleep_for(10ms);
    }
    auto values = ReadReadyFile(ready);
    ASSERT_THAT(values, IsOk());
    endpoint_ = (*values)["endpoint"];
    arena_ = (*values)["arena"];
    ASSERT_FALSE(endpoint_.empty());
    ASSERT_FALSE(arena_.empty());
    SyncEventStream();
  }

  // A PUB drops events until its SUB peer's subscription arrives, and a bound SUB sends it
  // only once this thread uses the socket. Sends a request that the store rejects without
  // changing anything (an "error.store" event) until such an event comes through.
  void SyncEventStream() {
    auto store = Connect();
    const auto deadline = Clock::now() + 10s;
    while (Clock::now() < deadline) {
      auto rejected = store->Call<proto::Ok>(proto::ReleaseObject{~uint64_t{0}}, kCallTimeout);
      ASSERT_EQ(rejected.status().code(), Code::kNotFound);
      auto got = net::RecvFrames(events_, 20ms);
      if (got.ok() && got->has_value()) {
        while (true) {  // drain the rest
          auto more = net::RecvFrames(events_, 0ms);
          if (!more.ok() || !more->has_value()) break;
        }
        return;
      }
    }
    FAIL() << "no event from the store within 10 s";
  }

  // SIGTERM, then SIGKILL if it has not exited within 5 s. Returns the wait status.
  int StopStore() {
    int status = 0;
    kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + 5s;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ADD_FAILURE() << "atoll-objectstore ignored SIGTERM for 5 s";
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    pid_ = -1;
    return status;
  }

  std::string checkpoint_root() const { return dir_ + "/checkpoints"; }

  bool StoreAlive() { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }

  std::unique_ptr<net::Requester> Connect() {
    auto requester = std::make_unique<net::Requester>(context_, endpoint_);
    EXPECT_THAT(requester->Connect(), IsOk());
    return requester;
  }

  Status Put(net::Requester& store, uint64_t object, uint64_t owner,
             const std::vector<float>& values) {
    proto::PutObject put{object, 0, owner, DType::kF32, {static_cast<int64_t>(values.size())}};
    return store.Call<proto::Ok>(put, kCallTimeout, DataFrame(Bytes(values))).status();
  }

  Result<proto::GetObjectReply> Get(net::Requester& store, uint64_t object, uint32_t timeout_ms,
                                    net::Frames* data = nullptr) {
    return store.Call<proto::GetObjectReply>(proto::GetObject{object, 0, timeout_ms, true},
                                             kCallTimeout, {}, data);
  }

  // Sends raw header bytes and returns the decoded Error reply with request id `reply_id`.
  proto::Error ExpectErrorReply(net::Requester& store, zmq::message_t header, uint64_t reply_id) {
    auto in = store.Call(reply_id, std::move(header), {}, kCallTimeout);
    EXPECT_THAT(in, IsOk());
    if (!in.ok()) return {};
    EXPECT_EQ(in->header.kind(), proto::Kind::kError);
    auto err = in->header.As<proto::Error>();
    EXPECT_THAT(err, IsOk());
    return err.ok() ? *err : proto::Error{};
  }

  // Waits (bounded) for an event on `topic` whose field `key` equals `value`.
  std::optional<Event> WaitForEvent(const std::string& topic, const std::string& key,
                                    uint64_t value, std::chrono::milliseconds within) {
    const auto deadline = Clock::now() + within;
    while (Clock::now() < deadline) {
      auto got = net::RecvFrames(events_, 50ms);
      if (!got.ok() || !got->has_value() || (*got)->size() != 2) continue;
      auto event = DecodeEvent((**got)[0], (**got)[1]);
      if (!event.ok() || event->topic != topic) continue;
      if (event->fields.contains(key) && event->fields[key] == value) return *event;
    }
    return std::nullopt;
  }

  zmq::context_t context_;
  zmq::socket_t events_ = net::MakeSocket(context_, zmq::socket_type::sub);
  std::string events_endpoint_;
  std::string dir_;
  pid_t pid_ = -1;
  std::string endpoint_;
  std::string arena_;
};

}  // namespace atl::testing
