#include "tools/inspect_command.h"

#include "runtime/plan_io.h"
#include "tools/args.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace strata {
namespace {

using runtime::Plan;

// The facts both reports show, computed once.
struct Summary {
  struct Kind {
    std::string name;
    size_t dispatches = 0;
    size_t pipelines = 0;
  };
  std::vector<size_t> dispatches_per_pipeline;  // by pipeline index
  std::vector<Kind> kinds;                      // most dispatches first, then by name
  uint64_t buffer_bytes = 0;
  uint64_t weight_bytes = 0;
};

std::string kind_of(const std::string& pipeline_name) { return pipeline_name.substr(0, pipeline_name.find('[')); }

Summary summarize(const Plan& plan) {
  Summary s;
  s.dispatches_per_pipeline.assign(plan.pipelines.size(), 0);
  std::map<std::string, Summary::Kind> kinds;
  for (const runtime::PipelineDesc& p : plan.pipelines) {
    Summary::Kind& k = kinds[kind_of(p.name)];
    k.name = kind_of(p.name);
    k.pipelines += 1;
  }
  for (const runtime::DispatchDesc& d : plan.dispatches) {
    if (d.pipeline >= plan.pipelines.size()) continue;  // validate() rejects such a plan
    s.dispatches_per_pipeline[d.pipeline] += 1;
    kinds[kind_of(plan.pipelines[d.pipeline].name)].dispatches += 1;
  }
  for (auto& [name, k] : kinds) s.kinds.push_back(k);
  std::stable_sort(s.kinds.begin(), s.kinds.end(),
                   [](const Summary::Kind& a, const Summary::Kind& b) { return a.dispatches > b.dispatches; });
  for (const runtime::BufferDesc& b : plan.buffers) s.buffer_bytes += b.size_bytes;
  for (const runtime::WeightUpload& w : plan.weights) s.weight_bytes += w.bytes;
  return s;
}

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }

std::string workgroup(const std::array<uint32_t, 3>& w) {
  return w[0] == 0 ? "?" : fmt::format("{}x{}x{}", w[0], w[1], w[2]);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out;
  for (int64_t d : shape) out += (out.empty() ? "" : ",") + std::to_string(d);
  return "[" + out + "]";
}

std::string buffer_name(const Plan& plan, uint32_t index) {
  return index < plan.buffers.size() ? plan.buffers[index].name : "?";
}

// Rows of cells printed as columns, two spaces apart, indented by two; `right[i]`
// right-aligns column i (numbers).
std::string table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<size_t> width(right.size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(width[i] - row[i].size(), ' ');
      line += "  " + (right[i] ? pad + row[i] : (i + 1 < row.size() ? row[i] + pad : row[i]));
    }
    out += line + "\n";
  }
  return out;
}

std::string io_section(const char* title, const Plan& plan, const std::vector<runtime::TensorIO>& ios) {
  std::string out = fmt::format("{}: {}\n", title, ios.size());
  std::vector<std::vector<std::string>> rows;
  for (const runtime::TensorIO& io : ios)
    rows.push_back({io.name, std::string(runtime::dtype_name(io.dtype)) + shape_text(io.shape),
                    io.layout.empty() ? "-" : io.layout, fmt::format("'{}' @{}", buffer_name(plan, io.buffer), io.offset),
                    fmt::format("{} bytes", io.bytes)});
  return out + table(rows, {false, false, false, false, true});
}

nlohmann::ordered_json io_json(const Plan& plan, const runtime::TensorIO& io) {
  return {{"name", io.name},           {"dtype", runtime::dtype_name(io.dtype)},
          {"shape", io.shape},         {"layout", io.layout},
          {"buffer", buffer_name(plan, io.buffer)}, {"offset", io.offset},
          {"bytes", io.bytes}};
}

int usage_error(std::ostream& err, const std::string& message) {
  err << "strata: inspect: " << message << "\n(run `strata help` for usage)\n";
  return 2;
}

}  // namespace

std::string inspect_text(const Plan& plan, const std::string& source) {
  const Summary s = summarize(plan);
  std::string out = fmt::format("plan '{}': format {}, compiler {}, cache key {}\n", source, plan.format_version,
                                plan.compiler_version.empty() ? "?" : plan.compiler_version,
                                plan.cache_key.empty() ? "-" : plan.cache_key);
  out += "requires: " + runtime::describe(plan.requirements) + "\n";

  out += fmt::format("pipelines: {}\n", plan.pipelines.size());
  // The name last: kernel variant names run long.
  std::vector<std::vector<std::string>> rows = {{"#", "SPIR-V bytes", "workgroup", "push bytes", "dispatches", "name"}};
  for (size_t i = 0; i < plan.pipelines.size(); ++i) {
    const runtime::PipelineDesc& p = plan.pipelines[i];
    rows.push_back({std::to_string(i), std::to_string(p.spirv.size() * 4), workgroup(p.workgroup_size),
                    std::to_string(p.push_constant_bytes), std::to_string(s.dispatches_per_pipeline[i]), p.name});
  }
  out += table(rows, {true, true, false, true, true, false});

  out += fmt::format("buffers: {}\n", plan.buffers.size());
  rows = {};
  for (const runtime::BufferDesc& b : plan.buffers)
    rows.push_back({b.name, runtime::usage_name(b.usage), fmt::format("{} bytes", b.size_bytes),
                    "(" + mib(b.size_bytes) + ")"});
  out += table(rows, {false, false, true, true});

  out += fmt::format("weights: {} entries, {} bytes ({})\n", plan.weights.size(), s.weight_bytes, mib(s.weight_bytes));

  out += fmt::format("dispatches by kind: {}\n", s.kinds.size());
  rows = {};
  for (const Summary::Kind& k : s.kinds)
    rows.push_back({k.name, fmt::format("{} dispatch{}", k.dispatches, k.dispatches == 1 ? "" : "es"),
                    fmt::format("{} pipeline{}", k.pipelines, k.pipelines == 1 ? "" : "s")});
  out += table(rows, {false, true, true});

  out += fmt::format("bands: {}\n", plan.bands.size());
  rows = {};
  for (const runtime::BandDesc& b : plan.bands)
    rows.push_back({b.node, fmt::format("{} frame rows", b.frame_rows), fmt::format("{} rows per band", b.band_rows),
                    fmt::format("{} band{}", b.bands, b.bands == 1 ? "" : "s")});
  out += table(rows, {false, true, true, true});

  out += io_section("inputs", plan, plan.inputs);
  out += io_section("outputs", plan, plan.outputs);
  out += fmt::format("totals: {} dispatches, {} pipelines, {} buffer bytes ({})\n", plan.dispatches.size(),
                     plan.pipelines.size(), s.buffer_bytes, mib(s.buffer_bytes));
  return out;
}

