// lower_attention: attention -> kernels/attention_coop_rows.comp, attention_coop_dsplit.comp,
// attention_coop.comp (tensor cores) or
// kernels/attention.comp (portable), softmax -> kernels/softmax.comp.
//
//   attention(q[..., Tq, D], k[..., Tk, D], v[..., Tk, Dv])  flash style: no score
//       matrix exists. The leading dims are heads.
//       Kernel choice, when the target has tensor cores (Target::tensor_cores), q, k
//       and v are stored f16, D and Dv are multiples of 16 and no key windows are
//       needed (16×16×16 cooperative matrices through coopmat.glsl; COOPMAT 1 =
//       GL_NV_cooperative_matrix, 2 = its plain-GLSL emulation):
//         attention_coop_rows.comp (the query rows split across the subgroups, 16
//         each; the workgroup stages K and V blocks once for all of them) for head
//         dims up to 128 without a frame mask, where every dispatch has a workgroup's
//         rows (rows_tiles; CodegenOptions::attention_rows picks the tile or turns it
//         off);
//         else attention_coop_dsplit.comp (the head dims split across NSG subgroups, Q and
//         O in registers, K and V read straight into fragments) when every dispatch
//         has at least one 32-row block of query rows (a partial last block overlaps
//         the one before; keys in any number, PARTIAL_KEYS past a multiple of 32) and
//         D, Dv split evenly (dsplit_tiles);
//         else attention_coop.comp when a tile configuration fits the target's
//         shared memory (coop_tiles: BR query rows × BC keys per step, D in chunks
//         of DC, NSG subgroups of the target's subgroup size);
//       otherwise attention.comp: a workgroup per 16 query rows of a head walks all
//       keys with an online softmax. Frame-causal keys (frame_tokens) take
//       attention_coop_dsplit.comp or attention.comp, which generate the mask
//       (FRAME_TOKENS).
//       Dispatches cover whole heads when they fit the storage-buffer range (several
//       heads per dispatch), else query chunks of one head: at most
//       CodegenOptions::attention_query_chunk rows (0: as many as fit). When one
//       head's k or v exceeds the range, dispatches also walk key windows (a
//       multiple of the key block) one after another, carrying the online-softmax
//       state in scratch memory (KEY_WINDOWS, see attention.comp): bit-identical
//       to one dispatch over all keys. Only the portable kernel walks key windows.
//   softmax(x[..., C])  a workgroup per row; dispatches cover runs of whole rows that
//       fit the range. Rows of 2048 to 65 536 (attention scores) are read once into
//       registers (softmax.comp ROW_REGS), up to 64 elements per invocation, their
//       maxima and sums combined by subgroup operations; longer rows keep 32 per
//       invocation in registers and what fits in shared memory (SH_ROW), the rest in
//       two online sweeps (ONLINE: a running maximum and sum, then the output).
#include "codegen/lowering.h"
#include "codegen/storage.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace strata::codegen {
namespace {

using runtime::Access;

// attention.comp tiles: BR query rows × BC keys per step, D in chunks of DC, WG
// invocations.
constexpr uint32_t kRows = 16, kKeys = 32, kDChunk = 64, kAttentionWg = 128;
constexpr uint32_t kSoftmaxWg = 128;
constexpr uint64_t kSoftmaxRegisterRow = 2048;  // rows at least this long: softmax.comp ROW_REGS
constexpr uint64_t kSoftmaxRowRegs = 64;        // at most this many per invocation, else ONLINE

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }




int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

