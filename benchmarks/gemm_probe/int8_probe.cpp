// The W8A8 GEMM probe: strata's own plans (codegen/lower_gemm_int8.cpp) for one
// linear {quant = "w8a8"} and the same f16 linear, on the device strata picks.
//   int8_probe [M N K [REPS]] [NAME=VALUE ...]
// M rows of x, N output features, K input features (default 4096³, 10 replays).
// NAME=VALUE pairs are gemm_int8.comp defines (WM, WN, FM, FN, KS: the tile and the
// step; CO_FAST, FETCH_EARLY: measuring switches).
// Prints, per plan, the best device time of each kernel over the replays and the
// GEMM's rate (2·M·N·K operations), then a check of the int8 plan against ir/quant.h
// on the host (every element for small problems, 4096 samples otherwise) and a
// second, ragged shape (tails in every dim, a bias) checked in full.
// Build: benchmarks/gemm_probe/int8_probe.sh (after the strata build).
#include "codegen/codegen.h"
#include "codegen/w8a8.h"
#include "ir/builder.h"
#include "ir/quant.h"
#include "ir/types.h"
#include "runtime/device.h"
#include "runtime/executor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using namespace strata;

namespace {

std::vector<float> random_values(size_t n, uint64_t seed, float lo, float hi) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& x : v) {
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    x = lo + (hi - lo) * static_cast<float>(static_cast<double>(z >> 40) / static_cast<double>(1ull << 24));
  }
  return v;
}

struct Problem {
  int64_t m, n, k;
  bool bias;
  std::vector<float> x, w, b;
};

Problem make_problem(int64_t m, int64_t n, int64_t k, bool bias) {
  Problem p{m, n, k, bias, random_values(size_t(m * k), 1, -2.0f, 2.0f),
            random_values(size_t(n * k), 2, -1.0f / std::sqrt(float(k)), 1.0f / std::sqrt(float(k))),
            random_values(size_t(n), 3, -1.0f, 1.0f)};
  return p;
}

Status build(const Problem& p, bool quant, Graph& g, WeightStore& ws) {
  Builder b(g, &ws);
  const ValueId x = b.input("x", {p.m, p.k}, DType::f16);
  STRATA_RETURN_IF_ERROR(ws.add_owned("w", {p.n, p.k}, p.w));
  const ValueId w = b.constant("w", TensorType{{p.n, p.k}, DType::f16, {}});
  ValueId bias = kNoValue;
  if (p.bias) {
    STRATA_RETURN_IF_ERROR(ws.add_owned("b", {p.n}, p.b));
    bias = b.constant("b", TensorType{{p.n}, DType::f32, {}});
  }
  Attrs a{{"dtype", std::string("f16")}};
  if (quant) a.set("quant", std::string("w8a8"));
  const ValueId y = b.op(Op::linear, {x, w, bias}, a);
  if (!b.ok()) return b.status();
  b.output(y);
  return Status::ok();
}

// y from ir/quant.h's codes of the f16-rounded operands, in f64, rounded to f16.
float host_y(const Problem& p, const Int8Rows& xq, const Int8Rows& wq, int64_t r, int64_t c) {
  int32_t acc = 0;
  for (int64_t i = 0; i < p.k; ++i) acc += int32_t(xq.q[size_t(r * p.k + i)]) * int32_t(wq.q[size_t(c * p.k + i)]);
  double v = double(acc) * xq.scale[size_t(r)] * wq.scale[size_t(c)] + (p.bias ? p.b[size_t(c)] : 0.0);
  return half_to_float(float_to_half(static_cast<float>(v)));
}

struct Timed {
  std::map<std::string, double> best_us;  // per kernel file
  std::vector<float> y;
};

