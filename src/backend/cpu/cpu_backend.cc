#include "backend/cpu/cpu_backend.h"

#include "core/error.h"

namespace vireo {
// Placeholder until the CPU backend lands (helper C replaces this file).
std::unique_ptr<Backend> make_cpu_backend(const std::string&) { throw Error("CPU backend not built yet"); }
}  // namespace vireo
