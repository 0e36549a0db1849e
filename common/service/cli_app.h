// CLI11's App, declared only: the headers that take one (to add their options to a command
// line) leave CLI11 itself to the .cc files that build command lines. CLI11 2.1 is header
// only and compiles its validators into every file that includes it, about 8 s a file.
#pragma once

namespace CLI {
class App;
}  // namespace CLI
