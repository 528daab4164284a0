#include "codegen/kernel_config.h"

#include "ir/ops.h"

#include <fmt/format.h>
#include <shaderc/shaderc.hpp>

#include <cstring>
#include <map>
#include <regex>
#include <set>

namespace strata::codegen {
namespace {

// The defines that size a kernel's work per workgroup (its tile), by name: output
// channels / pixels / reduction per step (BM BN BK, TM TN per invocation), the
// tensor-core kernels' subgroups and fragments (WP WC FP FC, STAGES), attention's
// query / key blocks (BR BC, DC), the norm kernels' workgroup and chunk (WG, CHUNK).
const std::set<std::string> kTileDefines = {"BM", "BN", "BK", "TM", "TN", "WP", "WC", "FP", "FC",
                                            "STAGES", "BR", "BC", "DC", "WG", "CHUNK", "CT"};

// The preprocessor has removed comments already; this keeps the scan below safe if a
// shaderc version leaves them. (By hand: std::regex recurses per character.)
std::string strip_comments(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src.compare(i, 2, "//") == 0) {
      i = src.find('\n', i);
      if (i == std::string::npos) break;
      out += '\n';
    } else if (src.compare(i, 2, "/*") == 0) {
      i = src.find("*/", i + 2);
      if (i == std::string::npos) break;
      ++i;
      out += ' ';
    } else {
      out += src[i];
    }
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

// Sums "2 + 1 + 0" (a binding index after the preprocessor substituted its defines).
std::optional<uint32_t> eval_sum(const std::string& expr) {
  uint32_t sum = 0;
  bool any = false;
  std::string term;
  for (char c : expr + "+") {
    if (c == '+') {
      if (term.find_first_not_of(" \t") == std::string::npos) return std::nullopt;
      try {
        size_t used = 0;
        sum += static_cast<uint32_t>(std::stoul(term, &used));
        if (term.find_first_not_of(" \t", used) != std::string::npos) return std::nullopt;
      } catch (...) {
        return std::nullopt;
      }
      term.clear();
      any = true;
    } else {
      term += c;
    }
  }
  return any ? std::optional(sum) : std::nullopt;
}

std::string dims(const std::array<uint32_t, 3>& d) { return fmt::format("{}x{}x{}", d[0], d[1], d[2]); }

std::string value_of(const PushField& f, const std::vector<uint8_t>& push) {
  if (f.offset + 4 > push.size()) return "?";
  uint32_t bits;
  std::memcpy(&bits, push.data() + f.offset, 4);
  if (f.type == "int") return std::to_string(static_cast<int32_t>(bits));
  if (f.type == "float") {
    float v;
    std::memcpy(&v, &bits, 4);
    return fmt::format("{}", v);
  }
  return std::to_string(bits);
}

}  // namespace

Expected<std::pair<std::string, Defines>> parse_kernel_variant_name(const std::string& name) {
  const size_t open = name.find('[');
  if (open == std::string::npos) return std::pair(name, Defines{});
  if (name.back() != ']') return error("kernel variant '{}' does not end with ']'", name);
  Defines defines;
  const std::string list = name.substr(open + 1, name.size() - open - 2);
  size_t at = 0;
  while (at <= list.size() && !list.empty()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return error("kernel variant '{}': define '{}' has no '='", name, item);
    defines[item.substr(0, eq)] = item.substr(eq + 1);
    at = comma + 1;
  }
  return std::pair(name.substr(0, open), std::move(defines));
}

Expected<KernelInterface> kernel_interface(std::string_view file, const Defines& defines) {
  STRATA_ASSIGN_OR_RETURN(std::string src, kernel_source_with_prelude(file, defines));
  shaderc::Compiler compiler;
  shaderc::CompileOptions options;
  options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
  const std::string name(file);
  const shaderc::PreprocessedSourceCompilationResult pre =
      compiler.PreprocessGlsl(src, shaderc_compute_shader, name.c_str(), options);
  if (pre.GetCompilationStatus() != shaderc_compilation_status_success)
    return error("kernel '{}': {}", kernel_variant_name(file, defines), pre.GetErrorMessage());
  // Without comments and the directives left (#version, #extension, #line).
  std::string text;
  for (const std::string& line : split_lines(strip_comments(std::string(pre.cbegin(), pre.cend())))) {
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] != '#') text += line + "\n";
  }

  KernelInterface out;
  // layout(push_constant) uniform Push { uint a, b; float s; uint shape[4]; } pc;
  if (const size_t at = text.find("push_constant"); at != std::string::npos) {
    const size_t open = text.find('{', at), close = text.find('}', open);
    if (open == std::string::npos || close == std::string::npos)
      return error("kernel '{}': unterminated push-constant block", kernel_variant_name(file, defines));
    static const std::regex decl(R"(^\s*(uint|int|float)\s+([\s\S]+)$)");
    static const std::regex declarator(R"(^\s*([A-Za-z_]\w*)\s*(?:\[\s*(\d+)\s*\])?\s*$)");
    const std::string body = text.substr(open + 1, close - open - 1);
    size_t from = 0;
    for (size_t semi; (semi = body.find(';', from)) != std::string::npos; from = semi + 1) {
      const std::string stmt = body.substr(from, semi - from);
      std::smatch m;
      if (!std::regex_match(stmt, m, decl))
        return error("kernel '{}': push-constant member '{}' is not uint, int or float",
                     kernel_variant_name(file, defines), stmt);
      const std::string type = m[1];
      const std::string names = m[2];
      size_t nfrom = 0;
      for (;;) {
        const size_t comma = std::min(names.find(',', nfrom), names.size());
        std::smatch d;
        const std::string one = names.substr(nfrom, comma - nfrom);
        if (!std::regex_match(one, d, declarator))
          return error("kernel '{}': cannot read push-constant declarator '{}'", kernel_variant_name(file, defines),
                       one);
        const uint32_t count = d[2].matched ? static_cast<uint32_t>(std::stoul(d[2])) : 0;
        for (uint32_t i = 0; i < std::max<uint32_t>(count, 1); ++i)
          out.push.push_back({d[2].matched ? fmt::format("{}[{}]", d[1].str(), i) : d[1].str(), type,
                              static_cast<uint32_t>(out.push.size() * 4)});
        if (comma >= names.size()) break;
        nfrom = comma + 1;
      }
    }
  }
  // layout(std430, binding = 2 + 1) readonly buffer YBuf { Y_T y[]; };
  static const std::regex binding(R"(binding\s*=\s*([^,]+))");
  static const std::regex member(R"((\w+)\s*\[\s*\]\s*;\s*$)");
  static const std::regex buffer_word(R"(\bbuffer\b)");
  std::map<uint32_t, std::string> by_index;
  for (size_t at = text.find("layout"); at != std::string::npos; at = text.find("layout", at + 6)) {
    const size_t open = text.find('(', at), close = text.find(')', at);
    if (open == std::string::npos || close == std::string::npos || open > close) continue;
    const std::string qualifiers = text.substr(open + 1, close - open - 1);
    std::smatch b;
    if (!std::regex_search(qualifiers, b, binding)) continue;
    const size_t brace = text.find('{', close), semi = text.find(';', close);
    if (brace == std::string::npos || (semi != std::string::npos && semi < brace)) continue;
    if (!std::regex_search(text.substr(close, brace - close), buffer_word)) continue;
    const size_t end = text.find('}', brace);
    if (end == std::string::npos) continue;
    std::smatch m;
    const std::string block = text.substr(brace + 1, end - brace - 1);
    if (!std::regex_search(block, m, member)) continue;
    const std::optional<uint32_t> index = eval_sum(b[1]);
    if (!index) return error("kernel '{}': binding '{}' is not a sum of numbers", kernel_variant_name(file, defines),
                             b[1].str());
    by_index[*index] = m[1];
  }
  for (const auto& [index, n] : by_index) {
    if (index != out.bindings.size())
      return error("kernel '{}': no storage buffer at binding {}", kernel_variant_name(file, defines),
                   out.bindings.size());
    out.bindings.push_back(n);
  }
  return out;
}

