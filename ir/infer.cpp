#include "ir/infer.h"

#include <algorithm>
#include <set>

namespace strata {

Status check_attrs(Op op, const Attrs& attrs) {
  const OpInfo& info = op_info(op);
  for (const auto& spec : info.attrs) {
    auto it = attrs.map().find(std::string(spec.name));
    if (it == attrs.map().end()) {
      if (spec.required) return error("{} needs attribute '{}'", info.name, spec.name);
      continue;
    }
    AttrKind got = attr_kind_of(it->second);
    bool ok = got == spec.kind || (spec.kind == AttrKind::float_ && got == AttrKind::int_) ||
              (spec.kind == AttrKind::floats && got == AttrKind::ints &&
               std::get<std::vector<int64_t>>(it->second).empty());
    if (!ok)
      return error("{} attribute '{}' must be {}, got {}", info.name, spec.name,
                   attr_kind_name(spec.kind), attr_kind_name(got));
  }
  for (const auto& [name, value] : attrs.map()) {
    bool known = std::any_of(info.attrs.begin(), info.attrs.end(),
                             [&](const AttrSpec& s) { return s.name == name; });
    if (!known) return error("{} has no attribute '{}'", info.name, name);
  }
  return Status::ok();
}

Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return error("shapes {} and {} do not broadcast", shape_str(a), shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

using Types = std::vector<const TensorType*>;

TensorType like(const TensorType& t, Shape shape) { return TensorType{std::move(shape), t.dtype, {}}; }

Status need_rank(const TensorType* t, int64_t rank, std::string_view what) {
  if (t->rank() != rank) return error("{} must have rank {}, got {}", what, rank, shape_str(t->shape));
  return Status::ok();
}

Status need_vector(const TensorType* t, int64_t n, std::string_view what) {
  if (!t) return Status::ok();
  if (t->elements() != n)
    return error("{} must have {} elements, got {}", what, n, shape_str(t->shape));
  return Status::ok();
}

// Output size of a convolution along one dim.
Expected<int64_t> conv_out(int64_t in, int64_t k, int64_t pad_lo, int64_t pad_hi, int64_t stride,
                           std::string_view dim) {
  int64_t span = in + pad_lo + pad_hi - k;
  if (span < 0 || stride < 1)
    return error("kernel {} does not fit input {} (padding {}+{}) along {}", k, in, pad_lo, pad_hi, dim);
  return span / stride + 1;
}

// A conv over a frame stack (ir/ops.h) keeps every frame's rows: stride 1, pad k / 2
// (odd kernels; kh per temporal tap), and frames that tile the rows it reads. Returns
// the kernel rows one output row spans in the input image (kh / taps for a frame
// stack, else kh), for the output size.
Expected<int64_t> check_frames(const Attrs& a, std::string_view op, int64_t rows_read, int64_t kernel_rows,
                               int64_t kw, const std::vector<int64_t>& pad, const std::vector<int64_t>& stride) {
  STRATA_ASSIGN_OR_RETURN(const FrameGather f, conv_frames(a));
  if (!f.on()) return kernel_rows;
  if (kernel_rows % f.taps != 0)
    return error("{}: {} kernel rows are not {} temporal taps (frame_taps)", op, kernel_rows, f.taps);
  const int64_t kh = f.tap_rows(kernel_rows);
  if (stride[0] != 1 || stride[1] != 1 || kh % 2 == 0 || kw % 2 == 0 || pad[0] != kh / 2 || pad[1] != kw / 2)
    return error("{} over frames needs stride 1, odd kernels and pad = kernel / 2 (kernel {}x{}, pad {}, stride {})",
                 op, kh, kw, shape_str(pad), shape_str(stride));
  if (rows_read % f.rows != 0)
    return error("{}: {} input rows are not a stack of frames of {} rows", op, rows_read, f.rows);
  return kh;
}

Expected<std::vector<TensorType>> infer_conv2d(const Attrs& a, const Types& in) {
  const TensorType *x = in[0], *w = in[1], *b = in.size() > 2 ? in[2] : nullptr;
  STRATA_RETURN_IF_ERROR(need_rank(x, 4, "conv2d input"));
  STRATA_RETURN_IF_ERROR(need_rank(w, 4, "conv2d weight"));
  auto pad = a.get_ints("pad", {0, 0});
  auto stride = a.get_ints("stride", {1, 1});
  if (pad.size() != 2 || stride.size() != 2) return error("conv2d pad and stride need 2 values");
  if (x->shape[1] != w->shape[1])
    return error("conv2d input channels {} != weight's {} (weight {})", x->shape[1], w->shape[1],
                 shape_str(w->shape));
  STRATA_RETURN_IF_ERROR(need_vector(b, w->shape[0], "conv2d bias"));
  STRATA_ASSIGN_OR_RETURN(const int64_t kh, check_frames(a, "conv2d", x->shape[2], w->shape[2], w->shape[3], pad, stride));
  STRATA_ASSIGN_OR_RETURN(int64_t h, conv_out(x->shape[2], kh, pad[0], pad[0], stride[0], "H"));
  STRATA_ASSIGN_OR_RETURN(int64_t wd, conv_out(x->shape[3], w->shape[3], pad[1], pad[1], stride[1], "W"));
  return std::vector{like(*x, {x->shape[0], w->shape[0], h, wd})};
}

Expected<std::vector<TensorType>> infer_conv3d(const Attrs& a, const Types& in) {
  const TensorType *x = in[0], *w = in[1], *b = in.size() > 2 ? in[2] : nullptr;
  STRATA_RETURN_IF_ERROR(need_rank(x, 5, "conv3d input"));
  STRATA_RETURN_IF_ERROR(need_rank(w, 5, "conv3d weight"));
  auto pad = a.get_ints("pad", {0, 0, 0, 0});
  if (pad.size() != 4) return error("conv3d pad needs 4 values [t_front, t_back, h, w]");
  if (x->shape[1] != w->shape[1])
    return error("conv3d input channels {} != weight's {} (weight {})", x->shape[1], w->shape[1],
                 shape_str(w->shape));
  STRATA_RETURN_IF_ERROR(need_vector(b, w->shape[0], "conv3d bias"));
  STRATA_ASSIGN_OR_RETURN(int64_t t, conv_out(x->shape[2], w->shape[2], pad[0], pad[1], 1, "T"));
  STRATA_ASSIGN_OR_RETURN(int64_t h, conv_out(x->shape[3], w->shape[3], pad[2], pad[2], 1, "H"));
  STRATA_ASSIGN_OR_RETURN(int64_t wd, conv_out(x->shape[4], w->shape[4], pad[3], pad[3], 1, "W"));
  return std::vector{like(*x, {x->shape[0], w->shape[0], t, h, wd})};
}

Expected<TensorType> out_type(const Attrs& a, const TensorType& x, Shape shape);

// linear's softmax-folding forms (ir/ops.h: exp_blocks, scale_blocks).
Expected<std::vector<TensorType>> infer_linear_blocks(const Attrs& a, const Types& in) {
  const TensorType *x = in[0], *w = in[1], *c = in.size() > 2 ? in[2] : nullptr;
  STRATA_RETURN_IF_ERROR(need_rank(w, 2, "linear weight"));
  if (a.has("exp_blocks") && a.has("scale_blocks")) return error("linear takes exp_blocks or scale_blocks, not both");
  const bool exp = a.has("exp_blocks");
  const int64_t block = a.get_int(exp ? "exp_blocks" : "scale_blocks");
  const int64_t n = w->shape[0], k = w->shape[1];
  if (x->rank() != 2) return error("linear with {} needs a rank-2 input, got {}", exp ? "exp_blocks" : "scale_blocks",
                                   shape_str(x->shape));
  if (exp) {
    if (block < 1 || n % block != 0) return error("exp_blocks {} does not divide the {} output features", block, n);
    if (c) return error("linear with exp_blocks takes no bias");
    if (x->shape[1] != k)
      return error("linear input {} does not end in the weight's {} input features", shape_str(x->shape), k);
    return std::vector{TensorType{{x->shape[0], n + 2 * (n / block)}, DType::f16, {}}};
  }
  if (block < 1 || k % block != 0) return error("scale_blocks {} does not divide the {} input features", block, k);
  if (x->shape[1] != k + 2 * (k / block))
    return error("linear with scale_blocks {} reads exp_blocks rows of {} columns ({} input features), got {}", block,
                 k + 2 * (k / block), k, shape_str(x->shape));
  if (!c || c->dtype != DType::f16 || c->shape != Shape{x->shape[0], k / block})
    return error("linear with scale_blocks needs f16 block weights [{}, {}] as its third operand", x->shape[0],
                 k / block);
  Shape s{x->shape[0], n};
  STRATA_ASSIGN_OR_RETURN(TensorType t, out_type(a, *x, s));
  return std::vector{t};
}

Expected<std::vector<TensorType>> infer_block_softmax(const Attrs& a, const Types& in) {
  const TensorType* e = in[0];
  const int64_t block = a.get_int("block");
  if (e->rank() != 2 || block < 1 || e->shape[1] % (block + 2) != 0)
    return error("block_softmax reads exp_blocks rows (N + 2·N/{} columns), got {}", block, shape_str(e->shape));
  return std::vector{TensorType{{e->shape[0], e->shape[1] / (block + 2)}, DType::f16, {}}};
}

// Winograd F(m×m, 3×3) (ir/ops.h): tiles of m×m output pixels, (m + 2)² positions,
// the tile rows padded to a multiple of 32 (interp::winograd_rows).
int64_t winograd_tiles(int64_t h, int64_t w, int64_t m) {
  return (((h + m - 1) / m) * ((w + m - 1) / m) + 31) / 32 * 32;
}

Expected<int64_t> winograd_tile(const Attrs& a, const char* op) {
  const int64_t m = a.get_int("tile", 2);
  if (m != 2 && m != 4) return error("{} tile must be 2 or 4 (F(2x2, 3x3) or F(4x4, 3x3)), got {}", op, m);
  return m;
}

Expected<std::vector<TensorType>> infer_winograd_input(const Attrs& a, const Types& in) {
  const TensorType* x = in[0];
  if (x->rank() != 4 || x->shape[0] != 1)
    return error("winograd_input reads one image [1, C, H, W], got {}", shape_str(x->shape));
  STRATA_ASSIGN_OR_RETURN(int64_t m, winograd_tile(a, "winograd_input"));
  STRATA_ASSIGN_OR_RETURN(TensorType t, out_type(a, *x, {(m + 2) * (m + 2), winograd_tiles(x->shape[2], x->shape[3], m),
                                                         x->shape[1]}));
  return std::vector{t};
}

Expected<std::vector<TensorType>> infer_winograd_gemm(const Attrs& a, const Types& in) {
  const TensorType* u = in.back();
  const TensorType* v0 = in[0];
  const int64_t frames = static_cast<int64_t>(in.size()) - 1;
  if (v0->rank() != 3 || (v0->shape[0] != 16 && v0->shape[0] != 36))
    return error("winograd_gemm operand 0 must be [16, T, C] or [36, T, C] (winograd_input's), got {}",
                 shape_str(v0->shape));
  const int64_t positions = v0->shape[0];
  for (int64_t f = 1; f < frames; ++f)
    if (in[static_cast<size_t>(f)]->shape != v0->shape)
      return error("winograd_gemm operand {} is {}, operand 0 is {}: the frames must agree", f,
                   shape_str(in[static_cast<size_t>(f)]->shape), shape_str(v0->shape));
  if (u->rank() != 3 || u->shape[0] != positions || u->shape[2] != frames * v0->shape[2])
    return error("winograd_gemm weights must be [{}, Co, {}·{}] for {} frames of {} channels, got {}", positions,
                 frames, v0->shape[2], frames, v0->shape[2], shape_str(u->shape));
  STRATA_ASSIGN_OR_RETURN(TensorType t, out_type(a, *v0, {positions, v0->shape[1], u->shape[1]}));
  return std::vector{t};
}

Expected<std::vector<TensorType>> infer_winograd_weights(const Attrs& a, const Types& in) {
  const TensorType* w0 = in[0];
  if (w0->rank() != 2 || w0->shape[1] % 9 != 0 || w0->shape[1] == 0)
    return error("winograd_weights reads o_hwi 3x3 conv weights [Co, 9·C], got {}", shape_str(w0->shape));
  for (size_t f = 1; f < in.size(); ++f)
    if (in[f]->shape != w0->shape)
      return error("winograd_weights operand {} is {}, operand 0 is {}: the frames' weights must agree", f,
                   shape_str(in[f]->shape), shape_str(w0->shape));
  STRATA_ASSIGN_OR_RETURN(int64_t m, winograd_tile(a, "winograd_weights"));
  const int64_t frames = static_cast<int64_t>(in.size());
  STRATA_ASSIGN_OR_RETURN(TensorType t,
                          out_type(a, *w0, {(m + 2) * (m + 2), w0->shape[0], frames * (w0->shape[1] / 9)}));
  return std::vector{t};
}

Expected<std::vector<TensorType>> infer_winograd_output(const Attrs& a, const Types& in) {
  const TensorType *m = in[0], *bias = in.size() > 1 ? in[1] : nullptr, *res = in.size() > 2 ? in[2] : nullptr;
  const int64_t h = a.get_int("height"), w = a.get_int("width");
  if (h < 1 || w < 1) return error("winograd_output needs height and width >= 1, got {}x{}", h, w);
  STRATA_ASSIGN_OR_RETURN(int64_t tile, winograd_tile(a, "winograd_output"));
  const int64_t positions = (tile + 2) * (tile + 2), rows = winograd_tiles(h, w, tile);
  if (m->rank() != 3 || m->shape[0] != positions || m->shape[1] != rows)
    return error("winograd_output of {}x{} with tile {} reads [{}, {}, Co], got {}", h, w, tile, positions, rows,
                 shape_str(m->shape));
  const int64_t co = m->shape[2];
  STRATA_RETURN_IF_ERROR(need_vector(bias, co, "winograd_output bias"));
  const Shape out{1, co, h, w};
  if (res && res->shape != out)
    return error("winograd_output residual must be {}, got {}", shape_str(out), shape_str(res->shape));
  STRATA_ASSIGN_OR_RETURN(TensorType t, out_type(a, *m, out));
  return std::vector{t};
}

Expected<std::vector<TensorType>> infer_linear(const Attrs& a, const Types& in) {
  if (a.has("quant")) {
    const std::string q = a.get_string("quant");
    if (q != "w8a8") return error("linear quant '{}': the schemes are \"w8a8\"", q);
    if (a.has("exp_blocks") || a.has("scale_blocks"))
      return error("linear quant \"w8a8\" does not combine with exp_blocks or scale_blocks (attention stays f16)");
  }
  if (a.has("exp_blocks") || a.has("scale_blocks")) return infer_linear_blocks(a, in);
  const TensorType *x = in[0], *w = in[1], *b = in.size() > 2 ? in[2] : nullptr;
  STRATA_RETURN_IF_ERROR(need_rank(w, 2, "linear weight"));
  if (x->rank() < 1 || x->shape.back() != w->shape[1])
    return error("linear input {} does not end in the weight's {} input features", shape_str(x->shape),
                 w->shape[1]);
  STRATA_RETURN_IF_ERROR(need_vector(b, w->shape[0], "linear bias"));
  Shape s = x->shape;
  s.back() = w->shape[0];
  STRATA_ASSIGN_OR_RETURN(TensorType t, out_type(a, *x, s));
  return std::vector{t};
}

Expected<std::vector<TensorType>> infer_matmul(const Types& in) {
  const TensorType *a = in[0], *b = in[1];
  if (a->rank() < 2 || a->rank() != b->rank())
    return error("matmul operands {} and {} need equal rank >= 2", shape_str(a->shape), shape_str(b->shape));
  size_t r = a->shape.size();
  if (!std::equal(a->shape.begin(), a->shape.end() - 2, b->shape.begin()) || a->shape[r - 1] != b->shape[r - 2])
    return error("matmul shapes {} and {} do not fit", shape_str(a->shape), shape_str(b->shape));
  Shape s = a->shape;
  s[r - 1] = b->shape[r - 1];
  return std::vector{like(*a, s)};
}

// A norm's given statistics: f32 [N·G, 2], (mean, rstd) per (n, group).
Status need_stats(const TensorType* t, int64_t segments, std::string_view what) {
  if (t->dtype != DType::f32 || t->shape != Shape{segments, 2})
    return error("{} statistics must be f32 [{}, 2] (mean, rstd per sample and group), got {} {}", what, segments,
                 dtype_name(t->dtype), shape_str(t->shape));
  return Status::ok();
}

// group_moments(x[1, C, R, W]) -> f32 [G, R, 2].
Expected<std::vector<TensorType>> infer_group_moments(const Attrs& a, const Types& in) {
  const TensorType* x = in[0];
  STRATA_RETURN_IF_ERROR(need_rank(x, 4, "group_moments input"));
  if (x->shape[0] != 1) return error("group_moments needs batch 1, got {}", shape_str(x->shape));
  const int64_t groups = a.get_int("groups");
  if (groups < 1 || x->shape[1] % groups != 0)
    return error("group_moments: {} channels do not split into {} groups", x->shape[1], groups);
  return std::vector{TensorType{{groups, x->shape[2], 2}, DType::f32, {}}};
}

Expected<std::vector<TensorType>> infer_norm(Op op, const Attrs& a, const Types& in) {
  const TensorType* x = in[0];
  if (op == Op::layer_norm) {
    if (x->rank() < 1) return error("layer_norm input must have rank >= 1");
    STRATA_RETURN_IF_ERROR(need_vector(in.size() > 1 ? in[1] : nullptr, x->shape.back(), "layer_norm gamma"));
    STRATA_RETURN_IF_ERROR(need_vector(in.size() > 2 ? in[2] : nullptr, x->shape.back(), "layer_norm beta"));
    return std::vector{like(*x, x->shape)};
  }
  if (x->rank() < 2) return error("{} input must be [N, C, ...], got {}", op_name(op), shape_str(x->shape));
  int64_t c = x->shape[1];
  if (op == Op::group_norm) {
    int64_t groups = a.get_int("groups");
    if (groups < 1 || c % groups != 0) return error("group_norm: {} channels do not split into {} groups", c, groups);
    if (in.size() > 3 && in[3]) STRATA_RETURN_IF_ERROR(need_stats(in[3], x->shape[0] * groups, "group_norm"));
  }
  STRATA_RETURN_IF_ERROR(need_vector(in[1], c, fmt::format("{} gamma", op_name(op))));
  STRATA_RETURN_IF_ERROR(need_vector(in.size() > 2 ? in[2] : nullptr, c, fmt::format("{} beta", op_name(op))));
  return std::vector{like(*x, x->shape)};
}

Expected<std::vector<TensorType>> infer_token_rms_norm(const Attrs& a, const Types& in) {
  const TensorType* x = in[0];
  if (x->rank() < 1) return error("token_rms_norm input must have rank >= 1");
  STRATA_RETURN_IF_ERROR(need_vector(in.size() > 1 ? in[1] : nullptr, x->shape.back(), "token_rms_norm gamma"));
  // The fused modulation: a row vector (every dim but the last 1) or x's shape.
  if (const TensorType* m = in.size() > 2 ? in[2] : nullptr) {
    bool row = m->rank() >= 1 && m->rank() <= x->rank() && m->shape.back() == x->shape.back();
    for (size_t d = 0; row && d + 1 < m->shape.size(); ++d) row = m->shape[d] == 1;
    if (!row && m->shape != x->shape)
      return error("token_rms_norm mul must be a row of {} or x's shape {}, got {}", x->shape.back(),
                   shape_str(x->shape), shape_str(m->shape));
  }
  if (const TensorType* r = in.size() > 3 ? in[3] : nullptr; r && r->shape != x->shape)
    return error("token_rms_norm residual must have x's shape {}, got {}", shape_str(x->shape), shape_str(r->shape));
  STRATA_ASSIGN_OR_RETURN(TensorType t, out_type(a, *x, x->shape));
  return std::vector{t};
}

// rope(x[..., T, D], cos[T, D/2], sin[T, D/2]): D even, the tables one row per token.
Expected<std::vector<TensorType>> infer_rope(const Types& in) {
  const TensorType *x = in[0], *c = in[1], *s = in[2];
  if (x->rank() < 2 || x->shape.back() % 2 != 0)
    return error("rope input must be [..., T, D] with D even, got {}", shape_str(x->shape));
  const Shape want{x->shape[x->shape.size() - 2], x->shape.back() / 2};
  if (c->shape != want || s->shape != want)
    return error("rope tables cos {} and sin {} must be {} for input {}", shape_str(c->shape), shape_str(s->shape),
                 shape_str(want), shape_str(x->shape));
  return std::vector{like(*x, x->shape)};
}

// sinusoidal(t[N], freqs[F]) -> [N, 2F].
Expected<std::vector<TensorType>> infer_sinusoidal(const Types& in) {
  const TensorType *t = in[0], *f = in[1];
  STRATA_RETURN_IF_ERROR(need_rank(t, 1, "sinusoidal t"));
  STRATA_RETURN_IF_ERROR(need_rank(f, 1, "sinusoidal freqs"));
  return std::vector{like(*t, {t->shape[0], 2 * f->shape[0]})};
}

Expected<std::vector<TensorType>> infer_attention(const Attrs& a, const Types& in) {
  const TensorType *q = in[0], *k = in[1], *v = in[2];
  if (a.get_int("frame_tokens", 0) < 0) return error("attention frame_tokens {} < 0", a.get_int("frame_tokens", 0));
  size_t r = q->shape.size();
  if (r < 2 || k->shape.size() != r || v->shape.size() != r)
    return error("attention q {}, k {}, v {} need equal rank >= 2", shape_str(q->shape), shape_str(k->shape),
                 shape_str(v->shape));
  bool heads_match = std::equal(q->shape.begin(), q->shape.end() - 2, k->shape.begin()) &&
                     std::equal(q->shape.begin(), q->shape.end() - 2, v->shape.begin());
  if (!heads_match || q->shape[r - 1] != k->shape[r - 1] || k->shape[r - 2] != v->shape[r - 2])
    return error("attention q {}, k {}, v {} do not fit", shape_str(q->shape), shape_str(k->shape),
                 shape_str(v->shape));
  Shape s = q->shape;
  s[r - 1] = v->shape[r - 1];
  return std::vector{like(*q, s)};
}

Expected<std::vector<TensorType>> infer_reshape(const Attrs& a, const Types& in) {
  Shape s = a.get_ints("shape");
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer_at >= 0) return error("reshape shape {} has more than one -1", shape_str(s));
      infer_at = static_cast<int64_t>(i);
    } else if (s[i] < 0) {
      return error("reshape shape {} has a negative size", shape_str(s));
    } else if (__builtin_mul_overflow(known, s[i], &known)) {
      return error("reshape shape {} has too many elements", shape_str(s));
    }
  }
  int64_t n = in[0]->elements();
  if (infer_at >= 0 && known > 0 && n % known == 0) s[static_cast<size_t>(infer_at)] = n / known;
  if (num_elements(s) != n)
    return error("reshape of {} ({} elements) to {}", shape_str(in[0]->shape), n, shape_str(a.get_ints("shape")));
  return std::vector{like(*in[0], s)};
}

