// ATOLL_MSGPACK_ENUM(Enum, count): as msgpack's MSGPACK_ADD_ENUM (an enum travels as its
// underlying integer), except that decoding refuses a number that is not one of the enum's
// values 0..count-1 (msgpack::type_error, which Header::As turns into InvalidArgument).
// Code past the decoder may switch over the enum or index tables by it; a DType of 7 from
// the wire would make a tensor of 0-byte elements whatever its shape. Global namespace only.
#pragma once

#include <cstddef>
#include <type_traits>

#include <msgpack.hpp>

#define ATOLL_MSGPACK_ENUM(Enum, count)                                                      \
  namespace msgpack {                                                                        \
  MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {                                    \
    namespace adaptor {                                                                      \
    template <>                                                                              \
    struct convert<Enum> {                                                                   \
      const msgpack::object& operator()(const msgpack::object& o, Enum& v) const {           \
        std::underlying_type_t<Enum> number;                                                 \
        msgpack::operator>>(o, number);                                                      \
        if (static_cast<size_t>(number) >= static_cast<size_t>(count)) {                     \
          throw msgpack::type_error();                                                       \
        }                                                                                    \
        v = static_cast<Enum>(number);                                                       \
        return o;                                                                            \
      }                                                                                      \
    };                                                                                       \
    template <>                                                                              \
    struct object<Enum> {                                                                    \
      void operator()(msgpack::object& o, const Enum& v) const {                             \
        msgpack::operator<<(o, static_cast<std::underlying_type_t<Enum>>(v));                \
      }                                                                                      \
    };                                                                                       \
    template <>                                                                              \
    struct object_with_zone<Enum> {                                                          \
      void operator()(msgpack::object::with_zone& o, const Enum& v) const {                  \
        msgpack::operator<<(o, static_cast<std::underlying_type_t<Enum>>(v));                \
      }                                                                                      \
    };                                                                                       \
    template <>                                                                              \
    struct pack<Enum> {                                                                      \
      template <typename Stream>                                                             \
      msgpack::packer<Stream>& operator()(msgpack::packer<Stream>& o, const Enum& v) const { \
        return msgpack::operator<<(o, static_cast<std::underlying_type_t<Enum>>(v));         \
      }                                                                                      \
    };                                                                                       \
    }                                                                                        \
  }                                                                                          \
  }
