// Python str methods on UTF-8 strings (by code point; case mapping covers ASCII, Latin-1,
// Greek and Cyrillic, which is what chat templates touch in practice).
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace vireo::tmpl {

std::string py_upper(const std::string& s);
std::string py_lower(const std::string& s);
std::string py_title(const std::string& s);       // str.title()
std::string py_capitalize(const std::string& s);  // str.capitalize()
// strip/lstrip/rstrip; chars == nullopt strips whitespace.
std::string py_strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right);
// split/rsplit; sep == nullopt splits on runs of whitespace. maxsplit < 0: no limit.
std::vector<std::string> py_split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> py_rsplit(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> py_splitlines(const std::string& s);
std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count);
int64_t py_find(const std::string& s, const std::string& sub, bool reverse);  // code point index or -1
int64_t py_count(const std::string& s, const std::string& sub);
bool py_is(const std::string& s, const char* what);  // isdigit/isalpha/isalnum/isspace/isupper/islower

}  // namespace vireo::tmpl
