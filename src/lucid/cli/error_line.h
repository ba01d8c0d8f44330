// The one line a failed command prints for an exception that is not a UserError: what a user can
// act on, without a library's tags, operation names or source locations.
#pragma once
#include <exception>
#include <string>

namespace lucid::cli {

// std::filesystem errors: "PATH: <reason> (<operation>)"; LibTorch's allocation failures ("[enforce
// fail at alloc_cpu.cpp:..] ... DefaultCPUAllocator: not enough memory: you tried to allocate N
// bytes"): "out of memory: an allocation of N bytes failed"; std::length_error (a container asked
// for more than it can hold, `vector::_M_default_append`): out of memory; others their message
// without a JSON library tag.
std::string error_line(const std::exception& e);

}  // namespace lucid::cli