Expected<std::vector<TensorType>> infer_permute(const Attrs& a, const Types& in) {
  auto perm = a.get_ints("perm");
  const Shape& x = in[0]->shape;
  std::set<int64_t> seen(perm.begin(), perm.end());
  if (perm.size() != x.size() || seen.size() != perm.size() ||
      (!seen.empty() && (*seen.begin() != 0 || *seen.rbegin() != static_cast<int64_t>(x.size()) - 1)))
    return error("permute perm {} is not a permutation of {} dims", shape_str(perm), x.size());
  Shape s;
  for (int64_t p : perm) s.push_back(x[static_cast<size_t>(p)]);
  return std::vector{like(*in[0], s)};
}

Expected<std::vector<TensorType>> infer_slice(const Attrs& a, const Types& in) {
  int64_t axis = a.get_int("axis"), start = a.get_int("start"), end = a.get_int("end");
  Shape s = in[0]->shape;
  if (axis < 0 || axis >= static_cast<int64_t>(s.size()))
    return error("slice axis {} out of range for {}", axis, shape_str(s));
  if (start < 0 || end > s[static_cast<size_t>(axis)] || start >= end)
    return error("slice [{}, {}) out of range for dim {} of {}", start, end, axis, shape_str(s));
  s[static_cast<size_t>(axis)] = end - start;
  return std::vector{like(*in[0], s)};
}

