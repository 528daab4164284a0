#!/usr/bin/env python3
"""Tables from benchmarks/peers/run.sh's results: python3 summarize.py DIR.

ggml's test-backend-ops perf lines (TFLOPS per case) beside strata's GEMM core probe
(the best of its two passes per shape), as markdown rows for docs/PERFORMANCE.md."""
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


probe = {}
pf = d / "probe.txt"
if pf.exists():
    for line in pf.read_text(errors="replace").splitlines():
        m = re.search(r"M(\d+) N(\d+) K(\d+): ([\d.]+) ms, ([\d.]+) TFLOP/s, check max rel err \S+ (\w+)", line)
        if m:
            key = tuple(int(x) for x in m.group(1, 2, 3))
            probe[key] = max(probe.get(key, 0.0), float(m.group(5)))
            if m.group(6) != "OK":
                print(f"probe check: {line}")

mm = tbo("mul_mat")
cm1 = tbo("mul_mat-coopmat1")
shapes = [(4096, 4096, 4096), (4224, 11520, 3840), (4224, 10240, 3840), (4224, 3840, 10240)]
print("| GEMM (tokens × out × in) | strata core f16·f16→f32 | ggml f16·f16 | ggml f16·f32 | ggml q8_0·f16 | ggml q8_0·f32 | ggml f16·f16, KHR coopmat |")
print("|---|---|---|---|---|---|---|")
for t, o, i in shapes:
    def g(rows, a, b):
        for k, (us, v) in rows.items():
            if f"type_a={a},type_b={b},m={o},n={t},k={i}," in k:
                return f"{v:.1f}"
        return "—"
    p = probe.get((t, o, i))
    print(f"| {t} × {o} × {i} | {p:.1f} |" if p else f"| {t} × {o} × {i} | — |", end="")
    print(f" {g(mm,'f16','f16')} | {g(mm,'f16','f32')} | {g(mm,'q8_0','f16')} | {g(mm,'q8_0','f32')} | {g(cm1,'f16','f16')} |")
for name in ("flash_attn", "conv_2d"):
    for k, (us, v) in tbo(name).items():
        print(f"| {name}: {k} | {us / 1000:.3f} ms | {v:.1f} TFLOP/s |")
