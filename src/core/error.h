// The one exception type of Vireo. Messages are one line and name the file or field at fault.
#pragma once
#include <stdexcept>
#include <string>

namespace vireo {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace vireo