Expected<std::vector<TensorType>> infer_concat(const Attrs& a, const Types& in) {
  int64_t axis = a.get_int("axis");
  Shape s = in[0]->shape;
  if (axis < 0 || axis >= static_cast<int64_t>(s.size()))
    return error("concat axis {} out of range for {}", axis, shape_str(s));
  for (size_t i = 1; i < in.size(); ++i) {
    Shape t = in[i]->shape;
    if (t.size() != s.size()) return error("concat operands {} and {} differ in rank", shape_str(s), shape_str(t));
    for (size_t d = 0; d < s.size(); ++d)
      if (static_cast<int64_t>(d) != axis && t[d] != s[d])
        return error("concat operand {} does not match {} outside axis {}", shape_str(t), shape_str(in[0]->shape), axis);
    s[static_cast<size_t>(axis)] += t[static_cast<size_t>(axis)];
  }
  return std::vector{like(*in[0], s)};
}

Expected<std::vector<TensorType>> infer_upsample(const Attrs& a, const Types& in) {
  auto f = a.get_ints("factors");
  Shape s = in[0]->shape;
  if (f.empty() || f.size() > s.size()) return error("upsample_nearest factors {} do not fit {}", shape_str(f), shape_str(s));
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] < 1) return error("upsample_nearest factor {} < 1", f[i]);
    s[s.size() - f.size() + i] *= f[i];
  }
  return std::vector{like(*in[0], s)};
}

