// strata._strata.Autoencoder: a VAE directory (or a seeded architecture) decoded as
// `strata decode` decodes it. Image VAEs run decoder_for's graph, compiled once per
// latent shape; video VAEs run their family's VideoDecoder (models/video_pipeline.h),
// opened once per latent shape and options. The Python layer (strata.AutoencoderKL)
// splits the batch and stacks the results.
#include "python/src/bridge.h"

#include "ir/interpreter.h"
#include "models/video_pipeline.h"
#include "tools/command_common.h"
#include "tools/session.h"
#include "tools/session_loader.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

namespace strata::python {
namespace {

// The flags from_pretrained passes: the model's and the run's, as `strata decode`
// takes them.
std::vector<OptionSpec> model_specs() {
  std::vector<OptionSpec> specs = with_model_options({});
  specs.insert(specs.end(), run_option_specs().begin(), run_option_specs().end());
  return specs;
}

// A decode's result: f32 values of `shape`, kept by `owner` (the device's readback
// buffer for an image decoded there, else a tensor).
struct Decoded {
  Shape shape;
  std::span<float> values;
  std::shared_ptr<void> owner;

  static Decoded of(Tensor t) {
    auto owned = std::make_shared<Tensor>(std::move(t));
    return Decoded{owned->shape, std::span(owned->data), owned};
  }
};

struct VideoOptions {
  bool whole = false;
  int64_t tile_batch = 0;
  std::optional<int64_t> slab_frames;
};

class Autoencoder {
public:
  explicit Autoencoder(const std::vector<std::string>& args) {
    ParsedArgs a = parse_or_raise(args, model_specs());
    settings_ = value_or_raise(run_settings(a));
    vae_ = std::make_unique<Vae>(value_or_raise(open_model(a)));
    is_video_ = is_video_vae(vae_->config);
  }

  std::string class_name() const { return vae_ ? vae_class_name(vae_->config) : std::string(); }
  bool is_video() const { return is_video_; }

  // One latent, [C, h, w] (image) or [C, T, h, w] (video), f32: [3, H, W] or [3, F, H, W].
  py::array decode(const FloatArray& latent, py::object progress, py::object on_frame, bool whole,
                   int64_t tile_batch, std::optional<int64_t> slab_frames) {
    Tensor input = tensor_from(latent);
    ProgressBridge bridge(std::move(progress));
    Expected<Decoded> out = Decoded();
    {
      py::gil_scoped_release released;
      // One decode at a time per model; other Python threads run meanwhile.
      std::lock_guard<std::mutex> lock(mutex_);
      if (!vae_) throw StrataError("the model is closed");  // unwinds to the GIL first
      if (is_video_) {
        Expected<Tensor> video = decode_video(std::move(input), {whole, tile_batch, slab_frames}, bridge, on_frame);
        out = video ? Expected<Decoded>(Decoded::of(std::move(*video))) : Expected<Decoded>(video.status());
      } else {
        out = decode_image(std::move(input), bridge);
      }
    }
    bridge.rethrow_pending();
    if (!out) raise(out.status());
    return numpy_over(out->shape, out->values, std::move(out->owner));
  }

  // Frees the compiled programs (their device memory) and the weights.
  void close() {
    py::gil_scoped_release released;
    std::lock_guard<std::mutex> lock(mutex_);
    programs_.clear();
    video_.reset();
    vae_.reset();
  }

private:
  std::mutex mutex_;  // decode() and close(), which run without the GIL
  RunSettings settings_;
  std::unique_ptr<Vae> vae_;
  bool is_video_ = false;
  std::ostringstream log_;  // the passes' reports, which the CLI prints; kept quiet here
  std::map<Shape, std::unique_ptr<LoadedProgram>> programs_;  // image VAEs, per latent shape
  std::unique_ptr<VideoDecoder> video_;                        // video VAEs, for video_key_
  std::tuple<int64_t, int64_t, int64_t, bool, int64_t, int64_t> video_key_{};

  // The image stays in the readback buffer the device copied it into (no host copy:
  // the array is made over it).
  Expected<Decoded> decode_image(Tensor latent, ProgressBridge& bridge) {
    Shape key = latent.shape;  // as the program takes it, [1, C, h, w]
    if (key.size() == 3) key.insert(key.begin(), 1);
    auto program = programs_.find(key);
    if (program == programs_.end() || settings_.backend == "cpu") {
      if (!bridge.report("building the graph", 0, 0)) return interrupted_status();
      STRATA_ASSIGN_OR_RETURN(Graph g, decoder_for(*vae_, latent));
      if (settings_.backend == "cpu") {
        if (!bridge.report("decoding on the CPU", 0, 1)) return interrupted_status();
        STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, interpret(g, vae_->weights, {latent}));
        bridge.report("decoding on the CPU", 1, 1);
        Decoded image = Decoded::of(std::move(outputs[0]));
        return finish_image(std::move(image));
      }
      if (!bridge.report("compiling and loading", 0, 0)) return interrupted_status();
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<LoadedProgram> loaded, load_on_device(g, vae_->weights, settings_, log_));
      program = programs_.emplace(key, std::move(loaded)).first;
    }
    latent.shape = key;
    if (!bridge.report("decoding", 0, 1)) return interrupted_status();
    STRATA_ASSIGN_OR_RETURN(LoadedProgram::HeldRun run, program->second->run_held("", {latent}));
    if (!bridge.report("decoding", 1, 1)) return interrupted_status();
    return finish_image(Decoded{run.outputs[0].shape, run.outputs[0].values, std::move(run.owner)});
  }

