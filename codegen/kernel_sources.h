// The GLSL kernel templates of codegen/kernels/, embedded into the library at build
// time (codegen/embed_kernels.cmake), so compiling a plan needs no source tree.
#pragma once

#include <string_view>
#include <vector>

namespace strata::codegen {

// The text of kernels/<file> (e.g. "unary.comp", "common.glsl"); empty if there is
// no such file.
std::string_view kernel_source(std::string_view file);

// Every embedded file name, sorted.
std::vector<std::string_view> kernel_files();

}  // namespace strata::codegen