uint32_t next_pow2(uint64_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// ---- attention -----------------------------------------------------------------

struct AttentionDims {
  uint64_t heads, tq, tk, d, dv;
};

// How the work is cut into dispatches: `heads_per` heads × `rows_per` query rows ×
// `keys_per` keys (tk: no key windows).
struct AttentionSplit {
  uint64_t heads_per = 1, rows_per = 0, keys_per = 0;
  bool key_windows = false;
};

Expected<AttentionSplit> choose_split(const Lowering& l, const Node& node, const AttentionDims& a) {
  // A window of `elems` elements starting anywhere fits when elems·4 plus the worst
  // alignment slack is within the range.
  const uint64_t room = (l.target().max_storage_buffer_range - (l.offset_alignment() - 4)) / 4;
  AttentionSplit s;
  s.keys_per = a.tk;
  if (a.tk * a.d > room || a.tk * a.dv > room) {
    s.key_windows = true;
    s.keys_per = std::min(room / a.d, room / a.dv) / kKeys * kKeys;
    if (s.keys_per == 0)
      return l.fail(node, fmt::format("{} keys of {} / {} floats exceed the storage-buffer range {}", kKeys, a.d,
                                      a.dv, l.target().max_storage_buffer_range));
  }
  const int64_t chunk = l.options().attention_query_chunk;
  s.rows_per = chunk > 0 ? std::min<uint64_t>(a.tq, static_cast<uint64_t>(chunk)) : a.tq;
  s.rows_per = std::min({s.rows_per, room / a.d, room / a.dv});
  if (s.key_windows) s.rows_per = std::min(s.rows_per, room / (a.dv + 2));  // the carried state
  if (s.rows_per == 0) return l.fail(node, "one query row exceeds the storage-buffer range");
  if (s.rows_per == a.tq && !s.key_windows) {
    const uint64_t per_head = std::max({a.tq * a.d, a.tk * a.d, a.tk * a.dv, a.tq * a.dv});
    s.heads_per = std::clamp<uint64_t>(room / per_head, 1, a.heads);
  }
  return s;
}

// attention_coop.comp tiles (see its header for the shared-memory formula).
struct CoopTiles {
  uint32_t br = 0, bc = 0, dc = 0, nsg = 0;
  uint64_t shared_bytes = 0;
};

uint64_t coop_shared_bytes(uint64_t br, uint64_t bc, uint64_t dc, uint64_t dv, uint64_t nsg, uint64_t wg) {
  const uint64_t parts = wg >= 2 * br && bc % (wg / br) == 0 ? wg / br : 1;  // softmax invocations per row
  const uint64_t halves = std::max((br + bc) * (dc + 8), bc * (dv + 8)) + br * (bc + 8);
  const uint64_t floats = std::max(br * (bc + 4), nsg * 256) + br + (parts > 1 ? wg : 2 * br);
  return halves * 2 + floats * 4;
}

// The largest tiles that fit the target's shared memory: BR × BC from (64, 32) down
// to (16, 16), then the widest D chunk DC (a multiple of 16 dividing D, at most 256).
// NSG subgroups: up to 8, no more than Dv's column tiles (each subgroup owns whole
// 16-column tiles of the output) nor 1024 invocations. A subgroup holds at most 16
// output accumulators (BR/16 row tiles × its column tiles) where BR > 16: 128 f32
// registers per lane at subgroup size 32.
std::optional<CoopTiles> coop_tiles(const Lowering& l, const AttentionDims& a) {
  const uint32_t sg = l.target().subgroup_size;
  if (sg == 0 || sg > 1024) return std::nullopt;
  const uint32_t nsg = static_cast<uint32_t>(std::min<uint64_t>({8, a.dv / 16, 1024 / sg}));
  if (nsg == 0) return std::nullopt;
  const uint64_t column_tiles = ceil_div(a.dv / 16, nsg);
  constexpr std::pair<uint32_t, uint32_t> kShapes[] = {{64, 32}, {64, 16}, {32, 32}, {32, 16}, {16, 16}};
  for (const auto& [br, bc] : kShapes) {
    if (br > 16 && column_tiles * (br / 16) > 16) continue;
    for (uint64_t dc = std::min<uint64_t>(a.d, 256) / 16 * 16; dc >= 16; dc -= 16) {
      if (a.d % dc != 0) continue;
      const uint64_t bytes = coop_shared_bytes(br, bc, dc, a.dv, nsg, uint64_t(nsg) * sg);
      if (bytes <= l.target().max_shared_memory_bytes)
        return CoopTiles{br, bc, static_cast<uint32_t>(dc), nsg, bytes};
    }
  }
  return std::nullopt;
}

// attention_coop_dsplit.comp's configuration: 32 query rows × BC keys per step, NSG
// subgroups each owning D/NSG and Dv/NSG of the head dims.
constexpr uint32_t kDsplitRows = 32, kDsplitKeys = 32;
struct DsplitTiles {
  uint32_t nsg = 0;
  uint64_t shared_bytes = 0;
};

// The subgroups (8, 4, 2 or 1) that split D and Dv into whole 16-column tiles, at
// most 4 per subgroup (its Q and O tiles stay in registers: 2 row tiles × 4 = 8 A
// fragments and 8 accumulators). Head dims of 8 tiles or more (D >= 128) take the
// fewest such subgroups: every subgroup does as much MMA work per key block as it can
// hold and the score block sums as few partials as it can (512: 8 subgroups, the
// tuned VAE case, unchanged; 128: 2 instead of 8, attention 238 -> 164 ms in a Z-Image
// step at 1024² on the H200). Smaller head
// dims keep the most subgroups (not measured otherwise). WG = NSG·subgroup must be a multiple of the 32
// rows and LPR = WG / 32 lanes per row a power of two within a subgroup that divides
// the key block; the shared memory (the kernel's header) within the target's.
std::optional<DsplitTiles> dsplit_tiles(const Lowering& l, const AttentionDims& a, const AttentionSplit& split) {
  const uint64_t sg = l.target().subgroup_size;
  // Every dispatch's rows at least a block (a partial last block overlaps the one
  // before) and keys in any number (PARTIAL_KEYS). Shapes with partial blocks took
  // attention_coop.comp when unmasked until MiniMax-H3's tiles of 1796 tokens (head dim
  // 64) ran it at 11.8 TFLOP/s on the H200.
  const uint64_t chunks = ceil_div(a.tq, split.rows_per);
  const uint64_t last_rows = a.tq - (chunks - 1) * split.rows_per;
  if (last_rows < kDsplitRows || (chunks > 1 && split.rows_per % kDsplitRows != 0)) return std::nullopt;
  const bool fewest = a.d / 16 >= 8 && a.dv / 16 >= 8;
  const std::array<uint32_t, 4> order = fewest ? std::array<uint32_t, 4>{1, 2, 4, 8} : std::array<uint32_t, 4>{8, 4, 2, 1};
  for (uint32_t nsg : order) {
    if ((a.d / 16) % nsg != 0 || (a.dv / 16) % nsg != 0) continue;
    if (a.d / 16 / nsg > 4 || a.dv / 16 / nsg > 4) continue;
    const uint64_t wg = nsg * sg;
    if (wg > 1024 || wg % kDsplitRows != 0) continue;
    const uint64_t lpr = wg / kDsplitRows;
    if (lpr > sg || (lpr & (lpr - 1)) != 0 || kDsplitKeys % lpr != 0) continue;
    const uint64_t bytes = 4 * nsg * kDsplitRows * (kDsplitKeys + 8) + 2 * kDsplitRows * (kDsplitKeys + 8) +
                           4 * 2 * kDsplitRows;
    if (bytes <= l.target().max_shared_memory_bytes) return DsplitTiles{nsg, bytes};
  }
  return std::nullopt;
}

// attention_coop_rows.comp's configuration: NSG subgroups of RS (16 or 32) query rows,
// BC keys per block (its header: head dims up to 128, no frame mask). 32 rows store P
// over the scores (P_ALIAS).
// Natively the softmax runs on the score accumulators in registers (REG_SOFTMAX, the
// kernel's header): no scores, P or factors in shared memory. On the H200 Z-Image 1024²'s
// attention 54.4 → 42.9 ms a step and MiniMax-H3 720p's 227.7 → 200.5 ms a clip run. The
// emulation keeps the shared-memory softmax
// (REG_SOFTMAX there only through kernel_defines, for its test): lavapipe compiles it
// faster.
struct RowsTiles {
  uint32_t nsg = 0, bc = 0, rs = 16;
  bool reg_softmax = false;
  uint64_t shared_bytes = 0;
  bool p_alias() const { return rs == 32 && !reg_softmax; }
};

uint64_t rows_shared_bytes(uint64_t nsg, uint64_t bc, uint64_t d, uint64_t dv, uint64_t rs, uint64_t fn,
                           bool reg_softmax) {
  const uint64_t kv = 2 * bc * (d + 8) + 2 * bc * (dv + 8);
  if (reg_softmax) return std::max(kv, rs * fn * 4 + rs * 32);  // the layout check's codes
  const uint64_t p = rs == 32 ? 0 : 2 * rs * (bc + 8);
  return kv + nsg * (4 * rs * (bc + 4) + p + 4 * rs);
}

// The accumulator width the rows kernel takes (its CM_N): 32 natively with flexible
// dimensions where the keys per block and Dv allow, else 16.
uint32_t rows_fn(const Lowering& l, uint32_t bc, uint64_t dv) {
  const bool native = l.target().tensor_cores == TensorCores::nv_coopmat;
  return native && l.target().coopmat_flexible && bc % 32 == 0 && dv % 32 == 0 ? 32 : 16;
}

// The tile: CodegenOptions::attention_rows "NxBC[xRS]", else 8 subgroups (128 rows per
// workgroup, so a workgroup reads K and V once for 128 rows, against the dsplit
// kernel's 32) and 32 keys, with fewer subgroups where a dispatch has fewer rows or
// the shared memory is short (lavapipe's 32 KiB: 4). On the H200 at Z-Image's head dim
// 8 × 32 ran a step's attention 1.6× faster than the dsplit kernel, 4 × 32 slower. Head dims
// up to 64 (MiniMax-H3) take 4
// subgroups first: 23 808 bytes of shared memory, under the H200's 24 KiB line for two
// workgroups per multiprocessor; MiniMax-H3 512² × 39 attention 149.5 → 142.5 ms. On devices
// with flexible dimensions they took 4 subgroups of 32 rows and
// 16 keys first (15 360 bytes and 208 registers at D = 64): 142.3 → 126.5 ms (at D = 128 the
// same as 8 × 32, at 255 registers and ~400 bytes spilled per lane, and
// 32 keys with 32 rows ran 2.6-2.8× slower). With the softmax in registers (natively)
// every head dim takes 8 × 32 first again: MiniMax-H3 720p's attention 202.3 → 155.4 ms
// a clip run against 4 × 16 × 32, and head dims above 64 8 × 64 before it
// (below). Every dispatch's rows
// at least one workgroup's (a partial last block overlaps the one before); the shared
// memory within the target's. RS = 32 rows per subgroup natively needs flexible
// dimensions (32 × 16 A fragments). Errors: a malformed tile, or an asked one that does
// not fit the shared memory or the device.
Expected<std::optional<RowsTiles>> rows_tiles(const Lowering& l, const Node& node, const AttentionDims& a,
                                               const AttentionSplit& split, uint64_t frame_tokens) {
  const std::string& asked = l.options().attention_rows;
  if (asked == "off" || frame_tokens > 0 || a.d > 128 || a.dv > 128) return std::optional<RowsTiles>{};
  const uint32_t sg = l.target().subgroup_size;
  struct Candidate {
    uint32_t nsg, bc, rs;
  };
  std::vector<Candidate> candidates = {{8, 32, 16}, {4, 32, 16}, {2, 32, 16}, {1, 32, 16}};
  const bool reg_softmax = l.target().tensor_cores == TensorCores::nv_coopmat;
  // Head dims above 64 in registers take 64 keys per block first: half the workgroup
  // barriers per key for the same staged bytes per multiply-add (34 816 bytes at D = 128,
  // still one workgroup of 8 subgroups per multiprocessor). Z-Image 1024²'s attention
  // 5.29-5.33 → 4.70-4.71 ms over 2 layers on the H200.
  if (reg_softmax && a.d > 64 && a.dv > 64) candidates.insert(candidates.begin(), Candidate{8, 64, 16});
  if (a.d <= 64 && a.dv <= 64 && !reg_softmax) {
    candidates.erase(candidates.begin());
    if (l.target().tensor_cores == TensorCores::nv_coopmat && l.target().coopmat_flexible)
      candidates.insert(candidates.begin(), Candidate{4, 16, 32});
  }
  if (!asked.empty()) {
    uint32_t n = 0, keys = 0, rows = 16;
    char end = 0;
    const int got = std::sscanf(asked.c_str(), "%ux%ux%u%c", &n, &keys, &rows, &end);
    if ((got != 2 && got != 3) || n == 0 || n > 32 || keys == 0 || keys % 16 != 0 || keys > 256 ||
        (rows != 16 && rows != 32))
      return l.fail(node, fmt::format("attention tile '{}' is not NxBC[xRS] (N subgroups of RS rows, 1 to 32; BC "
                                      "keys per block, a multiple of 16 up to 256; RS 16 or 32) or off",
                                      asked));
    if (rows == 32 && l.target().tensor_cores == TensorCores::nv_coopmat && !l.target().coopmat_flexible)
      return l.fail(node, fmt::format("attention tile '{}': 32 rows per subgroup need cooperative matrices of "
                                      "flexible dimensions, which the device lacks",
                                      asked));
    candidates = {{n, keys, rows}};
  }
  if (sg == 0) return std::optional<RowsTiles>{};
  const uint64_t chunks = ceil_div(a.tq, split.rows_per);
  const uint64_t last_rows = a.tq - (chunks - 1) * split.rows_per;
  for (const auto& [nsg, bc, rs] : candidates) {
    const uint32_t lpr = sg >= rs ? sg / rs : 1;
    if (bc % lpr != 0 || bc / lpr % 8 != 0) continue;  // 8 weights per store
    const uint64_t br = uint64_t(rs) * nsg;
    if (last_rows < br || (chunks > 1 && split.rows_per % br != 0)) continue;
    if (uint64_t(nsg) * sg > 1024) continue;
    const uint64_t bytes = rows_shared_bytes(nsg, bc, a.d, a.dv, rs, rows_fn(l, bc, a.dv), reg_softmax);
    if (bytes <= l.target().max_shared_memory_bytes)
      return std::optional<RowsTiles>{RowsTiles{nsg, bc, rs, reg_softmax, bytes}};
    if (!asked.empty())
      return l.fail(node, fmt::format("attention tile '{}' needs {} bytes of shared memory, the target has {}", asked,
                                      bytes, l.target().max_shared_memory_bytes));
  }
  return std::optional<RowsTiles>{};
}

// Whether the cooperative-matrix kernels can run this node (q, k, v f16 read 8
// halves at a time: with D, Dv multiples of 16 every row start and window base is a
// multiple of 8 halves; no key windows).
bool coop_applies(const Lowering& l, ValueId q, ValueId k, ValueId v, const AttentionDims& a,
                  const AttentionSplit& split) {
  if (l.target().tensor_cores == TensorCores::none) return false;
  if (l.storage(q) != DType::f16 || l.storage(k) != DType::f16 || l.storage(v) != DType::f16) return false;
  return a.d % 16 == 0 && a.dv % 16 == 0 && !split.key_windows;
}

Status lower_attention_op(Lowering& l, const Node& node) {
  const ValueId q = node.inputs[0], k = node.inputs[1], v = node.inputs[2], o = node.outputs[0];
  const Shape& qs = l.shape(q);
  const size_t r = qs.size();
  const AttentionDims a{static_cast<uint64_t>(product(qs, 0, r - 2)), static_cast<uint64_t>(qs[r - 2]),
                        static_cast<uint64_t>(l.shape(k)[r - 2]), static_cast<uint64_t>(qs[r - 1]),
                        static_cast<uint64_t>(l.shape(v)[r - 1])};
  if (num_elements(l.shape(o)) == 0) return Status::ok();
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {q, k, v, o}));
  if (a.tk == 0) return l.fail(node, "attention over zero keys");
  STRATA_ASSIGN_OR_RETURN(AttentionSplit split, choose_split(l, node, a));
  // Frame-causal keys (attention's frame_tokens): the dsplit kernel or the portable one
  // (attention_coop.comp has no mask).
  const uint64_t frame_tokens = static_cast<uint64_t>(std::max<int64_t>(node.attrs.get_int("frame_tokens", 0), 0));
  const bool coop_ok = coop_applies(l, q, k, v, a, split);
  std::optional<RowsTiles> rows;
  if (coop_ok && l.options().attention_dsplit) {
    STRATA_ASSIGN_OR_RETURN(rows, rows_tiles(l, node, a, split, frame_tokens));
  }
  const std::optional<DsplitTiles> dsplit =
      coop_ok && !rows && (l.options().attention_dsplit || frame_tokens > 0) ? dsplit_tiles(l, a, split) : std::nullopt;
  const std::optional<CoopTiles> coop =
      coop_ok && !rows && !dsplit && frame_tokens == 0 ? coop_tiles(l, a) : std::nullopt;
  const char* coop_mode = l.target().tensor_cores == TensorCores::nv_coopmat ? "1" : "2";

  KernelKey key;
  uint32_t rows_per_group = kRows, wg = kAttentionWg;
  if (rows) {
    rows_per_group = rows->rs * rows->nsg;
    wg = rows->nsg * l.target().subgroup_size;
    key.file = "attention_coop_rows.comp";
    key.defines = {{"D", std::to_string(a.d)},
                   {"DV", std::to_string(a.dv)},
                   {"BC", std::to_string(rows->bc)},
                   {"WG", std::to_string(wg)},
                   {"CM_SG", std::to_string(l.target().subgroup_size)},
                   {"COOPMAT", coop_mode}};
    add_type_define(key.defines, "O_T", l.storage(o));
    if (a.tk % rows->bc != 0) key.defines["PARTIAL_KEYS"] = "1";
    if (rows->rs != 16) key.defines["CM_M"] = std::to_string(rows->rs);
    if (rows->p_alias()) key.defines["P_ALIAS"] = "1";
    if (rows->reg_softmax) key.defines["REG_SOFTMAX"] = "1";
    // Flexible dimensions (the H200): 16 × 32 score and output accumulators, the SPIR-V
    // rewritten to KHR; half the B fragment loads and MMA instructions per key block.
    const bool native = l.target().tensor_cores == TensorCores::nv_coopmat;
    if (rows_fn(l, rows->bc, a.dv) == 32) key.defines["CM_N"] = "32";
    if (native && (key.defines.count("CM_N") || rows->rs != 16)) key.defines["COOPMAT_KHR"] = "1";
    key.bindings = 4;
    key.push_constant_bytes = 10 * 4;
    key.subgroup_ops = runtime::subgroup_ops::basic | runtime::subgroup_ops::shuffle | runtime::subgroup_ops::vote;
  } else if (dsplit) {
    rows_per_group = kDsplitRows;
    wg = dsplit->nsg * l.target().subgroup_size;
    key.file = "attention_coop_dsplit.comp";
    key.defines = {{"D", std::to_string(a.d)},
                   {"DV", std::to_string(a.dv)},
                   {"BC", std::to_string(kDsplitKeys)},
                   {"WG", std::to_string(wg)},
                   {"CM_SG", std::to_string(l.target().subgroup_size)},
                   {"COOPMAT", coop_mode}};
    add_type_define(key.defines, "O_T", l.storage(o));
    if (frame_tokens > 0) key.defines["FRAME_TOKENS"] = std::to_string(frame_tokens);
    if (a.tk % kDsplitKeys != 0) key.defines["PARTIAL_KEYS"] = "1";
    key.bindings = 4;
    key.push_constant_bytes = (10 + (frame_tokens > 0 ? 2 : 0)) * 4;
    key.subgroup_ops = runtime::subgroup_ops::basic | runtime::subgroup_ops::shuffle;
  } else if (coop) {
    rows_per_group = coop->br;
    wg = coop->nsg * l.target().subgroup_size;
    key.file = "attention_coop.comp";
    key.defines = {{"D", std::to_string(a.d)},        {"DV", std::to_string(a.dv)},
                   {"BR", std::to_string(coop->br)},  {"BC", std::to_string(coop->bc)},
                   {"DC", std::to_string(coop->dc)},  {"WG", std::to_string(wg)},
                   {"CM_SG", std::to_string(l.target().subgroup_size)},
                   {"COOPMAT", coop_mode}};
    add_type_define(key.defines, "O_T", l.storage(o));
    key.bindings = 4;
    key.push_constant_bytes = 10 * 4;
  } else {
    const uint32_t dc = static_cast<uint32_t>(std::min<uint64_t>(a.d, kDChunk));
    const uint32_t ct = std::clamp<uint32_t>(next_pow2(a.dv), kAttentionWg / kRows, kAttentionWg);
    const uint32_t shared_bytes = (kRows * dc + kKeys * (dc + 1) + kRows * (kKeys + 1) + 3 * kRows) * 4;
    if (shared_bytes > l.target().max_shared_memory_bytes)
      return l.fail(node, fmt::format("attention tile needs {} bytes of shared memory, the target has {}",
                                      shared_bytes, l.target().max_shared_memory_bytes));
    key.file = "attention.comp";
    key.defines = {{"D", std::to_string(a.d)},         {"DV", std::to_string(a.dv)},
                   {"BR", std::to_string(kRows)},      {"BC", std::to_string(kKeys)},
                   {"DC", std::to_string(dc)},         {"WG", std::to_string(kAttentionWg)},
                   {"CT", std::to_string(ct)}};
    add_type_define(key.defines, "Q_T", l.storage(q));
    add_type_define(key.defines, "K_T", l.storage(k));
    add_type_define(key.defines, "V_T", l.storage(v));
    add_type_define(key.defines, "O_T", l.storage(o));
    key.defines["KEY_WINDOWS"] = split.key_windows ? "1" : "0";
    if (frame_tokens > 0) key.defines["FRAME_TOKENS"] = std::to_string(frame_tokens);
    key.bindings = split.key_windows ? 5 : 4;
    key.push_constant_bytes = (split.key_windows ? 12 : 10) * 4 + (frame_tokens > 0 ? 2 * 4 : 0);
  }
  key.defines["ROUND"] = round_define(l.type(o).dtype);
  key.workgroup_size = {wg, 1, 1};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));

  const float scale = static_cast<float>(node.attrs.get_float("scale"));
  // The carried state of one query chunk (KEY_WINDOWS): m, l and DV outputs per row.
  const Location state =
      split.key_windows ? l.scratch(node, split.rows_per * (a.dv + 2) * 4) : Location{};
  const uint64_t windows = ceil_div(a.tk, split.keys_per);
  for (uint64_t h0 = 0; h0 < a.heads; h0 += split.heads_per) {
    const uint64_t heads = std::min(split.heads_per, a.heads - h0);
    for (uint64_t r0 = 0; r0 < a.tq; r0 += split.rows_per) {
      const uint64_t rows = std::min(split.rows_per, a.tq - r0);
      // Windows: from the first head's first row to the last head's last row (with
      // one head per dispatch when rows are chunked, so no window spans other rows).
      const uint64_t q_span = ((heads - 1) * a.tq + rows);
      const Lowering::ElementWindow qw = l.element_window(q, (h0 * a.tq + r0) * a.d, q_span * a.d, Access::read);
      const Lowering::ElementWindow ow = l.element_window(o, (h0 * a.tq + r0) * a.dv, q_span * a.dv, Access::write);
      for (uint64_t w = 0; w < windows; ++w) {
        const uint64_t key0 = w * split.keys_per, keys = std::min(split.keys_per, a.tk - key0);
        const uint64_t k_first = split.key_windows ? h0 * a.tk + key0 : h0 * a.tk;
        const uint64_t k_count = split.key_windows ? keys : heads * a.tk;
        const Lowering::ElementWindow kw = l.element_window(k, k_first * a.d, k_count * a.d, Access::read);
        const Lowering::ElementWindow vw = l.element_window(v, k_first * a.dv, k_count * a.dv, Access::read);
        // attention_coop.comp reads q, k, v 8 halves at a time from the window base.
        if ((coop || dsplit || rows) && (qw.base % 8 != 0 || kw.base % 8 != 0 || vw.base % 8 != 0))
          return l.fail(node, fmt::format("attention_coop: window bases {} / {} / {} are not multiples of 8 halves",
                                          qw.base, kw.base, vw.base));
        PushConstants push;
        push.u32(static_cast<uint32_t>(heads)).u32(static_cast<uint32_t>(rows)).u32(static_cast<uint32_t>(keys));
        push.u32(heads > 1 ? static_cast<uint32_t>(a.tq * a.d) : 0u);
        push.u32(heads > 1 ? static_cast<uint32_t>(a.tq * a.dv) : 0u);
        push.u32(qw.base).u32(kw.base).u32(vw.base).u32(ow.base).f32(scale);
        std::vector<runtime::BindingDesc> bindings = {qw.binding, kw.binding, vw.binding, ow.binding};
        if (split.key_windows) {
          push.u32(w == 0 ? 1u : 0u).u32(w + 1 == windows ? 1u : 0u);
          bindings.push_back(Lowering::bind_scratch(state, Access::read_write));
        }
        if (frame_tokens > 0) push.u32(static_cast<uint32_t>(r0)).u32(static_cast<uint32_t>(key0));
        const uint64_t groups = heads * ceil_div(rows, rows_per_group);
        l.dispatch(pipe, std::move(bindings), push, l.grid_1d(groups * wg, wg), node,
                   windows == 1 ? "" : fmt::format("keys {}/{}", w + 1, windows));
      }
    }
  }
  return Status::ok();
}

