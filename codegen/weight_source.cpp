// weight_source: the bytes of a plan's weight table, from a WeightStore.
#include "codegen/codegen.h"
#include "codegen/w8a8.h"
#include "codegen/weight_transform.h"

#include "ir/interpreter.h"
#include "ir/quant.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

namespace strata::codegen {

namespace {
std::atomic<uint64_t> g_weights_prepared{0};
}  // namespace

uint64_t weights_prepared() { return g_weights_prepared.load(); }

namespace {

// A W8A8 weight (codegen/w8a8.h): each output channel (row) quantized on its own, on
// every core, from the values the interpreter reads (rounded through the value's dtype).
Status quantize_w8a8(const runtime::WeightUpload& w, const TensorView& view, std::span<std::byte> dst) {
  const runtime::WeightTransform& t = w.transform;
  if (t.stored != to_runtime(view.dtype) || view.shape.empty())
    return error("weight '{}': transform {} does not fit the stored {} tensor of shape {}", w.source, describe(t),
                 dtype_name(view.dtype), shape_str(view.shape));
  std::optional<DType> through;
  if (t.rounded_through) {
    STRATA_ASSIGN_OR_RETURN(DType d, from_runtime(*t.rounded_through));
    through = d;
  }
  const int64_t rows = view.shape[0], k = num_elements(view.shape) / std::max<int64_t>(rows, 1);
  const uint64_t bytes = w8a8_rows_bytes(rows, k);
  if (dst.size() != bytes || w.bytes != bytes)
    return error("weight '{}': {} bytes wanted, its int8 rows take {}", w.source, dst.size(), bytes);
  const int64_t kp = w8a8_padded_k(k);
  std::memset(dst.data(), 0, dst.size());
  auto* codes = reinterpret_cast<int8_t*>(dst.data());
  std::byte* scales = dst.data() + rows * kp;
  const interp::Parallel par{.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
  interp::parallel_for(rows, par, k, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t i = 0; i < k; ++i) {
        const float v = view.at(r * k + i);
        row[static_cast<size_t>(i)] = through ? interp::round_to(v, *through) : v;
      }
      const float s = quantize_row_int8(row.data(), k, codes + r * kp);
      std::memcpy(scales + 4 * r, &s, 4);
    }
  });
  return Status::ok();
}

}  // namespace

runtime::WeightSource weight_source(const WeightStore& weights) {
  return [&weights](const runtime::WeightUpload& w, std::span<std::byte> dst) -> Status {
    ++g_weights_prepared;
    STRATA_ASSIGN_OR_RETURN(TensorView view, weights.get(w.source));
    // The transform's stored type must be the tensor's: a plan compiled against other
    // weights (the cache key includes them) cannot convert these bytes.
    const runtime::WeightTransform& t = w.transform;
    if (t.upload == runtime::DType::u8) return quantize_w8a8(w, view, dst);
    const bool half = t.upload == runtime::DType::f16;
    if (t.stored != to_runtime(view.dtype) || (t.upload != runtime::DType::f32 && !half) ||
        (half && t.rounded_through))
      return error("weight '{}': transform {} does not fit the stored {} tensor", w.source, describe(t),
                   dtype_name(view.dtype));
    const auto n = static_cast<size_t>(num_elements(view.shape));
    const size_t bytes = n * (half ? 2 : 4);
    if (dst.size() != bytes || w.bytes != bytes)
      return error("weight '{}': {} bytes wanted, the tensor converts to {}", w.source, dst.size(), bytes);
    if (t.is_copy()) {  // uploaded as stored (f32 or f16)
      std::memcpy(dst.data(), view.data, bytes);
      return Status::ok();
    }
    if (half) {
      // On every core, straight from the stored values: Wan's Winograd U alone is ~2·10⁹
      // values, Z-Image's 6.15 B parameters ship as
      // bf16. (An f32 copy of each tensor first, made on one core, took most of the
      // time.) Each range writes its own halfs of dst; every value is
      // TensorView::at's, as to_f32 gives it.
      const interp::Parallel par{.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
      auto* out = reinterpret_cast<uint16_t*>(dst.data());
      const auto* bf16 = static_cast<const uint8_t*>(view.data);
      const bool is_bf16 = view.dtype == DType::bf16;
      interp::parallel_for(static_cast<int64_t>(n), par, 8, [&](int64_t begin, int64_t end) {
        if (is_bf16) {
          for (int64_t i = begin; i < end; ++i) {
            uint16_t b;
            std::memcpy(&b, bf16 + 2 * i, 2);  // safetensors guarantees no alignment
            out[i] = float_to_half(bf16_to_float(b));
          }
        } else {
          for (int64_t i = begin; i < end; ++i) out[i] = float_to_half(view.at(i));
        }
      });
      return Status::ok();
    }
    std::vector<float> values = view.to_f32();
    if (t.rounded_through) {
      STRATA_ASSIGN_OR_RETURN(DType through, from_runtime(*t.rounded_through));
      for (float& v : values) v = interp::round_to(v, through);
    }
    std::memcpy(dst.data(), values.data(), bytes);
    return Status::ok();
  };
}

}  // namespace strata::codegen
