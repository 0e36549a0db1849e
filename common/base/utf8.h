// UTF-8 checks for text from outside: TOML parsers and JSON writers may assume it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace atl {

// The offset of the first byte where `text` stops being well-formed UTF-8 (an invalid
// byte, a truncated or overlong sequence, a surrogate, a code point past U+10FFFF), or
// nullopt when all of it is.
std::optional<size_t> FirstInvalidUtf8(std::string_view text);

// `text` with every byte that is not part of a well-formed sequence replaced by U+FFFD.
std::string ToValidUtf8(std::string_view text);

}  // namespace atl
