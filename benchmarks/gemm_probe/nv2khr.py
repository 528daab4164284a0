#!/usr/bin/env python3
"""Rewrite a SPIR-V module's GL_NV_cooperative_matrix instructions as their
VK_KHR_cooperative_matrix equivalents (so that glslang's NV syntax can declare
subgroup matrices of any size, which the KHR + NV2 flexible-dimension path accepts).
Each NV matrix type must be used in one role only (A, B or accumulator).
Usage: nv2khr.py IN.spv OUT.spv"""
import struct
import sys

words = list(struct.unpack("<%dI" % (len(open(sys.argv[1], "rb").read()) // 4), open(sys.argv[1], "rb").read()))
header, body = words[:5], words[5:]
insts = []
i = 0
while i < len(body):
    n, op = body[i] >> 16, body[i] & 0xFFFF
    insts.append([op] + body[i + 1:i + n])
    i += n

bool_val, type_of, uint_t = {}, {}, None
HAS_TYPE = {5359, 5361, 5362, 61, 245, 83, 81, 65, 59}
for ins in insts:
    op = ins[0]
    if op == 41: bool_val[ins[2]] = 1
    if op == 42: bool_val[ins[2]] = 0
    if op == 21 and ins[2] == 32 and ins[3] == 0: uint_t = ins[1]
    if op in HAS_TYPE and len(ins) > 2: type_of[ins[2]] = ins[1]
use = {}
for ins in insts:
    if ins[0] == 5361:
        for v, u in ((ins[3], 0), (ins[4], 1), (ins[1], 2)):
            t = type_of.get(v, v)
            if use.get(t, u) != u:
                sys.exit("type %d used as both %d and %d" % (t, use[t], u))
            use[t] = u

bound = header[3]
c0, c1 = bound, bound + 1
header[3] = bound + 2
out = []
added = False


def string_words(s):
    b = s.encode() + b"\0"
    b += b"\0" * ((4 - len(b) % 4) % 4)
    return list(struct.unpack("<%dI" % (len(b) // 4), b))


for ins in insts:
    op, ops = ins[0], ins[1:]
    if op == 17 and ops[0] == 5357:
        ops = [6022]
    elif op == 10 and b"SPV_NV_cooperative_matrix" in struct.pack("<%dI" % len(ops), *ops):
        ops = string_words("SPV_KHR_cooperative_matrix")
        out.append([10] + ops)
        op, ops = 10, string_words("SPV_NV_cooperative_matrix2")
    elif op == 5358:
        if not added:
            out.append([43, uint_t, c0, 0])
            out.append([43, uint_t, c1, 1])
            added = True
        op, ops = 4456, ops + [("U", use.get(ops[0], 2))]  # a type no multiply uses: an accumulator (a converted result)
    elif op == 5359:  # rtype res ptr stride colmajor [mem...]
        rt, res, ptr, stride, cm = ops[:5]
        op, ops = 4457, [rt, res, ptr, c1 if bool_val[cm] else c0, stride] + ops[5:]
    elif op == 5360:  # ptr obj stride colmajor [mem...]
        ptr, obj, stride, cm = ops[:4]
        op, ops = 4458, [ptr, obj, c1 if bool_val[cm] else c0, stride] + ops[4:]
    elif op == 5361:
        op = 4459
    elif op == 5362:
        op = 4460
    out.append([op] + ops)

# The Use operand is an id of a constant: add constants 0/1/2 for the three uses.
uses = {}
final = []
for ins in out:
    if ins[0] == 4456:
        u = ins[-1][1]
        if u not in uses:
            uses[u] = header[3]
            header[3] += 1
            final.append([43, uint_t, uses[u], u])
        ins = ins[:-1] + [uses[u]]
    final.append(ins)

res = header[:]
for ins in final:
    res.append((len(ins)) << 16 | ins[0])
    res += ins[1:]
open(sys.argv[2], "wb").write(struct.pack("<%dI" % len(res), *res))
print("rewrote: uses", {k: v for k, v in use.items()})
