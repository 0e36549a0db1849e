// The message structs of the kind table (message_kinds.def), for code that must handle
// every kind alike: decoding a body whose kind is only known at run time (fuzzing, tools),
// or making one of each (samples, seed corpora).
//
// Example:
//   VisitMessageType(header.kind(), [&]<typename T>() { auto body = header.As<T>(); });
#pragma once

#include <utility>

#include "common/proto/protocol.h"

namespace atl::proto {

// Every row names a struct whose kKind is its own kind.
#define ATOLL_MESSAGE_KIND(name, number) \
  static_assert(name::kKind == Kind::k##name && number == static_cast<int>(name::kKind));
#include "common/proto/message_kinds.def"
#undef ATOLL_MESSAGE_KIND

// Calls visit.template operator()<T>() with T the message struct of `kind`. Returns false,
// calling nothing, when `kind` is not in the table.
template <typename Visitor>
bool VisitMessageType(Kind kind, Visitor&& visit) {
  switch (kind) {
#define ATOLL_MESSAGE_KIND(name, number)                      \
  case Kind::k##name:                                         \
    std::forward<Visitor>(visit).template operator()<name>(); \
    return true;
#include "common/proto/message_kinds.def"
#undef ATOLL_MESSAGE_KIND
  }
  return false;
}

// Calls visit.template operator()<T>() for every message struct T, in table order.
template <typename Visitor>
void ForEachMessageType(Visitor&& visit) {
#define ATOLL_MESSAGE_KIND(name, number) visit.template operator()<name>();
#include "common/proto/message_kinds.def"
#undef ATOLL_MESSAGE_KIND
}

}  // namespace atl::proto
