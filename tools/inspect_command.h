// `strata inspect PLAN_FILE [--format text|json]`: what a saved plan file holds
// (runtime/plan_io.h), without a device: its pipelines (SPIR-V size, workgroup,
// push-constant bytes, how many dispatches use each), buffers, the weight table's
// total, the dispatches grouped by kind, the bands, inputs and outputs, and totals.
//
// A dispatch's kind is its pipeline's kernel file: the pipeline name up to the first
// '[' ("conv_gemm.comp[COOP=1,...]" -> "conv_gemm.comp"), as in the profile report.
#pragma once

#include "runtime/plan.h"

#include <ostream>
#include <string>
#include <vector>

namespace strata {

// The text report; `source` names the plan (the file) in its first line.
std::string inspect_text(const runtime::Plan& plan, const std::string& source);

// The same facts as one JSON object (2-space indented, ending in a newline). Keys:
// file, format_version, compiler_version, cache_key, requirements, pipelines,
// buffers, weights {count, bytes}, dispatch_kinds, bands, inputs, outputs, totals
// (docs/PLAN_FORMAT.md lists every field).
std::string inspect_json(const runtime::Plan& plan, const std::string& source);

// The command: exit 0 with the report on `out`; 1 with one line on `err` when the
// file cannot be read or is not a valid plan ("strata: error: plan file 'x': ...");
// 2 on bad usage.
int cmd_inspect(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
