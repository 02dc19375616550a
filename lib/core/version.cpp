#include "stoke/version.hpp"

namespace stoke {

const char* version() noexcept {
  return STOKE_VERSION_STRING;
}

}  // namespace stoke
