// strata._strata.ZImage: a diffusers ZImagePipeline directory run by zimage_generate
// (models/zimage_prompt_pipeline.h), the program `strata generate --model` runs, with
// the noise of a seed drawn as torch does (models/torch_noise.h). The Python layer
// (strata.ZImagePipeline) maps diffusers' arguments and output types onto it.
#include "python/src/bridge.h"

#include "models/torch_noise.h"
#include "models/zimage_prompt_pipeline.h"
#include "tools/session.h"
#include "tools/session_loader.h"

#include <fmt/format.h>

#include <sstream>

namespace strata::python {
namespace {

// Thrown through zimage_generate from a stage or step callback (they return nothing)
// when Python asked to stop; every stage owns its device memory through RAII.
struct Stopped {};

class ZImage {
public:
  ZImage(const std::string& dir, const std::vector<std::string>& run_args) {
    settings_ = value_or_raise(run_settings(parse_or_raise(run_args, run_option_specs())));
    dir_ = value_or_raise(open_zimage_pipeline_dir(dir));
  }

  // {"latent": [16, h, w], "image": [H, W, 3] in [0, 1], "decoded": [3, H, W]}
  // (the last two with decode).
  py::dict generate(const std::string& prompt, std::optional<std::string> negative_prompt, int64_t height,
                    int64_t width, int64_t steps, float guidance_scale, float cfg_truncation,
                    float cfg_normalization, int64_t seed, std::optional<FloatArray> latents, bool decode,
                    py::object progress) {
    ZImageGenerateOptions o;
    o.prompt = prompt;
    o.negative_prompt = std::move(negative_prompt);
    o.height = height;
    o.width = width;
    o.steps = steps;
    o.guidance_scale = guidance_scale;
    o.cfg_truncation = cfg_truncation;
    o.cfg_normalization = cfg_normalization;
    o.decode = decode;
    if (latents) {
      o.noise = tensor_from(*latents);
      if (o.noise.shape.size() == 4 && o.noise.shape[0] == 1) o.noise.shape.erase(o.noise.shape.begin());
    } else {
      if (seed < 0) throw StrataError(fmt::format("--seed {}: must be a non-negative integer", seed));
      if (width % 16 == 0 && height % 16 == 0 && width > 0 && height > 0)
        o.noise = torch_randn({16, height / 8, width / 8}, static_cast<uint64_t>(seed));
    }
    if (Status s = check_generate_options(o, 16); !s.is_ok()) raise(s);

    ProgressBridge bridge(std::move(progress));
    PipelineObserver observer;
    std::string stage;
    observer.stage = [&](const std::string& s) {
      stage = s;
      if (!bridge.report(s, 0, 0)) throw Stopped{};
    };
    observer.step = [&](int64_t done, int64_t total) {
      if (!bridge.report(stage, done, total)) throw Stopped{};
    };
    Expected<ZImageGenerateResult> result = error("not run");
    {
      py::gil_scoped_release released;
      std::ostringstream log;  // the passes' reports, which the CLI prints; kept quiet here
      SessionLoader loader(settings_);
      try {
        result = zimage_generate(dir_, o, loader, observer, log);
      } catch (const Stopped&) {
        result = interrupted_status();
      }
    }
    bridge.rethrow_pending();
    if (!result) raise(result.status());
    py::dict out;
    out["latent"] = numpy_from(std::move(result->latent));
    if (decode) {
      out["image"] = numpy_from(std::move(result->image));
      out["decoded"] = numpy_from(std::move(result->decoded));
    }
    out["peak_device_bytes"] = result->peak_device_bytes;
    return out;
  }

private:
  RunSettings settings_;
  ZImagePipelineDir dir_;
};

}  // namespace

void bind_zimage(py::module_& m) {
  py::class_<ZImage>(m, "ZImage")
      .def(py::init<const std::string&, const std::vector<std::string>&>(), py::arg("dir"), py::arg("run_args"))
      .def("generate", &ZImage::generate, py::arg("prompt"), py::arg("negative_prompt"), py::arg("height"),
           py::arg("width"), py::arg("steps"), py::arg("guidance_scale"), py::arg("cfg_truncation"),
           py::arg("cfg_normalization"), py::arg("seed"), py::arg("latents"), py::arg("decode"),
           py::arg("progress"));
}

}  // namespace strata::python
