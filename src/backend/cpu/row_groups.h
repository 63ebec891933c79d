// Decode-sized linears take the rows of x four at a time (each weight row's decode is shared by the four),
// then a remainder of 1-3 in one pass: f(std::integral_constant<int, kRows>{}, first_row) for each group,
// so that every kernel is instantiated for a compile-time row count.
#pragma once
#include <cstdint>
#include <type_traits>

namespace vireo::cpu {

template <typename F>
void for_row_groups(int64_t n, F&& f) {
  int64_t r = 0;
  for (; r + 4 <= n; r += 4) f(std::integral_constant<int, 4>{}, r);
  switch (n - r) {
    case 3: f(std::integral_constant<int, 3>{}, r); break;
    case 2: f(std::integral_constant<int, 2>{}, r); break;
    case 1: f(std::integral_constant<int, 1>{}, r); break;
    default: break;
  }
}

}  // namespace vireo::cpu