// ---- softmax -------------------------------------------------------------------

Status lower_softmax(Lowering& l, const Node& node) {
  const ValueId x = node.inputs[0], y = node.outputs[0];
  const Shape& xs = l.shape(x);
  const uint64_t elems = num_elements(xs);
  if (elems == 0) return Status::ok();
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {x, y}));
  const uint64_t cols = xs.empty() ? 1 : xs.back(), rows = elems / cols;
  const uint64_t room = (l.target().max_storage_buffer_range - (l.offset_alignment() - 4)) / 4;
  const uint64_t rows_per = std::min(rows, room / cols);
  if (rows_per == 0)
    return l.fail(node, fmt::format("one softmax row ({} floats) exceeds the storage-buffer range {}", cols,
                                    l.target().max_storage_buffer_range));

  // Long rows (attention scores, passes/attention_gemms.cpp) stay in registers, read
  // once: up to kSoftmaxRowRegs elements per invocation of up to 1024. Past 32 they
  // spill on the H200, and still ran faster than every online variant measured
  // (Flux 2048²'s 65 536 columns: 16.6 ms against 18.8-21.0). Longer rows take the online
  // variant: 32 elements per invocation kept
  // in registers and as many more as the shared memory holds (SH_ROW, after the
  // kernel's 9·WG bytes of partials), the rest in two online sweeps.
  uint32_t wg = kSoftmaxWg, row_regs = 0, shared_row = 0;
  bool online = false;
  if (cols >= kSoftmaxRegisterRow) {
    while (wg < 1024 && wg * 32 < cols) wg *= 2;
    row_regs = static_cast<uint32_t>(std::min<uint64_t>(ceil_div(cols, wg), kSoftmaxRowRegs));
    if (ceil_div(cols, wg) > kSoftmaxRowRegs) {
      row_regs = 32;
      online = true;
      const uint64_t partials = 9ull * wg, shared = l.target().max_shared_memory_bytes;  // bytes
      const uint64_t fit = shared > partials ? (shared - partials) / (4ull * wg) : 0;
      shared_row = static_cast<uint32_t>(std::min<uint64_t>(fit, ceil_div(cols, wg) - 32));
    }
  }
  KernelKey key;
  key.file = "softmax.comp";
  key.defines = {{"WG", std::to_string(wg)}};
  if (row_regs > 0) key.defines["ROW_REGS"] = std::to_string(row_regs);
  if (online) key.defines["ONLINE"] = "1";
  if (shared_row > 0) key.defines["SH_ROW"] = std::to_string(shared_row);
  if (row_regs > 0 || online) key.subgroup_ops = runtime::subgroup_ops::basic | runtime::subgroup_ops::arithmetic;
  add_type_define(key.defines, "X_T", l.storage(x));
  add_type_define(key.defines, "Y_T", l.storage(y));
  key.defines["ROUND"] = round_define(l.type(y).dtype);
  key.bindings = 2;
  key.push_constant_bytes = 3 * 4;
  key.workgroup_size = {wg, 1, 1};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));

  for (uint64_t r0 = 0; r0 < rows; r0 += rows_per) {
    const uint64_t count = std::min(rows_per, rows - r0);
    const Lowering::ElementWindow xw = l.element_window(x, r0 * cols, count * cols, Access::read);
    const Lowering::ElementWindow yw = l.element_window(y, r0 * cols, count * cols, Access::write);
    if (xw.base != yw.base)
      return l.fail(node, fmt::format("input and output windows are misaligned ({} vs {} elements past the offset)",
                                      xw.base, yw.base));
    PushConstants push;
    push.u32(static_cast<uint32_t>(cols)).u32(static_cast<uint32_t>(count)).u32(xw.base);
    l.dispatch(pipe, {xw.binding, yw.binding}, push, l.grid_1d(count * wg, wg), node);
  }
  return Status::ok();
}

