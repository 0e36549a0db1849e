#include "common/net/zap_handler.h"

#include <filesystem>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/net/curve_keys.h"
#include "common/net/security.h"

namespace atl::net {

namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr auto kStopCheck = std::chrono::milliseconds(100);

std::string Text(const zmq::message_t& frame) {
  return std::string(static_cast<const char*>(frame.data()), frame.size());
}

std::string Z85(const zmq::message_t& key) {
  if (key.size() != 32) return "";
  char text[41];
  zmq_z85_encode(text, static_cast<const uint8_t*>(key.data()), 32);
  return text;
}

}  // namespace

Result<std::unique_ptr<ZapHandler>> ZapHandler::Start(zmq::context_t& context,
                                                      std::string cluster_public_key,
                                                      std::string keys_dir) {
  zmq::socket_t socket(context, zmq::socket_type::rep);
  socket.set(zmq::sockopt::linger, 0);
  try {
    socket.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    return FailedPrecondition(std::string("cannot serve ZAP (is a handler running already?): ") +
                              e.what());
  }
  return std::unique_ptr<ZapHandler>(
      new ZapHandler(std::move(socket), std::move(cluster_public_key), std::move(keys_dir)));
}

ZapHandler::ZapHandler(zmq::socket_t socket, std::string cluster_public_key, std::string keys_dir)
    : socket_(std::move(socket)),
      cluster_public_key_(std::move(cluster_public_key)),
      keys_dir_(std::move(keys_dir)) {
  ReloadAllowedIfChanged();
  thread_ = std::thread([this] { Loop(); });
}

ZapHandler::~ZapHandler() {
  stop_.store(true);
  thread_.join();
}

void ZapHandler::Loop() {
  while (!stop_.load()) {
    std::vector<zmq::message_t> request;
    try {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, kStopCheck) == 0) continue;
      while (true) {
        zmq::message_t part;
        if (!socket_.recv(part, zmq::recv_flags::none)) break;
        const bool more = part.more();
        request.push_back(std::move(part));
        if (!more) break;
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      spdlog::error("ZAP: {}", e.what());
      continue;
    }
    // version, request id, domain, address, routing id, mechanism, credentials...
    std::string user_id;
    if (request.size() >= 7 && Text(request[0]) == "1.0" && Text(request[5]) == "CURVE") {
      user_id = Authenticate(Text(request[2]), Z85(request[6]));
    }
    const bool ok = !user_id.empty();
    (ok ? accepted_ : refused_).fetch_add(1);
    // A refused peer reconnects every 100 ms or so: one line per key is enough.
    const std::string key = request.size() >= 7 ? Z85(request[6]) : "";
    if (!ok && refused_keys_.insert(key).second) {
      spdlog::warn(
          "refused connections from {} (and later ones with its key): key {} is not "
          "allowed",
          request.size() > 3 ? Text(request[3]) : "?", key.empty() ? "(none)" : key);
    }
    const std::string request_id = request.size() > 1 ? Text(request[1]) : "";
    const std::vector<std::string> reply = {
        "1.0", request_id, ok ? "200" : "400", ok ? "OK" : "key not allowed", user_id, ""};
    try {
      for (size_t i = 0; i < reply.size(); ++i) {
        socket_.send(zmq::buffer(reply[i]),
                     i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      spdlog::error("ZAP reply: {}", e.what());
    }
  }
}

std::string ZapHandler::Authenticate(const std::string& domain, const std::string& key) {
  if (key.empty()) return "";
  if (key == cluster_public_key_) return proto::kMemberUserId;
  if (domain != kZapDomainEveryone) return "";
  ReloadAllowedIfChanged();
  auto it = allowed_.find(key);
  return it != allowed_.end() ? proto::kClientUserIdPrefix + it->second : "";
}

void ZapHandler::ReloadAllowedIfChanged() {
  std::error_code ec;
  const auto mtime = std::filesystem::last_write_time(keys_dir_ + "/allowed", ec);
  const int64_t mtime_ns = ec ? 0 : mtime.time_since_epoch().count();
  if (mtime_ns == allowed_mtime_ns_) return;
  allowed_mtime_ns_ = mtime_ns;
  std::vector<std::string> skipped;
  allowed_ = ReadAllowedKeys(keys_dir_, &skipped);
  for (const auto& why : skipped) spdlog::warn("allowed keys: {}", why);
  spdlog::info("allowed client keys: {}", allowed_.size());
}

}  // namespace atl::net
