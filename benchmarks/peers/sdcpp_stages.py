#!/usr/bin/env python3
"""sd-cli's per-stage times from its -v log, as one JSON line.

  sdcpp_stages.py SD_CLI_LOG [NVIDIA_SMI_MEMORY_LOG]

Reads stable-diffusion.cpp's own log lines: the prompt's token count (the tokenizer's
"split prompt ... to N tokens" lines), weight loading ("loading tensors completed"),
the text encoder ("computing condition graph completed, taking N ms"; the whole
get_learned_condition beside it), each sampling step (the progress bar's per-step
s/it or it/s), each image's sampling ("sampling completed") and each latent's VAE
decode ("latent N decoded"), and the total params memory line. With the second file
(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100) it adds
the peak device memory seen over the run, less the first sample (the idle card).
"""
import json
import re
import sys


def main():
    text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
    r = {}
    tokens = [int(n) for n in re.findall(r"split prompt .*? to (\d+) tokens", text, re.S)]
    r["prompt_tokens"] = sum(tokens)
    r["load_s"] = [float(x) for x in re.findall(r"loading tensors completed, taking ([\d.]+)s", text)]
    r["text_encoder_ms"] = [int(x) for x in re.findall(r"computing condition graph completed, taking (\d+) ms", text)]
    r["get_learned_condition_s"] = [float(x) for x in re.findall(r"get_learned_condition completed, taking ([\d.]+)s", text)]
    steps = []
    # Sampling ends before "decoding N latents"; the progress bars after it count VAE
    # tiles (--vae-tiling), not steps.
    sampling = re.split(r"decoding \d+ latents", text, maxsplit=1)[0]
    for val, unit in re.findall(r"\|\s*\d+/\d+ - ([\d.]+)(s/it|it/s)", sampling):
        v = float(val)
        steps.append(round(v * 1e3 if unit == "s/it" else 1e3 / v, 1))
    r["step_ms"] = steps  # time since the previous step; 3 significant digits (sd.cpp prints %.2f)
    r["sampling_s"] = [float(x) for x in re.findall(r"sampling completed, taking ([\d.]+)s", text)]
    r["vae_decode_s"] = [float(x) for x in re.findall(r"latent \d+ decoded, taking ([\d.]+)s", text)]
    m = re.search(r"total params memory size = ([^\n]*)", text)
    r["params_memory"] = m.group(1).strip() if m else None
    m = re.search(r"generate_image completed in ([\d.]+)s", text)
    r["generate_image_s"] = float(m.group(1)) if m else None
    r["errors"] = re.findall(r"\[ERROR\][^\n]*", text)[:5]
    if len(sys.argv) > 2:
        mem = [int(x) for x in re.findall(r"^\s*(\d+)\s*$", open(sys.argv[2]).read(), re.M)]
        if mem:
            r["device_memory_MiB"] = {"idle": mem[0], "peak": max(mem), "peak_above_idle_GiB": round((max(mem) - mem[0]) / 1024, 2)}
    print(json.dumps(r))


if __name__ == "__main__":
    main()
