#include "services/rm/rm_actions.h"

namespace atl::rm {

void RmActions::Append(RmActions more) {
  for (RmAction& action : more.list) list.push_back(std::move(action));
  state_changed = state_changed || more.state_changed;
}

std::vector<std::string> RmActions::Topics() const {
  std::vector<std::string> topics;
  for (const RmAction& action : list) {
    if (const auto* event = std::get_if<PublishAction>(&action)) topics.push_back(event->topic);
  }
  return topics;
}

}  // namespace atl::rm
