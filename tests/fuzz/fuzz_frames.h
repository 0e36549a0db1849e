// How a fuzz input stands for a multipart ZeroMQ message: its frames back to back, each
// followed by kFrameSeparator but the last. 0xc1 is the one byte msgpack never uses, so a
// header frame never holds the separator, and mutations that add, drop or move one make
// messages with more, fewer or other frames.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <zmq.hpp>

namespace atl::fuzz {

inline constexpr std::string_view kFrameSeparator = "\xc1\xc1\xc1\xc1";

inline std::vector<zmq::message_t> SplitFrames(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<zmq::message_t> frames;
  size_t begin = 0;
  while (true) {
    const size_t end = input.find(kFrameSeparator, begin);
    const std::string_view frame =
        input.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
    frames.emplace_back(frame.data(), frame.size());
    if (end == std::string_view::npos) return frames;
    begin = end + kFrameSeparator.size();
  }
}

inline std::string JoinFrames(const std::vector<zmq::message_t>& frames) {
  std::string input;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (i > 0) input += kFrameSeparator;
    input += frames[i].to_string_view();
  }
  return input;
}

}  // namespace atl::fuzz
