#!/usr/bin/env python3
"""Cut the machine code out of the NVIDIA driver's shader disk cache.

Usage: nvuc.py OUT_DIR CACHE_DIR...

Each GLCache *.bin holds zstd frames. A compiled shader decompresses to an "NVuc"
object (magic "NVDANVVMNVuc"); its first section entry (type, size, offset as three
little-endian u32 at 0x48) points at the machine code (8 bytes past it), whose size matches the "Binary Size"
the driver's pipeline statistics report. Writes OUT_DIR/codeNNN.bin (raw SM90 code, for
`nvdisasm --binary SM90`) and OUT_DIR/codeNNN.nvuc (the whole object). Layout learned
from one driver (580.159.04); nothing else about the format is assumed.
"""
import os, struct, subprocess, sys

def main():
    out, dirs = sys.argv[1], sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    n, seen = 0, set()
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if not f.endswith(".bin"):
                    continue
                data = open(os.path.join(root, f), "rb").read()
                j = data.find(b"\x28\xb5\x2f\xfd")
                while j >= 0:
                    blob = subprocess.run(["zstd", "-dcq"], input=data[j:], capture_output=True).stdout
                    j = data.find(b"\x28\xb5\x2f\xfd", j + 4)
                    if not blob.startswith(b"NVDANVVMNVuc") or blob in seen:
                        continue
                    seen.add(blob)
                    kind, size, off = struct.unpack_from("<III", blob, 0x48)
                    if kind != 1 or off + 8 + size > len(blob):
                        print("unexpected section entry", kind, size, off, file=sys.stderr)
                        continue
                    # the code starts 8 bytes past the entry's offset (16-byte instructions aligned
                    # from there; the section ends in NOPs exactly `size` bytes later)
                    open(os.path.join(out, "code%03d.bin" % n), "wb").write(blob[off + 8:off + 8 + size])
                    open(os.path.join(out, "code%03d.nvuc" % n), "wb").write(blob)
                    print("code%03d.bin" % n, size, "bytes of code")
                    n += 1
    print(n, "objects")

main()