Expected<std::vector<KernelConfig>> kernel_configs(const Graph& graph, const runtime::Plan& plan) {
  std::map<std::string, const Node*> nodes;
  for (const Node& n : graph.nodes()) nodes.emplace(n.name, &n);
  std::vector<KernelConfig> out;
  std::map<std::pair<std::string, uint32_t>, size_t> index;  // (node, pipeline) -> out
  std::map<uint32_t, KernelInterface> interfaces;
  for (const runtime::DispatchDesc& d : plan.dispatches) {
    if (d.pipeline >= plan.pipelines.size()) return error("dispatch '{}': no pipeline {}", d.label, d.pipeline);
    // "node" or "node:step"; a node name may itself hold ':'.
    std::string node = d.label, step;
    if (!nodes.count(node))
      if (const size_t colon = d.label.rfind(':'); colon != std::string::npos) {
        node = d.label.substr(0, colon);
        step = d.label.substr(colon + 1);
      }
    auto [it, fresh] = index.try_emplace({node, d.pipeline}, out.size());
    if (fresh) {
      const runtime::PipelineDesc& p = plan.pipelines[d.pipeline];
      STRATA_ASSIGN_OR_RETURN(auto variant, parse_kernel_variant_name(p.name));
      if (!interfaces.count(d.pipeline)) {
        STRATA_ASSIGN_OR_RETURN(KernelInterface iface, kernel_interface(variant.first, variant.second));
        interfaces.emplace(d.pipeline, std::move(iface));
      }
      KernelConfig c;
      c.node = node;
      if (auto n = nodes.find(node); n != nodes.end()) c.op = std::string(op_name(n->second->op));
      c.file = variant.first;
      c.defines = variant.second;
      for (const auto& [k, v] : c.defines)
        if (kTileDefines.count(k)) c.tile.push_back(k + "=" + v);
      c.workgroup_size = p.workgroup_size;
      c.push_constant_bytes = p.push_constant_bytes;
      c.interface = interfaces.at(d.pipeline);
      out.push_back(std::move(c));
    }
    out[it->second].dispatches.push_back({step, d.grid, d.bindings, d.push_constants});
  }
  return out;
}