// The output type of a fused op: `shape`, in the dtype attribute's type or x's.
Expected<TensorType> out_type(const Attrs& a, const TensorType& x, Shape shape) {
  TensorType t = like(x, std::move(shape));
  if (a.has("dtype")) {
    STRATA_ASSIGN_OR_RETURN(t.dtype, parse_dtype(a.get_string("dtype")));
  }
  return t;
}

Expected<std::vector<TensorType>> infer_norm_act(const Attrs& a, const Types& in) {
  const TensorType* x = in[0];
  if (x->rank() < 2) return error("norm_act input must be [N, C, ...], got {}", shape_str(x->shape));
  int64_t c = x->shape[1];
  int64_t real = a.get_int("channels", c);
  if (real < 1 || real > c) return error("norm_act channels {} outside 1..{}", real, c);
  std::string norm = a.get_string("norm");
  if (norm == "group") {
    int64_t groups = a.get_int("groups");
    if (groups < 1 || real % groups != 0)
      return error("norm_act: {} channels do not split into {} groups", real, groups);
  } else if (norm != "rms") {
    return error("norm_act norm '{}' is not group or rms", norm);
  }
  STRATA_RETURN_IF_ERROR(need_vector(in[1], c, "norm_act gamma"));
  for (size_t i = 2; i < in.size() && i < 4; ++i)
    STRATA_RETURN_IF_ERROR(need_vector(in[i], c, i == 2 ? "norm_act beta" : "norm_act bias"));
  if (in.size() > 4 && in[4]) {
    if (norm != "group") return error("norm_act statistics need norm = group");
    STRATA_RETURN_IF_ERROR(need_stats(in[4], x->shape[0] * a.get_int("groups"), "norm_act"));
  }
  STRATA_ASSIGN_OR_RETURN(TensorType out, out_type(a, *x, x->shape));
  return std::vector{out};
}

