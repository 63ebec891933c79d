#include "core/human_int.h"

#include <cctype>
#include <regex>

#include "core/error.h"

namespace vireo {

int64_t parse_human_int(const std::string& value) {
  static const std::regex re(R"(\s*(\d+(?:\.\d+)?)([kmgtKMGT]?)\s*)");
  std::smatch m;
  if (!std::regex_match(value, m, re)) throw Error("expected an integer such as 4096, 32k or 32K, got '" + value + "'");
  const std::string number = m[1], suffix = m[2];
  double mult = 1;
  switch (suffix.empty() ? ' ' : suffix[0]) {
    case 'k': mult = 1e3; break;
    case 'm': mult = 1e6; break;
    case 'g': mult = 1e9; break;
    case 't': mult = 1e12; break;
    case 'K': mult = 1024.0; break;
    case 'M': mult = 1024.0 * 1024; break;
    case 'G': mult = 1024.0 * 1024 * 1024; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
    default: break;
  }
  const bool binary = !suffix.empty() && std::isupper(static_cast<unsigned char>(suffix[0]));
  if (number.find('.') != std::string::npos && (suffix.empty() || binary))
    throw Error("decimals need a decimal suffix (k, m, g, t), got '" + value + "'");
  const double v = std::stod(number) * mult;
  if (v > 2147483647.0) throw Error("'" + value + "' is too large");
  return static_cast<int64_t>(v);
}

}  // namespace vireo