// ---- block_softmax (the folded softmax's block weights) -------------------------

Status lower_block_softmax(Lowering& l, const Node& node) {
  const ValueId e = node.inputs[0], c = node.outputs[0];
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {e, c}));
  const Shape& es = l.shape(e);
  const int64_t block = node.attrs.get_int("block");
  const uint64_t rows = static_cast<uint64_t>(es[0]), cols = static_cast<uint64_t>(es[1]);
  const uint64_t blocks = cols / static_cast<uint64_t>(block + 2), n = blocks * static_cast<uint64_t>(block);
  if (rows == 0 || blocks == 0) return Status::ok();
  if (l.storage(e) != DType::f16 || cols % 2 != 0 || l.location(e).offset % 4 != 0)
    return l.fail(node, "block_softmax reads f16 exp_blocks rows of an even width as 32-bit words");
  if (l.storage(c) != DType::f16 || blocks % 2 != 0 || l.location(c).offset % 4 != 0)
    return l.fail(node, "block_softmax writes f16 weights two to a 32-bit word: an even number of blocks per row");
  const uint64_t range = l.target().max_storage_buffer_range;
  if (rows * cols * 2 > range || rows * blocks * 2 > range)
    return l.fail(node, fmt::format("block_softmax binds its operands whole, above the storage-buffer range {}", range));
  constexpr uint32_t kWg = 256;
  KernelKey key;
  key.file = "block_softmax.comp";
  key.defines = {{"WG", std::to_string(kWg)}};
  key.bindings = 2;
  key.push_constant_bytes = 4 * 4;
  key.workgroup_size = {kWg, 1, 1};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  PushConstants push;
  push.u32(static_cast<uint32_t>(rows)).u32(static_cast<uint32_t>(blocks));
  push.u32(static_cast<uint32_t>(cols / 2)).u32(static_cast<uint32_t>(n / 2));
  const uint32_t groups = static_cast<uint32_t>(std::min<uint64_t>(rows, l.target().max_workgroup_count_x));
  l.dispatch(pipe, {l.bind(e, Access::read), l.bind(c, Access::write)}, push, {groups, 1, 1}, node);
  return Status::ok();
}

}  // namespace

Status lower_attention(Lowering& l, const Node& node) {
  switch (node.op) {
    case Op::attention: return lower_attention_op(l, node);
    case Op::softmax: return lower_softmax(l, node);
    case Op::block_softmax: return lower_block_softmax(l, node);
    default: return l.fail(node, "lower_attention handles attention, softmax and block_softmax only");
  }
}

}  // namespace strata::codegen