Expected<std::vector<TensorType>> infer_conv_gemm(const Attrs& a, const Types& in) {
  const TensorType *x = in[0], *w = in[1];
  const TensorType* b = in.size() > 2 ? in[2] : nullptr;
  const TensorType* r = in.size() > 3 ? in[3] : nullptr;
  STRATA_RETURN_IF_ERROR(need_rank(x, 4, "conv_gemm input"));
  auto k = a.get_ints("kernel");
  auto pad = a.get_ints("pad", {0, 0});
  auto stride = a.get_ints("stride", {1, 1});
  if (k.size() != 2 || pad.size() != 2 || stride.size() != 2 || k[0] < 1 || k[1] < 1)
    return error("conv_gemm kernel, pad and stride need 2 values each");
  int64_t ci = x->shape[1];
  STRATA_ASSIGN_OR_RETURN(const WeightLayout layout, conv_weight_layout(a));
  int64_t co = 0;
  switch (layout) {
    case WeightLayout::oihw:
      STRATA_RETURN_IF_ERROR(need_rank(w, 4, "conv_gemm oihw weight"));
      if (w->shape[1] != ci || w->shape[2] != k[0] || w->shape[3] != k[1])
        return error("conv_gemm weight {} does not fit {} input channels and kernel {}", shape_str(w->shape), ci,
                     shape_str(k));
      break;
    case WeightLayout::o_hwi:
      STRATA_RETURN_IF_ERROR(need_rank(w, 2, "conv_gemm o_hwi weight"));
      if (w->shape[1] != k[0] * k[1] * ci)
        return error("conv_gemm packed weight {} needs {} columns (kernel {} x {} input channels)",
                     shape_str(w->shape), k[0] * k[1] * ci, shape_str(k), ci);
      break;
    case WeightLayout::phases:
      STRATA_RETURN_IF_ERROR(need_rank(w, 2, "conv_gemm phases weight"));
      if (w->shape[0] % 4 != 0 || w->shape[1] != 4 * ci)
        return error("conv_gemm phases weight {} needs 4·Co rows and {} columns (2×2 taps x {} input channels)",
                     shape_str(w->shape), 4 * ci, ci);
      break;
  }
  co = layout == WeightLayout::phases ? w->shape[0] / 4 : w->shape[0];
  STRATA_ASSIGN_OR_RETURN(const GatherKind gather, conv_gather(a));
  const int64_t up = gather_upsample(gather);
  if (layout == WeightLayout::phases &&
      (gather != GatherKind::upsample2x || k[0] != 3 || k[1] != 3 || pad[0] != 1 || pad[1] != 1 || stride[0] != 1 ||
       stride[1] != 1 || a.get_int("frame_rows", 0) != 0))
    return error("conv_gemm phases weights need the upsample2x gather, kernel [3, 3], pad [1, 1], stride [1, 1] "
                 "and no frame stack");
  STRATA_RETURN_IF_ERROR(need_vector(b, co, "conv_gemm bias"));
  STRATA_ASSIGN_OR_RETURN(const int64_t kh, check_frames(a, "conv_gemm", x->shape[2] * up, k[0], k[1], pad, stride));
  STRATA_ASSIGN_OR_RETURN(int64_t h, conv_out(x->shape[2] * up, kh, pad[0], pad[0], stride[0], "H"));
  STRATA_ASSIGN_OR_RETURN(int64_t wd, conv_out(x->shape[3] * up, k[1], pad[1], pad[1], stride[1], "W"));
  Shape out{x->shape[0], co, h, wd};
  if (r && r->shape != out)
    return error("conv_gemm residual {} does not match the output {}", shape_str(r->shape), shape_str(out));
  STRATA_ASSIGN_OR_RETURN(TensorType t, out_type(a, *x, out));
  return std::vector{t};
}

}  // namespace