std::string inspect_json(const Plan& plan, const std::string& source) {
  using json = nlohmann::ordered_json;
  const Summary s = summarize(plan);
  const runtime::DeviceRequirements& q = plan.requirements;
  json shapes = json::array();
  for (const runtime::CoopMatShape& c : q.cooperative_matrix_shapes) shapes.push_back(runtime::describe(c));
  json j = {{"file", source},
            {"format_version", plan.format_version},
            {"compiler_version", plan.compiler_version},
            {"cache_key", plan.cache_key},
            {"requirements",
             {{"shader_float16", q.shader_float16},
              {"storage_buffer_16bit_access", q.storage_buffer_16bit_access},
              {"vulkan_memory_model", q.vulkan_memory_model},
              {"cooperative_matrix_nv", q.cooperative_matrix_nv},
              {"cooperative_matrix_flexible", q.cooperative_matrix_flexible},
              {"cooperative_matrix_shapes", shapes},
              {"min_subgroup_size", q.min_subgroup_size},
              {"max_subgroup_size", q.max_subgroup_size},
              {"subgroup_operations", runtime::describe_subgroup_ops(q.subgroup_operations)},
              {"min_storage_buffer_range", q.min_storage_buffer_range},
              {"min_shared_memory_bytes", q.min_shared_memory_bytes}}}};
  json pipelines = json::array();
  for (size_t i = 0; i < plan.pipelines.size(); ++i) {
    const runtime::PipelineDesc& p = plan.pipelines[i];
    json spec = json::array();
    for (const runtime::SpecConstant& c : p.spec_constants) spec.push_back({{"id", c.id}, {"value", c.value}});
    pipelines.push_back({{"name", p.name},
                         {"kind", kind_of(p.name)},
                         {"spirv_bytes", p.spirv.size() * 4},
                         {"entry_point", p.entry_point},
                         {"workgroup_size", p.workgroup_size},
                         {"push_constant_bytes", p.push_constant_bytes},
                         {"binding_count", p.binding_count},
                         {"spec_constants", spec},
                         {"dispatches", s.dispatches_per_pipeline[i]}});
  }
  j["pipelines"] = pipelines;
  json buffers = json::array();
  for (const runtime::BufferDesc& b : plan.buffers)
    buffers.push_back({{"name", b.name}, {"usage", runtime::usage_name(b.usage)}, {"bytes", b.size_bytes}});
  j["buffers"] = buffers;
  j["weights"] = {{"count", plan.weights.size()}, {"bytes", s.weight_bytes}};
  json kinds = json::array();
  for (const Summary::Kind& k : s.kinds)
    kinds.push_back({{"kind", k.name}, {"dispatches", k.dispatches}, {"pipelines", k.pipelines}});
  j["dispatch_kinds"] = kinds;
  json bands = json::array();
  for (const runtime::BandDesc& b : plan.bands)
    bands.push_back(
        {{"node", b.node}, {"frame_rows", b.frame_rows}, {"band_rows", b.band_rows}, {"bands", b.bands}});
  j["bands"] = bands;
  json inputs = json::array(), outputs = json::array();
  for (const runtime::TensorIO& io : plan.inputs) inputs.push_back(io_json(plan, io));
  for (const runtime::TensorIO& io : plan.outputs) outputs.push_back(io_json(plan, io));
  j["inputs"] = inputs;
  j["outputs"] = outputs;
  j["totals"] = {{"dispatches", plan.dispatches.size()},
                 {"pipelines", plan.pipelines.size()},
                 {"buffer_bytes", s.buffer_bytes},
                 {"weight_bytes", s.weight_bytes}};
  // Names from a file may be any bytes: invalid UTF-8 is replaced, never thrown.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

int cmd_inspect(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto a = parse_args(args, {{"format", true, "text (default) or json"}});
  if (!a) return usage_error(err, a.message());
  const std::string format = a->get_or("format", "text");
  if (format != "text" && format != "json") return usage_error(err, "--format must be text or json");
  if (a->positional().size() != 1) return usage_error(err, "give one plan file (written by `strata compile --save-plan`)");
  const std::string& path = a->positional()[0];
  auto plan = runtime::read_plan_file(path);
  if (!plan) {
    err << "strata: error: " << plan.message() << "\n";
    return 1;
  }
  out << (format == "json" ? inspect_json(*plan, path) : inspect_text(*plan, path));
  return 0;
}

}  // namespace strata
