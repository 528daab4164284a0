#!/usr/bin/env python3
"""Tables from benchmarks/peers/run.sh's results: python3 summarize.py DIR.

ggml's test-backend-ops perf lines (TFLOPS per case) beside strata's GEMM probe kernels
(the core and run.sh's variants; the best of two passes per kernel and shape), as
markdown rows for docs/PERFORMANCE.md. Every f16-accumulator probe check is printed."""
import re
import sys
from pathlib import Path

d = Path(sys.argv[1])


def tbo(name):
    """{vars: (us/run, TFLOP/s)} from one test-backend-ops console log."""
    rows = {}
    f = d / f"tbo-{name}.txt"
    if not f.exists():
        return rows
    for line in f.read_text(errors="replace").splitlines():
        m = re.search(r"^\s*\w+\((.*)\):.*?([\d.]+) us/run.*?([\d.]+) ([GT])FLOPS", line)
        if m:
            v = float(m.group(3)) * (1 if m.group(4) == "T" else 1e-3)
            rows[m.group(1)] = (float(m.group(2)), v)
    return rows


# strata's probe kernels (run.sh's PROBE_VARIANTS), by file name: column heading.
kernels = {"k.spv": "strata core 128×128, f32 acc", "k16.spv": "strata 128×128, f16 acc",
           "kw.spv": "strata 128×256, f32 acc", "kw16.spv": "strata 128×256, f16 acc",
           "ks.spv": "strata 16×16 fragments, f32 acc", "ks16.spv": "strata 16×16 fragments, f16 acc"}
probe = {}
pf = d / "probe.txt"
if pf.exists():
    for line in pf.read_text(errors="replace").splitlines():
        m = re.search(r"(\S+\.spv) BM\d+ BN\d+ M(\d+) N(\d+) K(\d+): ([\d.]+) ms, ([\d.]+) TFLOP/s, check (.*?) (OK|BIASED|WRONG)", line)
        if m:
            key = (Path(m.group(1)).name,) + tuple(int(x) for x in m.group(2, 3, 4))
            probe[key] = max(probe.get(key, 0.0), float(m.group(6)))
            if m.group(8) != "OK" or "f16-acc" in m.group(7):
                print(f"probe check: {Path(m.group(1)).name} M{key[1]} N{key[2]} K{key[3]}: {m.group(7)} {m.group(8)}")

mm = tbo("mul_mat")
cm1 = tbo("mul_mat-coopmat1")
shapes = [(4096, 4096, 4096), (4224, 11520, 3840), (4224, 10240, 3840), (4224, 3840, 10240)]
ks = [k for k in kernels if any(p[0] == k for p in probe)]
# ggml columns: (rows, type_a, type_b, prec=f32?, heading); test-backend-ops' default
# precision is f16 accumulation on coopmat2.
gcols = [(mm, "f16", "f16", False, "ggml f16·f16, f16 acc"), (mm, "f16", "f16", True, "ggml f16·f16, f32 acc"),
         (mm, "f16", "f32", False, "ggml f16·f32, f16 acc"), (mm, "f16", "f32", True, "ggml f16·f32, f32 acc"),
         (mm, "q8_0", "f16", False, "ggml q8_0·f16"), (mm, "q8_0", "f32", False, "ggml q8_0·f32"),
         (cm1, "f16", "f16", False, "ggml KHR f16·f16, f16 acc"), (cm1, "f16", "f16", True, "ggml KHR f16·f16, f32 acc")]
heads = [kernels[k] for k in ks] + [c[4] for c in gcols]
print("| GEMM (tokens × out × in) | " + " | ".join(heads) + " |")
print("|---" * (len(heads) + 1) + "|")
for t, o, i in shapes:
    def g(rows, a, b, f32):
        for k, (us, v) in rows.items():
            if f"type_a={a},type_b={b},m={o},n={t},k={i}," in k and k.endswith(",prec=f32") == f32:
                return f"{v:.1f}"
        return "—"
    cells = [f"{probe[(k, t, o, i)]:.1f}" if (k, t, o, i) in probe else "—" for k in ks]
    cells += [g(rows, a, b, f32) for rows, a, b, f32, _ in gcols]
    print(f"| {t} × {o} × {i} | " + " | ".join(cells) + " |")
for name in ("flash_attn", "conv_2d"):
    for k, (us, v) in tbo(name).items():
        print(f"| {name}: {k} | {us / 1000:.3f} ms | {v:.1f} TFLOP/s |")