  static Decoded finish_image(Decoded image) {  // [1, 3, H, W] -> [3, H, W], as decode writes
    if (image.shape.size() == 4 && image.shape[0] == 1) image.shape.erase(image.shape.begin());
    return image;
  }

  Expected<Tensor> decode_video(Tensor latent, const VideoOptions& o, ProgressBridge& bridge,
                                const py::object& on_frame) {
    STRATA_ASSIGN_OR_RETURN(VideoLatentShape shape, check_video_latent_shape(vae_->config, latent.shape));
    auto decoder = video_decoder_for(*vae_);
    VideoDecodeOptions options;
    if (o.whole) STRATA_RETURN_IF_ERROR(decoder->accepts_whole("frames='whole'"));
    options.whole = o.whole;
    if (o.tile_batch != 0) {
      STRATA_RETURN_IF_ERROR(decoder->accepts_tile_batch());
      if (o.tile_batch < 1) return error("tile_batch {}: give a positive number of tiles per run", o.tile_batch);
    }
    options.tile_batch = o.tile_batch;
    if (o.slab_frames) {
      STRATA_RETURN_IF_ERROR(decoder->accepts_slab_frames(o.whole));
      if (*o.slab_frames < 1) return error("slab_frames {}: give a positive number of latent frames", *o.slab_frames);
      options.slab_frames = *o.slab_frames;
    } else {
      options.slab_frames = decoder->default_slab_frames(o.whole, shape, settings_.memory_budget);
    }
    STRATA_ASSIGN_OR_RETURN(VideoGeometry geometry, decoder->geometry(shape));
    const auto key = std::tuple{shape.frames, shape.height, shape.width, options.whole, options.tile_batch,
                                options.slab_frames};
    // A kept device program starts the clip from zeroed states, as a fresh one; the
    // interpreter's program is opened afresh for every clip.
    // A stopped decode leaves states part-way: they are reset all the same.
    if (video_ && key == video_key_ && settings_.backend != "cpu") {
      STRATA_RETURN_IF_ERROR(video_->reset_states());
    } else {
      if (!bridge.report(settings_.backend == "cpu" ? "building the program" : "compiling and loading", 0, 0))
        return interrupted_status();
      video_.reset();
      SessionLoader loader(settings_);
      STRATA_RETURN_IF_ERROR(decoder->open(shape, options, loader, log_));
      video_ = std::move(decoder);
      video_key_ = key;
    }
    const int64_t frames = geometry.frames, h = shape.height * geometry.scale, w = shape.width * geometry.scale;
    Tensor video({3, frames, h, w});
    const size_t plane = static_cast<size_t>(h * w);
    auto sink = [&](int64_t index, const Tensor& frame) -> Status {
      if (index < 0 || index >= frames || frame.data.size() != 3 * plane)
        return error("frame {} of {} values does not fit the video [3, {}, {}, {}]", index, frame.data.size(), frames,
                     h, w);
      for (size_t c = 0; c < 3; ++c)
        std::memcpy(video.data.data() + (c * static_cast<size_t>(frames) + static_cast<size_t>(index)) * plane,
                    frame.data.data() + c * plane, plane * sizeof(float));
      if (!on_frame.is_none() && !bridge.with_gil([&] { on_frame(index, numpy_from(Tensor(frame))); }))
        return interrupted_status();
      if (!bridge.report("decoding frames", index + 1, frames)) return interrupted_status();
      return Status::ok();
    };
    if (!bridge.report("decoding frames", 0, frames)) return interrupted_status();
    STRATA_RETURN_IF_ERROR(video_->decode(latent, sink));
    return video;
  }
};

}  // namespace

void bind_autoencoder(py::module_& m) {
  py::class_<Autoencoder>(m, "Autoencoder")
      .def(py::init<const std::vector<std::string>&>(), py::arg("args"))
      .def_property_readonly("class_name", &Autoencoder::class_name)
      .def_property_readonly("is_video", &Autoencoder::is_video)
      .def("decode", &Autoencoder::decode, py::arg("latent"), py::arg("progress") = py::none(),
           py::arg("on_frame") = py::none(), py::arg("whole") = false, py::arg("tile_batch") = 0,
           py::arg("slab_frames") = py::none())
      .def("close", &Autoencoder::close);
}

}  // namespace strata::python
