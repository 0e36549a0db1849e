// atoll_tenant_client: tenants as a process of their own, for the many-tenants test (and by
// hand, to load a cluster): RM_ENDPOINT KEYS_DIR CLIENTS [RUNS [IN_FLIGHT]] runs
// RunTenants (tenant_load.h) and prints its result line last; exit 0 when every run was
// right, 1 otherwise (the first errors on stderr).
#include <cstdio>
#include <cstdlib>

#include "tests/e2e/tenant_load.h"

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    std::fprintf(stderr, "usage: %s RM_ENDPOINT KEYS_DIR CLIENTS [RUNS [IN_FLIGHT]]\n", argv[0]);
    return 2;
  }
  atl::testing::TenantLoadOptions options;
  options.rm_endpoint = argv[1];
  options.keys_dir = argv[2];
  options.clients = std::atoi(argv[3]);
  if (argc > 4) options.runs = std::atoi(argv[4]);
  if (argc > 5) options.in_flight = std::atoi(argv[5]);
  const atl::testing::TenantLoadResult result = atl::testing::RunTenants(options);
  for (const auto& error : result.errors) std::fprintf(stderr, "%s\n", error.c_str());
  std::printf("%s\n", atl::testing::FormatTenantResult(result).c_str());
  std::fflush(stdout);
  const bool all_right =
      result.failed == 0 && result.wrong == 0 && result.ok == options.clients * options.runs;
  return all_right ? 0 : 1;
}
