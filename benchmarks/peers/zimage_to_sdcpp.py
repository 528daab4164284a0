#!/usr/bin/env python3
"""A diffusers Z-Image pipeline directory -> the single files stable-diffusion.cpp takes.

  zimage_to_sdcpp.py PIPELINE_DIR OUT_DIR

PIPELINE_DIR is a ZImagePipeline save_pretrained layout (benchmarks/torch_ref/
zimage_pipeline.py write): transformer/, text_encoder/, vae/, each one safetensors
file or shards with an *.safetensors.index.json. Writes into OUT_DIR:

  z_image.safetensors   the transformer in the original Z-Image (ComfyUI) naming that
                        sd-cli's docs/z_image.md loads: to_q/to_k/to_v fused into
                        attention.qkv, to_out.0 -> out, norm_q/norm_k -> q_norm/k_norm,
                        all_x_embedder.2-1 -> x_embedder, all_final_layer.2-1 ->
                        final_layer (the map of sd.cpp's src/name_conversion.cpp,
                        convert_diffusers_dit_to_original_lumina2); pass as
                        --diffusion-model.
  qwen3.safetensors     the text encoder (Hugging Face Qwen3 names, which sd.cpp reads
                        as is; the tied lm_head is absent); --llm.
  vae.safetensors       the AutoencoderKL (diffusers names: sd.cpp converts them for
                        its first stage model); --vae.

Tensors keep their dtype (bf16); sd-cli's --type f16 / q8_0 converts them while it
loads. Data are copied tensor by tensor with copy_file_range (no tensor is held in
memory); a component that is already one file with the right names is linked instead
of copied. Standard library only. Prints one JSON line per file written.
"""
import json
import os
import struct
import sys
import time

DTYPE_SIZE = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "U8": 1, "I8": 1, "BOOL": 1}


class Source:
    """One tensor's bytes in a safetensors file."""

    def __init__(self, path, start, end, dtype, shape):
        self.path, self.start, self.end, self.dtype, self.shape = path, start, end, dtype, shape


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    base = 8 + n
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        b, e = v["data_offsets"]
        out[name] = Source(path, base + b, base + e, v["dtype"], v["shape"])
    return out


def component(dirpath):
    """name -> Source over a component's file or shards; also the list of files."""
    files = sorted(f for f in os.listdir(dirpath) if f.endswith(".safetensors"))
    index = [f for f in os.listdir(dirpath) if f.endswith(".safetensors.index.json")]
    if index:
        with open(os.path.join(dirpath, index[0])) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    if not files:
        sys.exit("zimage_to_sdcpp.py: no safetensors in %s" % dirpath)
    tensors = {}
    for f in files:
        for name, src in read_header(os.path.join(dirpath, f)).items():
            assert name not in tensors, name
            tensors[name] = src
    return tensors, [os.path.join(dirpath, f) for f in files]


def zimage_names(tensors):
    """diffusers ZImageTransformer2DModel names -> [(out name, [Source parts])]."""
    out, fused = [], {}
    for name in sorted(tensors):
        src = tensors[name]
        new = name
        for a, b in (("all_x_embedder.2-1.", "x_embedder."), ("all_final_layer.2-1.", "final_layer.")):
            if new.startswith(a):
                new = b + new[len(a):]
        for a, b in ((".attention.norm_q.", ".attention.q_norm."), (".attention.norm_k.", ".attention.k_norm."),
                     (".attention.to_out.0.", ".attention.out.")):
            new = new.replace(a, b)
        for i, p in enumerate((".attention.to_q.", ".attention.to_k.", ".attention.to_v.")):
            if p in new:
                key = new.replace(p, ".attention.qkv.")
                fused.setdefault(key, [None, None, None])[i] = src
                break
        else:
            out.append((new, [src]))
    for key, parts in fused.items():
        assert all(parts), "q, k and v of %s" % key
        assert len({(p.dtype, tuple(p.shape[1:])) for p in parts}) == 1, key
        out.append((key, parts))
    return sorted(out)


def write(path, entries):
    """entries: [(name, [Source parts concatenated along dim 0])]."""
    header, off = {}, 0
    for name, parts in entries:
        n = sum(p.end - p.start for p in parts)
        shape = [sum(p.shape[0] for p in parts)] + list(parts[0].shape[1:])
        size = DTYPE_SIZE[parts[0].dtype]
        for d in shape:
            size *= d
        assert size == n, (name, shape, n)
        header[name] = {"dtype": parts[0].dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt", "converted_by": "strata benchmarks/peers/zimage_to_sdcpp.py"}
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    tmp = path + ".part"
    fds = {}
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(blob)) + blob)
            f.flush()
            for _, parts in entries:
                for p in parts:
                    if p.path not in fds:
                        fds[p.path] = os.open(p.path, os.O_RDONLY)
                    copy_range(fds[p.path], f.fileno(), p.start, p.end - p.start)
    finally:
        for fd in fds.values():
            os.close(fd)
    os.replace(tmp, path)
    return 8 + len(blob) + off


def copy_range(src, dst, start, n):
    while n > 0:
        try:
            k = os.copy_file_range(src, dst, min(n, 1 << 30), start)
        except (AttributeError, OSError):
            k = 0
        if k <= 0:  # fall back to read/write (other file systems, old kernels)
            k = os.write(dst, os.pread(src, min(n, 64 << 20), start))
        start += k
        n -= k


def link_or_write(path, tensors, files):
    if len(files) == 1:
        if os.path.lexists(path):
            os.remove(path)
        os.symlink(os.path.abspath(files[0]), path)
        return os.path.getsize(files[0]), "linked"
    return write(path, [(n, [tensors[n]]) for n in sorted(tensors)]), "merged %d shards" % len(files)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    t0 = time.perf_counter()
    tensors, files = component(os.path.join(src, "transformer"))
    entries = zimage_names(tensors)
    size = write(os.path.join(out, "z_image.safetensors"), entries)
    print(json.dumps({"file": os.path.join(out, "z_image.safetensors"), "GB": round(size / 1e9, 2), "tensors": len(entries),
                      "from": "%d tensors in %d files" % (len(tensors), len(files)),
                      "seconds": round(time.perf_counter() - t0, 1)}), flush=True)
    for name, comp in (("qwen3.safetensors", "text_encoder"), ("vae.safetensors", "vae")):
        t0 = time.perf_counter()
        tensors, files = component(os.path.join(src, comp))
        size, how = link_or_write(os.path.join(out, name), tensors, files)
        print(json.dumps({"file": os.path.join(out, name), "GB": round(size / 1e9, 2), "tensors": len(tensors), "how": how,
                          "seconds": round(time.perf_counter() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
