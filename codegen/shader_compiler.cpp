// GLSL -> SPIR-V with libshaderc, SPIR-V validation with SPIRV-Tools. See
// shader_compiler.h for the prelude every kernel gets.
#include "codegen/shader_compiler.h"

#include "codegen/kernel_cache.h"
#include "codegen/kernel_sources.h"
#include "codegen/spirv_khr_rewrite.h"

#include <shaderc/shaderc.hpp>
#include <spirv-tools/libspirv.hpp>

#include <atomic>
#include <mutex>
#include <utility>

namespace strata::codegen {
namespace {

constexpr std::string_view kCommon = "common.glsl";
// Put after common.glsl in kernels compiled with the COOPMAT define (the
// tensor-core kernels and their emulation).
constexpr std::string_view kCoopmat = "coopmat.glsl";
// Put after those in kernels compiled with the W8A8_CODES define (the kernels that
// write W8A8 activation codes).
constexpr std::string_view kW8A8Codes = "w8a8_codes.glsl";

// Compiled modules by (file, defines); compile_plan calls come from any thread.
struct Memo {
  std::mutex mutex;
  std::map<std::pair<std::string, Defines>, std::vector<uint32_t>> modules;
};

Memo& memo() {
  static Memo m;
  return m;
}

}  // namespace

std::string kernel_variant_name(std::string_view file, const Defines& defines) {
  std::string out(file);
  if (defines.empty()) return out;
  out += "[";
  bool first = true;
  for (const auto& [name, value] : defines) {
    out += (first ? "" : ",") + name + "=" + value;
    first = false;
  }
  return out + "]";
}

Expected<std::string> kernel_source_with_prelude(std::string_view file, const Defines& defines) {
  const std::string_view body = kernel_source(file);
  if (body.empty()) return error("kernel '{}': no such file in codegen/kernels/", file);
  const std::string_view common = kernel_source(kCommon);
  if (common.empty()) return error("kernel '{}': codegen/kernels/{} is not embedded", file, kCommon);
  std::string src = "#version 450\n#extension GL_GOOGLE_cpp_style_line_directive : enable\n";
  for (const auto& [name, value] : defines) src += "#define " + name + " " + value + "\n";
  src += "#line 1 \"" + std::string(kCommon) + "\"\n";
  src += common;
  if (defines.count("COOPMAT")) {
    const std::string_view coopmat = kernel_source(kCoopmat);
    if (coopmat.empty()) return error("kernel '{}': codegen/kernels/{} is not embedded", file, kCoopmat);
    src += "\n#line 1 \"" + std::string(kCoopmat) + "\"\n";
    src += coopmat;
  }
  if (defines.count("W8A8_CODES")) {
    const std::string_view codes = kernel_source(kW8A8Codes);
    if (codes.empty()) return error("kernel '{}': codegen/kernels/{} is not embedded", file, kW8A8Codes);
    src += "\n#line 1 \"" + std::string(kW8A8Codes) + "\"\n";
    src += codes;
  }
  src += "\n#line 1 \"" + std::string(file) + "\"\n";
  src += body;
  return src;
}

namespace {
std::atomic<uint64_t> g_kernel_requests{0};
}  // namespace

uint64_t kernel_requests() { return g_kernel_requests.load(); }

// The options compile_kernel's shaderc call sets: change the two together.
std::string_view kernel_compile_options() { return "compute, vulkan 1.2, performance"; }

Expected<std::vector<uint32_t>> compile_kernel(std::string_view file, const Defines& defines,
                                               const std::string& kernel_cache_dir) {
  ++g_kernel_requests;
  auto key = std::make_pair(std::string(file), defines);
  {
    std::lock_guard<std::mutex> lock(memo().mutex);
    auto it = memo().modules.find(key);
    if (it != memo().modules.end()) return it->second;
  }
  STRATA_ASSIGN_OR_RETURN(std::string src, kernel_source_with_prelude(file, defines));
  const std::string name(file);
  auto compile = [&]() -> Expected<std::vector<uint32_t>> {
    shaderc::Compiler compiler;
    shaderc::CompileOptions options;
    options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
    options.SetOptimizationLevel(shaderc_optimization_level_performance);
    shaderc::SpvCompilationResult result =
        compiler.CompileGlslToSpv(src, shaderc_compute_shader, name.c_str(), options);
    if (result.GetCompilationStatus() != shaderc_compilation_status_success)
      return error("kernel '{}': {}", kernel_variant_name(file, defines), result.GetErrorMessage());
    return std::vector<uint32_t>(result.cbegin(), result.cend());
  };
  const std::string cache_dir = kernel_cache_dir.empty() ? default_kernel_cache_dir() : kernel_cache_dir;
  Expected<std::vector<uint32_t>> compiled =
      cache_dir.empty() ? compile()
                        : load_or_compile(KernelCache(cache_dir), kernel_cache_key(src, kernel_compile_options()), compile);
  STRATA_ASSIGN_OR_RETURN(std::vector<uint32_t> words, std::move(compiled));
  if (auto it = defines.find("COOPMAT_KHR"); it != defines.end() && it->second == "1") {
    // Fragments other than 16×16: written in GL_NV_cooperative_matrix syntax, run as
    // VK_KHR_cooperative_matrix (spirv_khr_rewrite.h).
    auto khr = rewrite_coopmat_nv_to_khr(words);
    if (!khr) return error("kernel '{}': {}", kernel_variant_name(file, defines), khr.message());
    words = std::move(*khr);
  }
  std::lock_guard<std::mutex> lock(memo().mutex);
  memo().modules.emplace(std::move(key), words);
  return words;
}

Status validate_spirv(const std::vector<uint32_t>& spirv) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_2);
  std::string messages;
  tools.SetMessageConsumer([&](spv_message_level_t, const char*, const spv_position_t& pos, const char* msg) {
    messages += fmt::format("{}word {}: {}", messages.empty() ? "" : "; ", pos.index, msg);
  });
  if (spirv.empty()) return error("SPIR-V validation: empty module");
  if (!tools.Validate(spirv)) return error("SPIR-V validation failed: {}", messages.empty() ? "(no message)" : messages);
  return Status::ok();
}

}  // namespace strata::codegen