Expected<Timed> run(const Problem& p, bool quant, int reps, const codegen::CodegenOptions& options) {
  Graph g;
  WeightStore ws;
  STRATA_RETURN_IF_ERROR(build(p, quant, g, ws));
  STRATA_ASSIGN_OR_RETURN(auto probe, runtime::open_device({}, {}));
  const codegen::Target target = codegen::target_for(probe->info());
  STRATA_ASSIGN_OR_RETURN(runtime::Plan plan, codegen::compile_plan(g, ws, target, options));
  std::vector<std::string> kernel_of;
  for (const auto& d : plan.dispatches) {
    const std::string& name = plan.pipelines[d.pipeline].name;
    kernel_of.push_back(name.substr(0, name.find('[')));
  }
  STRATA_ASSIGN_OR_RETURN(auto device, runtime::open_device({}, plan.requirements));
  runtime::ExecutorOptions eo;
  eo.profile = true;
  STRATA_ASSIGN_OR_RETURN(auto exec, runtime::Executor::create(device, std::move(plan), codegen::weight_source(ws), eo));
  std::vector<float> xr = p.x;
  Timed t;
  t.y.resize(size_t(p.m * p.n));
  std::vector<std::span<const std::byte>> in = {std::as_bytes(std::span(xr))};
  std::vector<std::span<std::byte>> out = {std::as_writable_bytes(std::span(t.y))};
  STRATA_RETURN_IF_ERROR(exec->run(in, out));
  for (int r = 0; r < reps; ++r) {
    STRATA_RETURN_IF_ERROR(exec->replay());
    const auto& us = exec->last_profile().dispatch_us;
    for (size_t i = 0; i < us.size() && i < kernel_of.size(); ++i) {
      auto [it, fresh] = t.best_us.try_emplace(kernel_of[i], us[i]);
      if (!fresh) it->second = std::min(it->second, us[i]);
    }
  }
  return t;
}

int check(const Problem& p, const std::vector<float>& y, bool all) {
  std::vector<float> xr = p.x, wr = p.w;
  for (float& v : xr) v = half_to_float(float_to_half(v));
  for (float& v : wr) v = half_to_float(float_to_half(v));
  const Int8Rows xq = quantize_rows_int8(xr.data(), p.m, p.k), wq = quantize_rows_int8(wr.data(), p.n, p.k);
  const int64_t samples = all ? p.m * p.n : 4096;
  int64_t bad = 0;
  double worst = 0;
  for (int64_t s = 0; s < samples; ++s) {
    const int64_t e = all ? s : (s * 7919 * 104729 + s * 31) % (p.m * p.n);
    const int64_t r = e / p.n, c = e % p.n;
    const double want = host_y(p, xq, wq, r, c), got = y[size_t(e)];
    const double d = std::fabs(got - want);
    worst = std::max(worst, d / (std::fabs(want) + 1e-3));
    if (d > std::fabs(want) / 1024 + 1e-5) ++bad;
  }
  std::printf("  check %s %ldx%ldx%ld%s: %ld of %ld outside f16 rounding, worst rel %.2e: %s\n", all ? "(all)" : "(samples)",
              long(p.m), long(p.n), long(p.k), p.bias ? " + bias" : "", long(bad), long(samples), worst,
              bad ? "WRONG" : "OK");
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> nums;
  codegen::CodegenOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (auto eq = a.find('='); eq != std::string::npos)
      options.kernel_defines["gemm_int8.comp"][a.substr(0, eq)] = a.substr(eq + 1);
    else
      nums.push_back(std::atoll(argv[i]));
  }
  const int64_t m = nums.size() > 0 ? nums[0] : 4096, n = nums.size() > 1 ? nums[1] : 4096,
                k = nums.size() > 2 ? nums[2] : 4096;
  const int reps = nums.size() > 3 ? int(nums[3]) : 10;
  const Problem p = make_problem(m, n, k, false);
  int rc = 0;
  for (bool quant : {true, false}) {
    auto t = run(p, quant, reps, options);
    if (!t) {
      std::printf("%s: %s\n", quant ? "w8a8" : "f16", t.message().c_str());
      rc = 1;
      continue;
    }
    std::printf("%s linear %ldx%ldx%ld, best of %d replays:\n", quant ? "w8a8" : "f16", long(m), long(n), long(k), reps);
    for (const auto& [kernel, us] : t->best_us) {
      const bool gemm = kernel == "gemm_int8.comp" || kernel == "conv_gemm_coop.comp" || kernel == "gemm.comp";
      std::printf("  %-22s %9.1f us%s\n", kernel.c_str(), us,
                  gemm ? fmt::format("  {:.1f} {}", 2.0 * m * n * k / (us * 1e-6) / 1e12, quant ? "TOPS" : "TFLOP/s").c_str()
                       : "");
    }
    if (quant) rc |= check(p, t->y, m * n * k <= (int64_t(1) << 30));
  }
  const Problem ragged = make_problem(333, 520, 200, true);
  auto t = run(ragged, true, 1, options);
  if (!t) {
    std::printf("ragged w8a8: %s\n", t.message().c_str());
    return 1;
  }
  rc |= check(ragged, t->y, true);
  return rc;
}
