// The message a user reads when f fails: the UserError's text, or "(no error)" when f succeeds, so
// that a check of the message's words fails (and prints) rather than passes on an empty string.
#pragma once
#include <functional>
#include <string>

#include "lucid/util/error.h"

namespace lucid::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace lucid::testing
