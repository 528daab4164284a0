// See spirv_khr_rewrite.h. Opcodes and enumerants from the SPIR-V registry
// (spirv.core.grammar.json); the Debian 12 headers predate the KHR ones.
#include "codegen/spirv_khr_rewrite.h"

#include <cstring>
#include <map>
#include <string>

namespace strata::codegen {
namespace {

constexpr uint32_t kMagic = 0x07230203u;
constexpr uint32_t kHeaderWords = 5;
// Core opcodes used here.
constexpr uint32_t kOpExtension = 10, kOpCapability = 17, kOpTypeInt = 21, kOpConstantTrue = 41,
                   kOpConstantFalse = 42, kOpConstant = 43;
// NV and KHR cooperative-matrix opcodes and capabilities.
constexpr uint32_t kOpTypeCoopNV = 5358, kOpLoadNV = 5359, kOpStoreNV = 5360, kOpMulAddNV = 5361,
                   kOpLengthNV = 5362;
constexpr uint32_t kOpTypeCoopKHR = 4456, kOpLoadKHR = 4457, kOpStoreKHR = 4458, kOpMulAddKHR = 4459,
                   kOpLengthKHR = 4460;
constexpr uint32_t kCapCoopNV = 5357, kCapCoopKHR = 6022;
// KHR operand values.
constexpr uint32_t kRowMajor = 0, kColumnMajor = 1;
constexpr uint32_t kUseA = 0, kUseB = 1, kUseAccumulator = 2;

struct Inst {
  uint32_t op = 0;
  std::vector<uint32_t> ops;  // the words after the first
};

std::vector<uint32_t> string_words(const std::string& s) {
  std::vector<uint32_t> w((s.size() + 4) / 4, 0u);  // room for the terminating NUL
  std::memcpy(w.data(), s.data(), s.size());
  return w;
}

std::string literal_string(const std::vector<uint32_t>& ops) {
  std::string s(ops.size() * 4, '\0');
  std::memcpy(s.data(), ops.data(), s.size());
  return s.substr(0, s.find('\0'));
}

const char* use_name(uint32_t use) {
  return use == kUseA ? "A" : use == kUseB ? "B" : "accumulator";
}

}  // namespace

Expected<std::vector<uint32_t>> rewrite_coopmat_nv_to_khr(const std::vector<uint32_t>& spirv) {
  if (spirv.size() < kHeaderWords || spirv[0] != kMagic) return error("SPIR-V rewrite: not a SPIR-V module");
  std::vector<Inst> insts;
  for (size_t i = kHeaderWords; i < spirv.size();) {
    const uint32_t count = spirv[i] >> 16;
    if (count == 0 || i + count > spirv.size())
      return error("SPIR-V rewrite: instruction at word {} has a bad word count {}", i, count);
    insts.push_back(Inst{spirv[i] & 0xFFFFu, std::vector<uint32_t>(spirv.begin() + i + 1, spirv.begin() + i + count)});
    i += count;
  }

  // What the rewrite needs to know: the bool constants' values, the 32-bit unsigned
  // type, every value's type, and the role of each matrix type.
  std::map<uint32_t, bool> bools;
  std::map<uint32_t, uint32_t> type_of;
  uint32_t uint_type = 0;
  bool any_nv = false;
  for (const Inst& in : insts) {
    if (in.op == kOpConstantTrue && in.ops.size() == 2) bools[in.ops[1]] = true;
    if (in.op == kOpConstantFalse && in.ops.size() == 2) bools[in.ops[1]] = false;
    if (in.op == kOpTypeInt && in.ops.size() == 3 && in.ops[1] == 32 && in.ops[2] == 0) uint_type = in.ops[0];
    if (in.op == kOpTypeCoopNV) any_nv = true;
  }
  if (!any_nv) return error("SPIR-V rewrite: the module declares no GL_NV_cooperative_matrix type");
  if (uint_type == 0) return error("SPIR-V rewrite: the module declares no 32-bit unsigned integer type");
  // Result types: any instruction whose first two operands are (type, result) for the
  // opcodes whose values can feed OpCooperativeMatrixMulAddNV.
  for (const Inst& in : insts) {
    switch (in.op) {
      case kOpLoadNV: case kOpMulAddNV: case 61 /*OpLoad*/: case 245 /*OpPhi*/: case 83 /*OpCopyObject*/:
      case 81 /*OpCompositeExtract*/: case 79 /*OpVectorShuffle*/: case 80 /*OpCompositeConstruct*/:
      case 169 /*OpSelect*/: case 127 /*OpFNegate*/: case 142 /*OpMatrixTimesScalar*/: case 133 /*OpFMul*/:
      case 129 /*OpFAdd*/: case 131 /*OpFSub*/: case 115 /*OpFConvert*/: case 57 /*OpFunctionCall*/:
        if (in.ops.size() >= 2) type_of[in.ops[1]] = in.ops[0];
        break;
      default: break;
    }
  }
  std::map<uint32_t, uint32_t> use;  // matrix type -> kUse*
  for (const Inst& in : insts) {
    if (in.op != kOpMulAddNV) continue;
    if (in.ops.size() != 5) return error("SPIR-V rewrite: OpCooperativeMatrixMulAddNV with {} operands", in.ops.size());
    const std::pair<uint32_t, uint32_t> roles[3] = {
        {in.ops[2], kUseA}, {in.ops[3], kUseB}, {in.ops[0], kUseAccumulator}};
    for (size_t r = 0; r < 3; ++r) {
      auto [value, role] = roles[r];
      uint32_t type = value;
      if (r < 2) {
        auto it = type_of.find(value);
        if (it == type_of.end())
          return error("SPIR-V rewrite: the type of OpCooperativeMatrixMulAddNV operand %{} is not known", value);
        type = it->second;
      }
      auto [it, inserted] = use.emplace(type, role);
      if (!inserted && it->second != role)
        return error("SPIR-V rewrite: cooperative-matrix type %{} is used as both {} and {}; KHR types carry one use",
                     type, use_name(it->second), use_name(role));
    }
  }

  // New constants: the two layouts and the three uses, declared just before the first
  // matrix type (after the unsigned type and the size constants it refers to).
  std::vector<uint32_t> header(spirv.begin(), spirv.begin() + kHeaderWords);
  uint32_t bound = header[3];
  const uint32_t row_major = bound++, column_major = bound++;
  const uint32_t use_ids[3] = {bound, bound + 1, bound + 2};
  bound += 3;
  header[3] = bound;

  std::vector<Inst> out;
  bool constants_added = false;
  for (const Inst& in : insts) {
    switch (in.op) {
      case kOpCapability:
        out.push_back(in.ops.size() == 1 && in.ops[0] == kCapCoopNV ? Inst{kOpCapability, {kCapCoopKHR}} : in);
        break;
      case kOpExtension:
        if (literal_string(in.ops) == "SPV_NV_cooperative_matrix") {
          out.push_back(Inst{kOpExtension, string_words("SPV_KHR_cooperative_matrix")});
          out.push_back(Inst{kOpExtension, string_words("SPV_NV_cooperative_matrix2")});
        } else {
          out.push_back(in);
        }
        break;
      case kOpTypeCoopNV: {
        if (in.ops.size() != 5) return error("SPIR-V rewrite: OpTypeCooperativeMatrixNV with {} operands", in.ops.size());
        if (!constants_added) {
          out.push_back(Inst{kOpConstant, {uint_type, row_major, kRowMajor}});
          out.push_back(Inst{kOpConstant, {uint_type, column_major, kColumnMajor}});
          for (uint32_t u = 0; u < 3; ++u) out.push_back(Inst{kOpConstant, {uint_type, use_ids[u], u}});
          constants_added = true;
        }
        auto it = use.find(in.ops[0]);
        if (it == use.end())
          return error("SPIR-V rewrite: cooperative-matrix type %{} is not used by a multiply-add, so its use is "
                       "unknown",
                       in.ops[0]);
        Inst t{kOpTypeCoopKHR, in.ops};
        t.ops.push_back(use_ids[it->second]);
        out.push_back(std::move(t));
        break;
      }
      case kOpLoadNV:
      case kOpStoreNV: {
        const bool load = in.op == kOpLoadNV;
        const size_t first = load ? 2 : 1;  // the operand after the pointer (and, for a store, the object)
        if (in.ops.size() < first + 3) return error("SPIR-V rewrite: cooperative-matrix load/store too short");
        const uint32_t stride = in.ops[first + 1], column = in.ops[first + 2];
        auto b = bools.find(column);
        if (b == bools.end())
          return error("SPIR-V rewrite: the column-major operand %{} is not a boolean constant", column);
        Inst r{load ? kOpLoadKHR : kOpStoreKHR, {}};
        r.ops.assign(in.ops.begin(), in.ops.begin() + first + 1);  // (type, result,) pointer (, object)
        r.ops.push_back(b->second ? column_major : row_major);
        r.ops.push_back(stride);
        r.ops.insert(r.ops.end(), in.ops.begin() + first + 3, in.ops.end());  // memory operands
        out.push_back(std::move(r));
        break;
      }
      case kOpMulAddNV: out.push_back(Inst{kOpMulAddKHR, in.ops}); break;
      case kOpLengthNV: out.push_back(Inst{kOpLengthKHR, in.ops}); break;
      default: out.push_back(in);
    }
  }

  std::vector<uint32_t> words = std::move(header);
  for (const Inst& in : out) {
    words.push_back(static_cast<uint32_t>(in.ops.size() + 1) << 16 | in.op);
    words.insert(words.end(), in.ops.begin(), in.ops.end());
  }
  return words;
}

}  // namespace strata::codegen
