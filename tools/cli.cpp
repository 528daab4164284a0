#include "tools/cli.h"

#include "ir/npy.h"
#include "runtime/device.h"
#include "tools/args.h"
#include "tools/bench_command.h"
#include "tools/cache_command.h"
#include "tools/command_common.h"
#include "tools/compile_command.h"
#include "tools/decode_command.h"
#include "tools/environment.h"
#include "tools/forward_command.h"
#include "tools/generate_command.h"
#include "tools/inspect_command.h"
#include "tools/tokenize_command.h"

#include <cmath>
#include <limits>

namespace strata {
namespace {

const char* kUsage =
    "strata: a dataflow-graph compiler and executor for diffusion decoders\n"
    "\n"
    "usage:\n"
    "  strata generate --model DIR --prompt TEXT --out IMG.png|IMG.npy [--negative-prompt TEXT] [--guidance-scale S]\n"
    "                [--size WxH] [--steps N] [--seed K | --noise Z.npy] [--out-latent Z.npy]\n"
    "      (prompt to image with a diffusers Z-Image pipeline directory; defaults as diffusers': 1024x1024,\n"
    "       50 steps, guidance 5; --seed K draws torch's noise for manual_seed(K))\n"
    "  strata generate --transformer DIR --vae DIR --caption-features C.npy [--negative-features N.npy --cfg S]\n"
    "                --size WxH --steps N [--seed K] --out IMG.png [--out-latent Z.npy]   (from caption features)\n"
    "  strata tokenize --model DIR [--chat] [--max-length N] TEXT   (the token ids as a JSON list)\n"
    "  strata decode --vae DIR --latent Z.npy --out OUT.png|OUT.npy [--backend vulkan|cpu] [--device N]\n"
    "                [--precision f16|f32] [--dump-graph PASS|all] [--check-range]\n"
    "                [--binding-limit BYTES] [--memory-budget BYTES] [--explain-bands]\n"
    "  strata decode --vae DIR --latent VIDEO.npy --out OUT.npy|OUT.mp4|DIR/ [--fps F] [--frames whole] [--tile-batch N] ...\n"
    "                (a video VAE)\n"
    "  strata decode --demo [--out demo.png] [--backend vulkan|cpu]\n"
    "  strata bench (--vae DIR | --arch NAME) --size N [--reps R] [--warmup W] [--out IMG.npy] [--device N]\n"
    "  strata bench --arch wan22|hunyuan|minimax --frames F --size HxW [--reps R] [--warmup W] [--whole] [--tile-batch N]   (a video VAE)\n"
    "  strata bench --arch zimage --size N [--caption-length L] [--layers N] [--reps R] [--warmup W] [--profile] [--steps N]\n"
    "      (the Z-Image transformer, seeded weights: one forward, per prompt and per step)\n"
    "  strata compile (--vae DIR | --arch NAME) --latent-shape CxHxW [--device N] [--precision f16|f32]\n"
    "                [--binding-limit BYTES] [--explain-bands] [--explain-kernels] [--backend cpu]\n"
    "                [--save-plan FILE]\n"
    "  strata graph (--vae DIR | --arch NAME) --latent-shape CxHxW [--stage PASS] [--format text|dot] [--out FILE]\n"
    "  strata compile --transformer DIR --latent-shape 16x1xHxW --caption-length L --explain-hoist\n"
    "  strata forward --transformer DIR --latent L.npy --caption-features C.npy --t T --out OUT.npy\n"
    "                [--dump-intermediates DIR] [--backend vulkan|cpu] [--precision f16|f32]   (Z-Image)\n"
    "  strata compare A.npy B.npy [--max-abs X] [--min-psnr DB]\n"
    "  strata inspect PLAN_FILE [--format text|json]\n"
    "  strata devices [--device N]\n"
    "  strata help\n"
    "\n"
    "models: --vae reads a diffusers vae/ directory (AutoencoderKL, AutoencoderKLQwenImage, or the\n"
    "AutoencoderKLWan video VAE of Wan 2.2, decoded frame by frame: latent [48, T, h, w] -> 1 + 4(T-1) frames;\n"
    "or AutoencoderKLHunyuanVideo, decoded as diffusers does, in windows of 5 latent frames cross-faded, or in\n"
    "one decoder call with --frames whole: latent [16, T, h, w] -> 1 + 4(T-1) frames of 8h x 8w;\n"
    "or AutoencoderKLMiniMaxH3, a ViT decoder run as diffusers does, in 256 px tiles and clips of 7 latent\n"
    "frames: latent [24, 5n + 2, h, w] -> 17n + 5 frames of 16h x 16w);\n"
    "--arch flux|qwen (released architectures) or flux-small|qwen-small (the shared test\n"
    "cases' sizes) builds one with weights generated from --seed (default 0).\n"
    "\n"
    "compile runs the passes and codegen for the device without running anything, and prints\n"
    "the passes' reports and the plan (dispatches, pipelines, buffers); --backend cpu stops after\n"
    "the passes. --binding-limit caps every storage-buffer binding (default: the device's\n"
    "maxStorageBufferRange); large conv and norm nodes then run in bands of rows, and\n"
    "--explain-bands prints them; --explain-kernels prints each node's kernel config (file,\n"
    "variant, tile, workgroup, push constants, dispatch grids and windows). Byte sizes are integers with an optional B, KiB, MiB, GiB or\n"
    "TiB suffix (64KiB, 8GiB); fractions are rejected. --save-plan writes the compiled plan to\n"
    "FILE (docs/PLAN_FORMAT.md); inspect prints what a plan file holds: pipelines, buffers,\n"
    "weights, dispatches by kind, bands, inputs and outputs.\n"
    "\n"
    "non-finite inputs: decode, generate and forward refuse a latent, caption features or noise\n"
    "holding NaN or inf, naming the first; --allow-nonfinite lets them through.\n"
    "\n"
    "plan cache: decode, bench and compile keep compiled plans, prepared weights and the\n"
    "driver's pipeline cache in --cache-dir (default $XDG_CACHE_HOME/strata, else\n"
    "~/.cache/strata); a warm start skips the passes, kernel compilation and weight\n"
    "repacking. compile fills it ahead of time; --no-cache bypasses it; runs with --profile,\n"
    "--dump-graph, --explain-bands, --check-range or --stop-after compile afresh.\n"
    "kernel cache: SPIR-V compiled by any earlier run, in DIR/kernels; a compile afresh\n"
    "still reads it, --no-cache bypasses it too.\n"
    "  strata cache list|clear [--cache-dir DIR]\n";

// Peak signal-to-noise ratio for a peak-to-peak range of 2 (the [-1, 1] image range).
double psnr_range2(const Tensor& a, const Tensor& b) {
  double se = 0.0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    double d = double(a.data[i]) - double(b.data[i]);
    se += d * d;
  }
  double mse = se / static_cast<double>(a.data.size());
  return mse == 0.0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(4.0 / mse);
}

int cmd_compare(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto a = parse_args(args, {{"max-abs", true, "fail (exit 1) if max |a - b| exceeds this"},
                             {"min-psnr", true, "fail (exit 1) if PSNR (peak-to-peak 2) is below this, in dB"}});
  if (!a) return usage_error(err, "compare: " + a.message());
  if (a->positional().size() != 2) return usage_error(err, "compare needs two .npy files");
  auto x = read_npy(a->positional()[0]);
  if (!x) return fail(err, x.status());
  auto y = read_npy(a->positional()[1]);
  if (!y) return fail(err, y.status());
  if (x->shape != y->shape)
    return fail(err, error("shapes differ: {} vs {}", shape_str(x->shape), shape_str(y->shape)));
  size_t nans = 0;
  for (float v : x->data) nans += std::isnan(v) ? 1 : 0;
  double diff = max_abs_diff(*x, *y), psnr = psnr_range2(*x, *y);
  out << fmt::format("{} elements, max |a-b| = {:.3g}, PSNR = {:.2f} dB, NaN in a: {}\n", x->data.size(), diff, psnr,
                     nans);
  bool ok = nans == 0;
  for (const char* opt : {"max-abs", "min-psnr"}) {
    auto v = a->get(opt);
    if (!v) continue;
    auto bound = parse_number(opt, *v);
    if (!bound) return usage_error(err, "compare: " + bound.message());
    ok = ok && (std::string(opt) == "max-abs" ? diff <= *bound : psnr >= *bound);
  }
  return ok ? 0 : 1;
}

int cmd_devices(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto a = parse_args(args, {{"device", true, "mark device N as the one to use"}});
  if (!a) return usage_error(err, "devices: " + a.message());
  auto env = read_environment();
  if (!env) return fail(err, env.status());
  auto devices = runtime::list_devices();
  if (!devices) return fail(err, devices.status());
  runtime::DeviceOptions options{.index = env->device};
  if (auto d = a->get("device")) {
    auto index = parse_integer("device", *d);
    if (!index) return usage_error(err, "devices: " + index.message());
    options.index = static_cast<int>(*index);
  }
  auto selected = runtime::select_device(*devices, options);
  out << runtime::describe_devices(*devices, selected ? std::optional<uint32_t>(*selected) : std::nullopt);
  if (!selected) return fail(err, selected.status());
  return 0;
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << kUsage;
    return 2;
  }
  const std::string& cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    out << kUsage;
    return 0;
  }
  if (Status s = arm_fault_from_environment(); !s.is_ok()) return fail(err, s);
  if (cmd == "decode") return cmd_decode(rest, out, err);
  if (cmd == "forward") return cmd_forward(rest, out, err);
  if (cmd == "generate") return cmd_generate(rest, out, err);
  if (cmd == "graph") return cmd_graph(rest, out, err);
  if (cmd == "compare") return cmd_compare(rest, out, err);
  if (cmd == "bench") return cmd_bench(rest, out, err);
  if (cmd == "compile") return cmd_compile(rest, out, err);
  if (cmd == "devices") return cmd_devices(rest, out, err);
  if (cmd == "inspect") return cmd_inspect(rest, out, err);
  if (cmd == "tokenize") return cmd_tokenize(rest, out, err);
  if (cmd == "cache") return cmd_cache(rest, out, err);
  return usage_error(err, fmt::format("unknown command '{}'", cmd));
}

}  // namespace strata
