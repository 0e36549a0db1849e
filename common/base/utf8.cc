#include "common/base/utf8.h"

namespace atl {

namespace {

// The length of the well-formed sequence at `at`, or 0 when there is none (Unicode's
// table 3-7 of well-formed byte sequences).
size_t SequenceAt(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t length = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    length = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    length = 3;
    if (b0 == 0xe0) lo = 0xa0;  // no overlong
    if (b0 == 0xed) hi = 0x9f;  // no surrogate
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    length = 4;
    if (b0 == 0xf0) lo = 0x90;  // no overlong
    if (b0 == 0xf4) hi = 0x8f;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (text.size() - at < length) return 0;
  if (byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return length;
}

}  // namespace

std::optional<size_t> FirstInvalidUtf8(std::string_view text) {
  for (size_t at = 0; at < text.size();) {
    const size_t n = SequenceAt(text, at);
    if (n == 0) return at;
    at += n;
  }
  return std::nullopt;
}

std::string ToValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const size_t n = SequenceAt(text, at);
    if (n == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++at;
    } else {
      out.append(text.substr(at, n));
      at += n;
    }
  }
  return out;
}

}  // namespace atl
