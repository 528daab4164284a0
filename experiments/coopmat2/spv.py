#!/usr/bin/env python3
"""Experiment: emit SPIR-V GEMM kernels with KHR cooperative matrices at workgroup
scope (VK_NV_cooperative_matrix2), which Debian's glslang cannot compile.

C[M,N] (f32, row-major) = A[M,K] (f16 row-major) * B where B is stored [N,K] row-major.
Usage: spv.py OUT.spv BM BN BK WG MODE
  MODE: wg      workgroup-scope matrices loaded with OpCooperativeMatrixLoadKHR from global
        tensor  workgroup-scope matrices loaded with OpCooperativeMatrixLoadTensorNV
"""
import struct
import sys


class Module:
    def __init__(self):
        self.next_id = 1
        self.sections = {k: [] for k in (
            "cap", "ext", "mm", "entry", "exec", "debug", "deco", "types", "funcs")}

    def id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def emit(self, sec, op, *operands):
        words = []
        for o in operands:
            if isinstance(o, str):
                b = o.encode() + b"\0"
                b += b"\0" * ((4 - len(b) % 4) % 4)
                words += list(struct.unpack("<%dI" % (len(b) // 4), b))
            elif isinstance(o, (list, tuple)):
                words += list(o)
            else:
                words.append(o)
        self.sections[sec].append([(len(words) + 1) << 16 | op] + words)

    def binary(self):
        out = [0x07230203, 0x00010600, 0, self.next_id, 0]
        for k in ("cap", "ext", "mm", "entry", "exec", "debug", "deco", "types", "funcs"):
            for ins in self.sections[k]:
                out += ins
        return struct.pack("<%dI" % len(out), *out)


# opcodes
OpName, OpExtension, OpMemoryModel, OpEntryPoint, OpExecutionMode, OpCapability = 5, 10, 14, 15, 16, 17
OpTypeVoid, OpTypeBool, OpTypeInt, OpTypeFloat, OpTypeVector = 19, 20, 21, 22, 23
OpTypeRuntimeArray, OpTypeStruct, OpTypePointer, OpTypeFunction = 29, 30, 32, 33
OpConstant, OpConstantComposite = 43, 44
OpFunction, OpFunctionEnd, OpVariable, OpLoad, OpStore, OpAccessChain = 54, 56, 59, 61, 62, 65
OpDecorate, OpMemberDecorate, OpCompositeExtract = 71, 72, 81
OpIAdd, OpIMul, OpUDiv, OpULessThan, OpPhi = 128, 132, 134, 176, 245
OpLoopMerge, OpLabel, OpBranch, OpBranchConditional, OpReturn = 246, 248, 249, 250, 253
OpTypeCooperativeMatrixKHR, OpCooperativeMatrixLoadKHR, OpCooperativeMatrixStoreKHR = 4456, 4457, 4458
OpCooperativeMatrixMulAddKHR = 4459
OpCooperativeMatrixLoadTensorNV, OpCooperativeMatrixStoreTensorNV = 5367, 5368
OpTypeTensorLayoutNV, OpTypeTensorViewNV, OpCreateTensorLayoutNV = 5370, 5371, 5372
OpTensorLayoutSetDimensionNV, OpTensorLayoutSetStrideNV, OpTensorLayoutSliceNV = 5373, 5374, 5375
OpCreateTensorViewNV = 5377
# enums
SC_Input, SC_PushConstant, SC_StorageBuffer, SC_Function = 1, 9, 12, 7
D_Block, D_ArrayStride, D_BuiltIn, D_NonWritable, D_Binding, D_DescriptorSet, D_Offset = 2, 6, 11, 24, 33, 34, 35
BI_WorkgroupId = 26


def build(BM, BN, BK, WG, mode, U=1, PF=0):
    m = Module()
    caps = (1, 9, 4433, 5345, 5357) if mode == "nv" else (1, 9, 4433, 5345, 6022)
    for cap in caps:  # Shader Float16 StorageBuffer16BitAccess VulkanMemoryModel CooperativeMatrixKHR
        m.emit("cap", OpCapability, cap)
    if mode == "tensor":
        m.emit("cap", OpCapability, 5433)  # CooperativeMatrixTensorAddressingNV
        m.emit("cap", OpCapability, 5439)  # TensorAddressingNV
    if mode == "nv":
        m.emit("ext", OpExtension, "SPV_NV_cooperative_matrix")
    else:
        m.emit("ext", OpExtension, "SPV_KHR_cooperative_matrix")
        m.emit("ext", OpExtension, "SPV_NV_cooperative_matrix2")
    if mode == "tensor":
        m.emit("ext", OpExtension, "SPV_NV_tensor_addressing")
    m.emit("mm", OpMemoryModel, 0, 3)  # Logical, Vulkan

    t_void, t_bool, t_u32, t_f16, t_f32 = m.id(), m.id(), m.id(), m.id(), m.id()
    m.emit("types", OpTypeVoid, t_void)
    m.emit("types", OpTypeBool, t_bool)
    m.emit("types", OpTypeInt, t_u32, 32, 0)
    m.emit("types", OpTypeFloat, t_f16, 16)
    m.emit("types", OpTypeFloat, t_f32, 32)
    t_v3u = m.id(); m.emit("types", OpTypeVector, t_v3u, t_u32, 3)
    t_v4u = m.id(); m.emit("types", OpTypeVector, t_v4u, t_u32, 4)

    consts = {}

    def cu(v):
        if v not in consts:
            i = m.id()
            m.emit("types", OpConstant, t_u32, i, v)
            consts[v] = i
        return consts[v]

    # buffers: A, B as uvec4 arrays (or f16 for the tensor mode), C as f32
    def buffer(elem, stride, binding, readonly):
        arr, st, ptr, var = m.id(), m.id(), m.id(), m.id()
        m.emit("types", OpTypeRuntimeArray, arr, elem)
        m.emit("deco", OpDecorate, arr, D_ArrayStride, stride)
        m.emit("types", OpTypeStruct, st, arr)
        m.emit("deco", OpDecorate, st, D_Block)
        m.emit("deco", OpMemberDecorate, st, 0, D_Offset, 0)
        m.emit("types", OpTypePointer, ptr, SC_StorageBuffer, st)
        m.emit("types", OpVariable, ptr, var, SC_StorageBuffer)
        m.emit("deco", OpDecorate, var, D_DescriptorSet, 0)
        m.emit("deco", OpDecorate, var, D_Binding, binding)
        if readonly:
            m.emit("deco", OpDecorate, var, D_NonWritable)
        return var

    if mode == "tensor":
        a_elem, a_stride = t_f16, 2
    else:
        a_elem, a_stride = t_v4u, 16
    vA = buffer(a_elem, a_stride, 0, True)
    vB = buffer(a_elem, a_stride, 1, True)
    vC = buffer(t_f32, 4, 2, False)
    p_sb_a = m.id(); m.emit("types", OpTypePointer, p_sb_a, SC_StorageBuffer, a_elem)
    p_sb_f32 = m.id(); m.emit("types", OpTypePointer, p_sb_f32, SC_StorageBuffer, t_f32)

    # push constants: M N K
    pc_st, pc_ptr, vPC = m.id(), m.id(), m.id()
    m.emit("types", OpTypeStruct, pc_st, t_u32, t_u32, t_u32)
    m.emit("deco", OpDecorate, pc_st, D_Block)
    for i in range(3):
        m.emit("deco", OpMemberDecorate, pc_st, i, D_Offset, 4 * i)
    m.emit("types", OpTypePointer, pc_ptr, SC_PushConstant, pc_st)
    m.emit("types", OpVariable, pc_ptr, vPC, SC_PushConstant)
    p_pc_u32 = m.id(); m.emit("types", OpTypePointer, p_pc_u32, SC_PushConstant, t_u32)

    p_in_v3u, vWG = m.id(), m.id()
    m.emit("types", OpTypePointer, p_in_v3u, SC_Input, t_v3u)
    m.emit("types", OpVariable, p_in_v3u, vWG, SC_Input)
    m.emit("deco", OpDecorate, vWG, D_BuiltIn, BI_WorkgroupId)

    cmA, cmB, cmC = m.id(), m.id(), m.id()
    if mode == "nv":
        scope = cu(3)
        m.emit("types", 5358, cmA, t_f16, scope, cu(BM), cu(BK))
        m.emit("types", 5358, cmB, t_f16, scope, cu(BK), cu(BN))
        m.emit("types", 5358, cmC, t_f32, scope, cu(BM), cu(BN))
        t_true, t_false = m.id(), m.id()
        m.emit("types", 41, t_bool, t_true)
        m.emit("types", 42, t_bool, t_false)
    else:
        scope = cu(2)  # Workgroup
        m.emit("types", OpTypeCooperativeMatrixKHR, cmA, t_f16, scope, cu(BM), cu(BK), cu(0))
        m.emit("types", OpTypeCooperativeMatrixKHR, cmB, t_f16, scope, cu(BK), cu(BN), cu(1))
        m.emit("types", OpTypeCooperativeMatrixKHR, cmC, t_f32, scope, cu(BM), cu(BN), cu(2))
    f0 = m.id(); m.emit("types", OpConstant, t_f32, f0, 0)
    zero = m.id(); m.emit("types", OpConstantComposite, cmC, zero, f0)

    if mode == "tensor":
        t_dim2 = cu(2)
        t_layout = m.id(); m.emit("types", OpTypeTensorLayoutNV, t_layout, t_dim2, cu(0))  # clamp Undefined
        t_bool_false = m.id()
        from_false = 0
        # OpConstantFalse = 42
        m.emit("types", 42, t_bool, t_bool_false)
        t_view_t = m.id(); m.emit("types", OpTypeTensorViewNV, t_view_t, t_dim2, t_bool_false, cu(1), cu(0))

    t_fn = m.id(); m.emit("types", OpTypeFunction, t_fn, t_void)
    main = m.id()
    m.emit("entry", OpEntryPoint, 5, main, "main", vA, vB, vC, vPC, vWG)
    m.emit("exec", OpExecutionMode, main, 17, WG, 1, 1)

    F = "funcs"
    m.emit(F, OpFunction, t_void, main, 0, t_fn)
    l_entry, l_header, l_body, l_cont, l_merge = (m.id() for _ in range(5))
    m.emit(F, OpLabel, l_entry)

    def load_pc(i):
        p, v = m.id(), m.id()
        m.emit(F, OpAccessChain, p_pc_u32, p, vPC, cu(i))
        m.emit(F, OpLoad, t_u32, v, p)
        return v

    def bin(op, t, a, b):
        r = m.id()
        m.emit(F, op, t, r, a, b)
        return r

    M_, N_, K_ = load_pc(0), load_pc(1), load_pc(2)
    wg = m.id(); m.emit(F, OpLoad, t_v3u, wg, vWG)
    wx, wy = m.id(), m.id()
    m.emit(F, OpCompositeExtract, t_u32, wx, wg, 0)
    m.emit(F, OpCompositeExtract, t_u32, wy, wg, 1)
    m0 = bin(OpIMul, t_u32, wx, cu(BM))
    n0 = bin(OpIMul, t_u32, wy, cu(BN))
    if mode == "tensor":
        la0 = m.id(); m.emit(F, OpCreateTensorLayoutNV, t_layout, la0)
        la1 = m.id(); m.emit(F, OpTensorLayoutSetDimensionNV, t_layout, la1, la0, M_, K_)
        la = m.id(); m.emit(F, OpTensorLayoutSetStrideNV, t_layout, la, la1, K_, cu(1))
        lb1 = m.id(); m.emit(F, OpTensorLayoutSetDimensionNV, t_layout, lb1, la0, N_, K_)
        lb = m.id(); m.emit(F, OpTensorLayoutSetStrideNV, t_layout, lb, lb1, K_, cu(1))
        view = m.id(); m.emit(F, OpCreateTensorViewNV, t_view_t, view)

    def load_ab(kv):
        ma, mb = m.id(), m.id()
        if mode == "tensor":
            pa = m.id(); m.emit(F, OpAccessChain, p_sb_a, pa, vA, cu(0), cu(0))
            pb = m.id(); m.emit(F, OpAccessChain, p_sb_a, pb, vB, cu(0), cu(0))
            sa = m.id(); m.emit(F, OpTensorLayoutSliceNV, t_layout, sa, la, m0, cu(BM), kv, cu(BK))
            sb = m.id(); m.emit(F, OpTensorLayoutSliceNV, t_layout, sb, lb, n0, cu(BN), kv, cu(BK))
            undefA, undefB = m.id(), m.id()
            m.emit(F, 1, cmA, undefA)
            m.emit(F, 1, cmB, undefB)
            m.emit(F, OpCooperativeMatrixLoadTensorNV, cmA, ma, pa, undefA, sa, 0, 0)
            m.emit(F, OpCooperativeMatrixLoadTensorNV, cmB, mb, pb, undefB, sb, 0, 1, view)
        else:
            K8 = bin(OpUDiv, t_u32, K_, cu(8))
            k8 = bin(OpUDiv, t_u32, kv, cu(8))
            ia = bin(OpIAdd, t_u32, bin(OpIMul, t_u32, m0, K8), k8)
            ib = bin(OpIAdd, t_u32, bin(OpIMul, t_u32, n0, K8), k8)
            pa = m.id(); m.emit(F, OpAccessChain, p_sb_a, pa, vA, cu(0), ia)
            pb = m.id(); m.emit(F, OpAccessChain, p_sb_a, pb, vB, cu(0), ib)
            if mode == "nv":
                m.emit(F, 5359, cmA, ma, pa, K8, t_false)
                m.emit(F, 5359, cmB, mb, pb, K8, t_true)
            else:
                m.emit(F, OpCooperativeMatrixLoadKHR, cmA, ma, pa, cu(0), K8)  # RowMajor
                m.emit(F, OpCooperativeMatrixLoadKHR, cmB, mb, pb, cu(1), K8)  # ColumnMajor
        return ma, mb

    def mad(a, b, c):
        r = m.id()
        m.emit(F, 5361 if mode == "nv" else OpCooperativeMatrixMulAddKHR, cmC, r, a, b, c)
        return r

    # the entry block: (prefetch) the first step's tiles
    if PF:
        a0, b0 = load_ab(cu(0))
    m.emit(F, OpBranch, l_header)

    m.emit(F, OpLabel, l_header)
    k, acc, knext, accnext = m.id(), m.id(), m.id(), m.id()
    m.emit(F, OpPhi, t_u32, k, cu(0), l_entry, knext, l_cont)
    m.emit(F, OpPhi, cmC, acc, zero, l_entry, accnext, l_cont)
    if PF:
        curA, curB, nxtA, nxtB = m.id(), m.id(), m.id(), m.id()
        m.emit(F, OpPhi, cmA, curA, a0, l_entry, nxtA, l_cont)
        m.emit(F, OpPhi, cmB, curB, b0, l_entry, nxtB, l_cont)
    cond = bin(OpULessThan, t_bool, k, K_)
    m.emit(F, OpLoopMerge, l_merge, l_cont, 0)
    m.emit(F, OpBranchConditional, cond, l_body, l_merge)

    m.emit(F, OpLabel, l_body)
    a_cur = acc
    last_k = bin(128 + 2, t_u32, K_, cu(BK))  # OpISub = 130
    for u in range(U):
        ku = bin(OpIAdd, t_u32, k, cu(u * BK))
        if PF:
            kn = bin(OpIAdd, t_u32, ku, cu(BK))
            # clamp the prefetch to the last step (a redundant load there)
            lt = bin(OpULessThan, t_bool, kn, K_)
            kc = m.id(); m.emit(F, 169, t_u32, kc, lt, kn, last_k)  # OpSelect
            na, nb = load_ab(kc)
            a_cur = mad(curA, curB, a_cur)
            curA, curB = na, nb
        else:
            ma, mb = load_ab(ku)
            a_cur = mad(ma, mb, a_cur)
    # accnext / nxt: copy through OpCopyObject (83) so the phi ids are defined here
    m.emit(F, 83, cmC, accnext, a_cur)
    if PF:
        m.emit(F, 83, cmA, nxtA, curA)
        m.emit(F, 83, cmB, nxtB, curB)
    m.emit(F, OpBranch, l_cont)

    m.emit(F, OpLabel, l_cont)
    m.emit(F, OpIAdd, t_u32, knext, k, cu(BK * U))
    m.emit(F, OpBranch, l_header)

    m.emit(F, OpLabel, l_merge)
    ic = bin(OpIAdd, t_u32, bin(OpIMul, t_u32, m0, N_), n0)
    pc_ = m.id(); m.emit(F, OpAccessChain, p_sb_f32, pc_, vC, cu(0), ic)
    if mode == "nv":
        m.emit(F, 5360, pc_, acc, N_, t_false)
    else:
        m.emit(F, OpCooperativeMatrixStoreKHR, pc_, acc, cu(0), N_)
    m.emit(F, OpReturn)
    m.emit(F, OpFunctionEnd)
    return m.binary()


if __name__ == "__main__":
    out, BM, BN, BK, WG, mode = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6]
    U = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    PF = int(sys.argv[8]) if len(sys.argv) > 8 else 0
    open(out, "wb").write(build(BM, BN, BK, WG, mode, U, PF))
