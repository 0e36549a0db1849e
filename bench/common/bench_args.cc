#include "bench/common/bench_args.h"

#include <iostream>

namespace atl::bench {

std::string BenchOptions::DefaultResultsDir() { return ATOLL_BENCH_SOURCE_DIR "/bench/results"; }

void AddBenchOptions(CLI::App& app, BenchOptions& options) {
  app.add_flag("--quick", options.quick,
               "Run the small size (under a minute on 2 cores) instead of the full one");
  app.add_option("--out", options.out_dir, "Write the result file NAME.json into this directory")
      ->capture_default_str();
}

std::optional<int> Parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << app.get_name() << ": " << e.what() << "\nRun with --help for usage." << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << app.get_name() << ": " << e.what() << std::endl;
    return 1;
  }
  return std::nullopt;
}

}  // namespace atl::bench
