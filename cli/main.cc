// `atoll`: the command-line tool. Starts and stops a local cluster, shows its status,
// watches its event stream, submits jobs. Exit status: 0 on success, 1 on failure (with a
// message starting with "atoll: " on stderr); a command may document other codes.
#include <iostream>

#include <CLI/CLI.hpp>

#include "atoll_version.h"
#include "cli/commands.h"
#include "cli/global_options.h"
#include "cli/trace.h"
#include "launcher/cluster_info.h"
#if __has_include("cli/submit.h")
#include "cli/submit.h"
#define ATOLL_HAVE_SUBMIT 1
#endif

int main(int argc, char** argv) {
  CLI::App app{"atoll: a Pathways-style runtime for islands of accelerators"};
  app.set_version_flag("--version", std::string("atoll ") + ATOLL_VERSION,
                       "Print atoll's version (with the commit it was built from) and exit");
  app.require_subcommand(1);
  // Options of `atoll` itself may also follow the subcommand: `atoll status --state-dir D`.
  app.fallthrough();

  atl::GlobalOptions global;
  global.state_dir = atl::DefaultStateDir();
  app.add_option("--state-dir", global.state_dir,
                 "Where `atoll up` and `atoll start` record what they start: cluster.toml, "
                 "host-<name>.toml, logs/ "
                 "(default: $ATOLL_HOME, else $HOME/.atoll, else /tmp/atoll-<uid>)")
      ->capture_default_str();
  app.add_option("--rm", global.rm_endpoint,
                 "Talk to the RM at this endpoint instead of the one recorded in the state dir")
      ->envname("ATOLL_RM");
  app.add_option("--events", global.events_endpoint,
                 "Watch the event bus at this endpoint instead of the recorded one")
      ->envname("ATOLL_EVENTS");
  app.add_option("--keys", global.keys_dir,
                 "The CURVE keys directory to connect with, or \"plain\" (default: "
                 "<state dir>/keys when it exists, else plain text)")
      ->envname("ATOLL_KEYS");

  atl::AddUpCommand(app, global);
  atl::AddStartCommand(app, global);
  atl::AddSuperviseCommand(app, global);
  atl::AddStopCommands(app, global);
  atl::AddStatusCommand(app, global);
  atl::AddWatchCommand(app, global);
  atl::AddTraceCommand(app, global);
  atl::AddTopCommand(app, global);
  atl::AddDashboardCommand(app, global);
  atl::AddExampleCommand(app, global);
  atl::AddKeygenCommand(app, global);
  atl::AddProbeCommand(app, global);
  atl::AddCheckpointCommand(app, global);
  atl::AddOnnxCommand(app, global);
#ifdef ATOLL_HAVE_SUBMIT
  atl::AddSubmitCommand(app, global);
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // the command has printed its message
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);  // prints the version, exit status 0
  } catch (const CLI::ParseError& e) {
    std::cerr << "atoll: " << e.what() << "\nRun `atoll --help` for usage." << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "atoll: internal error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
