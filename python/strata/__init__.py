"""strata from Python, under diffusers' names.

    import strata
    vae = strata.AutoencoderKL.from_pretrained("vae/")       # any VAE `strata decode` takes
    image = vae.decode(latents).sample                        # numpy [B, 3, H, W] (video: [B, 3, F, H, W])

    pipe = strata.ZImagePipeline.from_pretrained("Z-Image/")
    image = pipe(prompt="a harbour at dawn", generator=0).images[0]

The work runs in the same library, with the same options, as the `strata` command line
(docs/PYTHON.md); numpy is needed for arrays, not to import the package.
"""

from ._strata import StrataError, device_memory_stats
from ._strata import devices as _devices
from . import _strata

__all__ = [
    "AutoencoderKL",
    "DecoderOutput",
    "ImagePipelineOutput",
    "StrataError",
    "ZImagePipeline",
    "device_memory_stats",
    "devices",
]


def devices():
    """The Vulkan devices, as `strata devices` lists them: a dict each (index, name, type,
    driver, driver_info, float16, selected); `selected` marks the one a run picks."""
    return _devices()


def _run_flags(device, precision, options):
    """Keyword options as the command line's run flags: memory_budget="2G" is
    --memory-budget 2G, no_cache=True is --no-cache (a False or None flag is left out)."""
    flags = []
    if device is not None:
        flags += ["--device", str(int(device))]
    if precision is not None:
        flags += ["--precision", str(precision)]
    for name, value in options.items():
        if value is None or value is False:
            continue
        flags.append("--" + name.replace("_", "-"))
        if value is not True:
            flags.append(str(value))
    return flags


def _numpy():
    """numpy, imported where the binding will look for its C API: pybind11 before 2.12
    (Debian 12 has 2.10) takes it from numpy.core.multiarray, a name NumPy 2 keeps only
    as a deprecated alias of numpy._core.multiarray. Where the alias is gone, the module
    is registered under the old name."""
    import importlib
    import sys

    import numpy as np

    if "numpy.core.multiarray" not in sys.modules:
        try:
            importlib.import_module("numpy.core.multiarray")
        except ImportError:
            sys.modules["numpy.core.multiarray"] = importlib.import_module("numpy._core.multiarray")
    return np


def _as_float32(array):
    """A C-contiguous float32 numpy array of a numpy array, anything with __array__, or a
    CPU tensor with __dlpack__; f16 inputs are widened (the decoders read f32)."""
    np = _numpy()

    if not hasattr(array, "__array__") and hasattr(array, "__dlpack__"):
        array = np.from_dlpack(array)
    return np.ascontiguousarray(np.asarray(array), dtype=np.float32)


class _Progress:
    """The progress callable handed to the binding: the caller's `callback(stage, done,
    total)`, else a tqdm bar per counted stage when tqdm is installed, else nothing."""

    def __init__(self, callback):
        self.callback = callback
        self.bar = None
        self.stage = None
        self.tqdm = None
        if callback is None:
            try:
                from tqdm.auto import tqdm

                self.tqdm = tqdm
            except ImportError:
                pass

    def __call__(self, stage, done, total):
        if self.callback is not None:
            self.callback(stage, done, total)
            return
        if self.tqdm is None or total <= 1:
            return
        if self.bar is None or stage != self.stage:
            self.close()
            self.stage = stage
            self.bar = self.tqdm(total=total, desc=stage, leave=False)
        self.bar.n = done
        self.bar.refresh()

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def callable(self):
        return self if (self.callback is not None or self.tqdm is not None) else None


class DecoderOutput:
    """diffusers' DecoderOutput: `.sample`, a numpy float32 array."""

    def __init__(self, sample):
        self.sample = sample

    def __getitem__(self, index):  # decode(z)[0], as diffusers' return_dict=False tuple
        return (self.sample,)[index]


class _Owned:
    """Device memory held by `_handle`, freed by close(), `with`, or collection."""

    _handle = None

    def close(self):
        """Frees the object's device memory (compiled programs, weights) now."""
        handle, self._handle = self._handle, None
        if handle is not None and hasattr(handle, "close"):
            handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _live(self):
        if self._handle is None:
            raise StrataError(f"this {type(self).__name__} is closed")
        return self._handle


