#include "bench/common/bench_args.h"

#include <cstdio>

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

int RunBenchmark(int argc, char** argv, const std::string& name, const std::string& description,
                 const std::function<Status(const BenchOptions&, BenchResult&)>& measure,
                 const std::function<void(CLI::App&)>& add_options) {
  CLI::App app{name + ": " + description};
  BenchOptions options;
  AddBenchOptions(app, options);
  if (add_options) add_options(app);
  if (auto exit_code = Parse(app, argc, argv)) return *exit_code;
  BenchResult result(name, options.quick);
  Status status = measure(options, result);
  if (status.ok()) status = result.Write(options.out_dir);
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace atl::bench
