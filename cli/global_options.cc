#include "cli/global_options.h"

#include <iostream>

#include <CLI/CLI.hpp>

#include "common/net/security.h"

namespace atl {

Status SecureContext(zmq::context_t& context, const GlobalOptions& global) {
  ATOLL_ASSIGN_OR_RETURN(net::Credentials credentials,
                         net::FindClientCredentials(KeysDir(global), ""));
  net::SetCredentials(context, std::move(credentials));
  return Status::Ok();
}

void Fail(std::string_view message, int exit_code) {
  std::cerr << "atoll: " << message << std::endl;
  throw CLI::RuntimeError(exit_code);
}

void Fail(const Status& status, int exit_code) { Fail(status.message(), exit_code); }

}  // namespace atl
