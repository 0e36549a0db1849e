// Every message kind atoll sends, defined once. A message on the wire is a ZeroMQ multipart
// message: [routing id, only on ROUTER sockets] [header] [data frames...]. The header is a
// msgpack array [version, kind, request id, body]; bodies are msgpack arrays (hot-path
// messages are arrays, never maps: ~0.3 us against ~2 us to encode and decode). Tensor
// bytes never go inside the header; they travel as frames after it.
//
// The messages are grouped by the service that handles them, one header each; include this
// one header to have them all.
#pragma once

#include "common/proto/executor_messages.h"
#include "common/proto/message_kind.h"
#include "common/proto/rm_messages.h"
#include "common/proto/scheduler_messages.h"
#include "common/proto/store_messages.h"
