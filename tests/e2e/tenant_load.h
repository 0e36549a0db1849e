// Many tenants at once: `clients` clients connect together (one thread each), each creates a
// one-device slice, registers x -> x * 2 + 1 on it, and runs a program of three chained calls
// of it `runs` times with `in_flight` runs outstanding, checking every result against its
// closed form. Used by the many-tenants test in one process and by atoll_tenant_client, its
// clients as separate processes.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace atl::testing {

struct TenantLoadOptions {
  std::string rm_endpoint;
  std::string keys_dir;  // ClientOptions::keys_dir: a keys directory, or "plain"
  int clients = 1;
  int runs = 20;
  int in_flight = 4;
  std::chrono::milliseconds timeout{60000};  // each request's and each run's bound
};

struct TenantLoadResult {
  int connected = 0;                // clients that connected, made their slice and registered
  int ok = 0;                       // runs with the right result
  int failed = 0;                   // runs (or clients' setups) that failed
  int wrong = 0;                    // runs with a wrong result
  double seconds = 0;               // from the start of the connections to the last result
  std::vector<std::string> errors;  // the first few failures, for the test's message
};

TenantLoadResult RunTenants(const TenantLoadOptions& options);

// "connected N ok N failed N wrong N seconds S" and back: a client process's last line.
std::string FormatTenantResult(const TenantLoadResult& result);
bool ParseTenantResult(const std::string& line, TenantLoadResult* result);

}  // namespace atl::testing