class AutoencoderKL(_Owned):
    """A VAE decoder, for every VAE class `strata decode` decodes: AutoencoderKL (Flux
    layout), AutoencoderKLQwenImage, and the video VAEs AutoencoderKLWan,
    AutoencoderKLHunyuanVideo and AutoencoderKLMiniMaxH3 (their class is read from the
    directory's config.json, so the name here need not match it).

    A program is compiled (or read from the plan cache) on the first decode of each
    latent shape and kept until close().
    """

    def __init__(self, handle):
        self._handle = handle

    @classmethod
    def from_pretrained(cls, path, device=None, precision="f16", subfolder=None, **options):
        """Opens a diffusers VAE directory (config.json and safetensors).

        device: the Vulkan device index (`strata.devices()`); None picks as the CLI does
        (STRATA_DEVICE, else the best). precision: "f16" or "f32" activations. Other
        keywords are the CLI's run flags: backend="cpu", memory_budget="4G",
        no_cache=True, cache_dir=..., and the compiler's options (`strata help`).
        """
        import os

        if subfolder:
            path = os.path.join(path, subfolder)
        return cls(_strata.Autoencoder(["--vae", os.fspath(path)] + _run_flags(device, precision, options)))

    @classmethod
    def from_architecture(cls, arch, seed=0, device=None, precision="f16", **options):
        """A VAE of a known architecture with weights drawn from `seed`, as `--arch`
        (flux, qwen, wan22, hunyuan, minimax, and their -small variants): for benchmarks."""
        flags = ["--arch", str(arch), "--seed", str(int(seed))]
        return cls(_strata.Autoencoder(flags + _run_flags(device, precision, options)))

    @property
    def class_name(self):
        """The diffusers class of the loaded config ("AutoencoderKLWan", ...)."""
        return self._live().class_name

    @property
    def is_video(self):
        return self._live().is_video

    def decode(self, latents, return_dict=True, callback=None, on_frame=None, frames=None, tile_batch=0,
               slab_frames=None, allow_nonfinite=False):
        """Decodes latents in model scale, as the pipelines hand them to vae.decode (the
        de-normalisation is part of the decoder): [B, C, H, W] (or [C, H, W]) for an
        image VAE, [B, C, T, H, W] (or [C, T, H, W]) for a video VAE; f32 or f16.

        Returns DecoderOutput(sample=[B, 3, H', W']) or, for video, [B, 3, F, H', W'];
        float32. callback(stage, done, total) follows the work (default: tqdm when
        installed); an exception it raises, or Ctrl-C, stops the decode between frames.
        on_frame(index, frame [3, H', W']) receives each video frame as soon as it is
        final. frames="whole", tile_batch and slab_frames are decode's video options. A
        latent holding NaN or inf is refused, as `strata decode` refuses it, unless
        allow_nonfinite.
        """
        np = _numpy()
        handle = self._live()
        z = _as_float32(latents)
        image_rank = 4 if handle.is_video else 3
        if z.ndim == image_rank:
            z = z[None]
        if z.ndim != image_rank + 1:
            want = "[B, C, T, H, W]" if handle.is_video else "[B, C, H, W]"
            raise StrataError(f"the latents are {list(z.shape)}; {handle.class_name} decodes {want}")
        if not allow_nonfinite and not np.isfinite(z).all():
            index = int(np.flatnonzero(~np.isfinite(z))[0])
            raise StrataError(f"the latent holds a non-finite value ({z.flat[index]}) at index {index} "
                              "(allow_nonfinite=True decodes it anyway)")
        if frames not in (None, "whole"):
            raise StrataError(f"frames='{frames}': decode takes frames='whole' (one decoder call over all frames)")
        progress = _Progress(callback)
        try:
            samples = [
                handle.decode(np.ascontiguousarray(one), progress.callable(), on_frame, frames == "whole",
                              int(tile_batch), slab_frames)
                for one in z
            ]
        finally:
            progress.close()
        sample = samples[0][None] if len(samples) == 1 else np.stack(samples)
        return DecoderOutput(sample) if return_dict else (sample,)


class ImagePipelineOutput:
    """diffusers' ImagePipelineOutput: `.images`, a numpy array [B, H, W, 3] in [0, 1]
    (output_type "np"), a list of PIL images ("pil"), or the latents [B, 16, h, w]
    ("latent")."""

    def __init__(self, images):
        self.images = images

    def __getitem__(self, index):
        return (self.images,)[index]


class ZImagePipeline(_Owned):
    """Prompt to image with a diffusers ZImagePipeline directory: the program of
    `strata generate --model`. Each call loads, runs and frees one stage after another
    (text encoder, transformer, VAE), so the object holds no device memory between calls."""

    def __init__(self, path, run_flags):
        self._handle = _strata.ZImage(path, run_flags)

    @classmethod
    def from_pretrained(cls, path, device=None, precision=None, **options):
        """path: the pipeline directory (model_index.json, tokenizer/, text_encoder/,
        transformer/, vae/, scheduler/). device, precision and keywords as in
        AutoencoderKL.from_pretrained (precision None: f16 where the device has it)."""
        import os

        return cls(os.fspath(path), _run_flags(device, precision, options))

    def __call__(self, prompt="", negative_prompt=None, height=1024, width=1024, num_inference_steps=50,
                 guidance_scale=5.0, generator=None, latents=None, output_type="pil", return_dict=True,
                 cfg_truncation=1.0, cfg_normalization=0.0, callback=None):
        """generator: a seed (int), or a torch.Generator (its initial_seed()): the noise
        torch.randn draws with it; None is seed 0 (as the CLI's default). latents: the
        initial noise [16, H/8, W/8] or [1, 16, H/8, W/8] instead. callback(stage, done,
        total) as in AutoencoderKL.decode."""
        np = _numpy()
        if output_type not in ("np", "pil", "latent"):
            raise StrataError(f"output_type '{output_type}' is not np, pil or latent")
        if isinstance(prompt, (list, tuple)):
            if len(prompt) != 1:
                raise StrataError("one prompt per call")
            prompt = prompt[0]
        if isinstance(negative_prompt, (list, tuple)):
            negative_prompt = negative_prompt[0] if negative_prompt else None
        seed = 0
        if generator is not None:
            seed = int(generator.initial_seed()) if hasattr(generator, "initial_seed") else int(generator)
        noise = None if latents is None else _as_float32(latents)
        progress = _Progress(callback)
        try:
            out = self._live().generate(prompt, negative_prompt, int(height), int(width), int(num_inference_steps),
                                        float(guidance_scale), float(cfg_truncation), float(cfg_normalization),
                                        seed, noise, output_type != "latent", progress.callable())
        finally:
            progress.close()
        if output_type == "latent":
            images = out["latent"][None]
        elif output_type == "np":
            images = out["image"][None]
        else:
            from PIL import Image

            pixels = (out["image"] * 255).round().astype(np.uint8)
            images = [Image.fromarray(pixels)]
        return ImagePipelineOutput(images) if return_dict else (images,)