Expected<std::vector<TensorType>> infer_output_types(Op op, const Attrs& attrs, const Types& inputs) {
  const OpInfo& info = op_info(op);
  int n = static_cast<int>(inputs.size());
  if (n < info.min_inputs || (info.max_inputs >= 0 && n > info.max_inputs))
    return error("{} takes {}{} operands, got {}", info.name, info.min_inputs,
                 info.max_inputs < 0 ? "+" : info.max_inputs == info.min_inputs ? "" : fmt::format("-{}", info.max_inputs), n);
  // Operands up to min_inputs are required; so is every operand of a variadic op
  // (concat), whose rules read them all.
  for (int i = 0; i < n; ++i)
    if (!inputs[static_cast<size_t>(i)] && (i < info.min_inputs || info.max_inputs < 0))
      return error("{} operand {} is required", info.name, i);
  STRATA_RETURN_IF_ERROR(check_attrs(op, attrs));
  const TensorType& x = *inputs[0];
  switch (op) {
    case Op::conv2d: return infer_conv2d(attrs, inputs);
    case Op::conv3d: return infer_conv3d(attrs, inputs);
    case Op::linear: return infer_linear(attrs, inputs);
    case Op::matmul: return infer_matmul(inputs);
    case Op::group_norm:
    case Op::rms_norm:
    case Op::layer_norm: return infer_norm(op, attrs, inputs);
    case Op::add:
    case Op::mul: {
      STRATA_ASSIGN_OR_RETURN(Shape s, broadcast_shapes(x.shape, inputs[1]->shape));
      return std::vector{like(x, s)};
    }
    case Op::silu_mul: {
      STRATA_ASSIGN_OR_RETURN(Shape s, broadcast_shapes(x.shape, inputs[1]->shape));
      STRATA_ASSIGN_OR_RETURN(TensorType t, out_type(attrs, x, std::move(s)));
      return std::vector{t};
    }
    case Op::token_rms_norm: return infer_token_rms_norm(attrs, inputs);
    case Op::rope: return infer_rope(inputs);
    case Op::sinusoidal: return infer_sinusoidal(inputs);
    case Op::silu:
    case Op::gelu:
    case Op::tanh:
    case Op::scale:
    case Op::clamp: return std::vector{like(x, x.shape)};
    case Op::softmax: {
      STRATA_ASSIGN_OR_RETURN(TensorType t, out_type(attrs, x, x.shape));
      return std::vector{t};
    }
    case Op::upsample_nearest: return infer_upsample(attrs, inputs);
    case Op::attention: return infer_attention(attrs, inputs);
    case Op::reshape: return infer_reshape(attrs, inputs);
    case Op::permute: return infer_permute(attrs, inputs);
    case Op::slice: return infer_slice(attrs, inputs);
    case Op::concat: return infer_concat(attrs, inputs);
    case Op::norm_act: return infer_norm_act(attrs, inputs);
    case Op::group_moments: return infer_group_moments(attrs, inputs);
    case Op::conv_gemm: return infer_conv_gemm(attrs, inputs);
    case Op::block_softmax: return infer_block_softmax(attrs, inputs);
    case Op::winograd_input: return infer_winograd_input(attrs, inputs);
    case Op::winograd_gemm: return infer_winograd_gemm(attrs, inputs);
    case Op::winograd_output: return infer_winograd_output(attrs, inputs);
    case Op::winograd_weights: return infer_winograd_weights(attrs, inputs);
    case Op::cast: {
      STRATA_ASSIGN_OR_RETURN(DType t, parse_dtype(attrs.get_string("dtype")));
      return std::vector{TensorType{x.shape, t, {}}};
    }
  }
  return error("unknown op");
}

}  // namespace strata