std::string to_string(const KernelConfig& c) {
  std::string s = c.op.empty() ? fmt::format("'{}'\n", c.node) : fmt::format("node '{}' ({})\n", c.node, c.op);
  s += "  kernel " + c.file + "\n  variant";
  for (const auto& [k, v] : c.defines) s += " " + k + "=" + v;
  s += "\n  tile";
  for (const std::string& t : c.tile) s += " " + t;
  if (c.tile.empty()) s += " -";
  s += fmt::format("\n  workgroup {}\n", dims(c.workgroup_size));
  const auto& fields = c.interface.push;
  s += fmt::format("  push {} bytes", c.push_constant_bytes);
  if (fields.size() * 4 != c.push_constant_bytes)
    s += fmt::format(" (the kernel declares {})", fields.size() * 4);
  s += "\n";
  const std::vector<uint8_t> none;
  const std::vector<uint8_t>& first = c.dispatches.empty() ? none : c.dispatches.front().push;
  for (const PushField& f : fields) s += fmt::format("    @{} {} {} = {}\n", f.offset, f.type, f.name, value_of(f, first));
  for (const KernelDispatch& d : c.dispatches) {
    s += fmt::format("  dispatch{} grid {}\n", d.step.empty() ? "" : " " + d.step, dims(d.grid));
    for (size_t i = 0; i < d.bindings.size(); ++i) {
      const runtime::BindingDesc& b = d.bindings[i];
      s += fmt::format("    {} {}: buffer {} @{} +{}\n", i < c.interface.bindings.size() ? c.interface.bindings[i] : "?",
                       runtime::access_name(b.access), b.buffer, b.offset, b.range);
    }
    // Fields whose value differs from the first dispatch's (bands, chunks).
    std::string changed;
    for (const PushField& f : fields)
      if (&d != &c.dispatches.front() && value_of(f, d.push) != value_of(f, first))
        changed += " " + f.name + "=" + value_of(f, d.push);
    if (!changed.empty()) s += "    push" + changed + "\n";
  }
  return s;
}

std::string explain_kernels(const std::vector<KernelConfig>& configs) {
  std::string s;
  for (const KernelConfig& c : configs) s += to_string(c);
  return s;
}

}  // namespace strata::codegen
