// MSGPACK_DEFINE_TRIMMED(fields...): as MSGPACK_DEFINE, except that the array is cut after
// the last field whose value differs from that of a default-constructed object. Unpacking
// is MSGPACK_DEFINE's, which leaves the fields a short array lacks at their defaults. For
// hot-path bodies whose trailing fields are mostly unset (a tuple's resharding and error
// fields): they take less space and much less time to unpack. List the fields that are
// most often set first. msgpack::object(value, zone), for tests and logs, has every field.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <msgpack.hpp>

namespace atl::proto {

template <typename Packer, typename Fields>
void PackTrimmed(Packer& packer, const Fields& fields, const Fields& defaults) {
  constexpr size_t kCount = std::tuple_size_v<Fields>;
  size_t count = 0;  // through the last field that is not at its default
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((count = std::get<I>(fields) == std::get<I>(defaults) ? count : I + 1), ...);
  }
  (std::make_index_sequence<kCount>{});
  packer.pack_array(static_cast<uint32_t>(count));
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((I < count ? void(packer.pack(std::get<I>(fields))) : void()), ...);
  }
  (std::make_index_sequence<kCount>{});
}

}  // namespace atl::proto

#define MSGPACK_DEFINE_TRIMMED(...)                                                             \
  auto msgpack_fields() const { return std::tie(__VA_ARGS__); }                                 \
  template <typename Packer>                                                                    \
  void msgpack_pack(Packer& msgpack_pk) const {                                                 \
    static const std::remove_cvref_t<decltype(*this)> msgpack_defaults{};                       \
    ::atl::proto::PackTrimmed(msgpack_pk, msgpack_fields(), msgpack_defaults.msgpack_fields()); \
  }                                                                                             \
  void msgpack_unpack(const msgpack::object& msgpack_o) {                                       \
    msgpack::type::make_define_array(__VA_ARGS__).msgpack_unpack(msgpack_o);                    \
  }                                                                                             \
  template <typename MSGPACK_OBJECT>                                                            \
  void msgpack_object(MSGPACK_OBJECT* msgpack_o, msgpack::zone& msgpack_z) const {              \
    msgpack::type::make_define_array(__VA_ARGS__).msgpack_object(msgpack_o, msgpack_z);         \
  }
