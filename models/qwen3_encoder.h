// The Qwen3 text encoder of Z-Image (transformers Qwen3ForCausalLM, read the way
// diffusers' ZImagePipeline._encode_prompt reads it) as a strata graph.
//
//   ids ─ embed_tokens (on the host: qwen3_embed) ─ embeds [L, hidden]
//   embeds ─ decoder layer 0 ─ … ─ decoder layer N−2 ─ output [L, hidden]
//
// The pipeline keeps hidden_states[-2]: the input of the last decoder layer, before
// the final norm. So the graph runs N − 1 layers; the last layer and model.norm are
// never built, and their weights are never read.
//
// A decoder layer: x += o_proj(attention(q, k, v)) with q = RoPE(q_norm(q_proj(rms(x)))),
// k = RoPE(k_norm(k_proj(rms(x)))), v = v_proj(rms(x)) (input_layernorm), causal, GQA
// (each group of heads / kv_heads query heads shares one k, v head); then
// x += down(silu(gate(rms(x))) · up(rms(x))) (post_attention_layernorm).
//
// How it maps onto the IR:
// - The embedding lookup is a host gather of L rows (the IR has no gather op; the
//   table, vocab × hidden, 0.78 GB in bf16 for Qwen3-4B, never goes to the device).
// - RoPE: transformers rotates halves (pairs i, i + D/2); the IR's rope op rotates
//   interleaved pairs (2i, 2i + 1). q and k are permuted per head to the order
//   (0, D/2, 1, D/2 + 1, …) in the head permute the attention needs anyway; the same
//   permutation of q and k leaves every q·k, so the attention, unchanged, and v is not
//   permuted.
// - The causal mask is attention's frame_tokens = 1 (query i sees key j ≤ i).
// - GQA: k and v heads are repeated to the query heads (a nearest upsample along a
//   unit head axis) before attention.
//
// Right padding changes no valid row: with the causal mask a token never sees a
// later one. So the rows of a run over the L valid tokens are diffusers' rows of its
// padded, masked run, and a run over the ids padded with any rows (qwen3_embed's
// `rows`) gives those L rows first, whatever the pad rows hold: one compiled plan can
// serve every prompt length up to its row count.
#pragma once

#include "ir/graph.h"
#include "ir/tensor.h"
#include "ir/weight_store.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata {

// The fields of text_encoder/config.json the graph uses (transformers' names).
struct Qwen3Config {
  int64_t hidden_size = 2560;
  int64_t num_hidden_layers = 36;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 8;
  int64_t head_dim = 128;
  int64_t intermediate_size = 9728;
  int64_t vocab_size = 151936;
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  bool attention_bias = false;

  int64_t groups() const { return num_attention_heads / num_key_value_heads; }
  // Decoder layers the encoder runs: hidden_states[-2] is the last layer's input.
  int64_t layers_run() const { return num_hidden_layers - 1; }
};

// The released Qwen3-4B (Z-Image's text_encoder): the defaults above.
Qwen3Config qwen3_4b_config();

// Parses a config.json text as transformers 4 writes it (rope_theta at the top level)
// or 5 (rope_parameters.rope_theta). head_dim defaults to hidden / heads and
// num_key_value_heads to the heads, as in transformers. Errors name `source` and the
// field; a model_type other than qwen3, sliding-window attention or a RoPE type other
// than "default" is refused.
Expected<Qwen3Config> parse_qwen3_config(const std::string& json_text, const std::string& source);

struct Qwen3Encoder {
  Qwen3Config config;
  WeightStore weights;  // the tensors as shipped (bf16 or f32), plus derived RoPE tables
  std::string source;   // the directory, or "seed N"
  std::string prefix;   // the checkpoint's key prefix: "model." (Qwen3ForCausalLM) or ""
  // Set: a parameter missing from the store is generated from the seed when a graph is
  // built, stored bf16 as a shipped one (matrices N(0, 1/fan_in), norm weights
  // 1 + N(0, 0.1), biases N(0, 0.02)); embedding rows are drawn row by row when
  // looked up, N(0, 1), so the vocab × hidden table is never made.
  std::optional<uint64_t> seed;
};

// A model of `config` whose weights come from `seed` (benchmarks, shapes no case ships).
Qwen3Encoder seeded_qwen3(Qwen3Config config, uint64_t seed);

// Reads DIR/config.json and maps DIR/model.safetensors or the shards that
// DIR/model.safetensors.index.json lists; keys under "model." or bare. Errors: a
// missing directory, config or weights file, a bad config field, an index that names
// a missing shard, no embed_tokens.weight.
Expected<Qwen3Encoder> load_qwen3_dir(const std::string& dir);

// The embedding rows of `ids` (embed_tokens, converted to f32): [rows, hidden], the
// ids' rows first, then rows - ids.size() zero rows (rows = 0: ids.size()). The zero
// rows are finite through every layer (RMSNorm of 0 is 0) and, causal, change no
// earlier row. Errors: an id outside [0, vocab), rows < ids.size(), no ids.
Expected<Tensor> qwen3_embed(const Qwen3Encoder& model, const std::vector<int64_t>& ids, int64_t rows = 0);

struct Qwen3Options {
  int64_t tokens = 0;  // rows of the "embeds" input (L)
  // The dtype of the matrix weights' values: f32 (the interpreter's oracle) or f16
  // (device plans). Vectors (norm weights, biases) stay f32: the DiT's rule.
  DType weight_dtype = DType::f32;
};

// The graph: input "embeds" [tokens, hidden] f32 (qwen3_embed), output
// hidden_states[-2] [tokens, hidden]. Errors name the missing or mis-shaped tensor,
// or the bad option.
Expected<Graph> build_qwen3_encoder(Qwen3Encoder& model, const Qwen3Options& options);

// RoPE tables for positions 0..tokens−1: cos and sin [tokens, head_dim / 2], pair i
// at angle pos · inv_freq_i, computed as transformers' default rotary embedding does
// in f32: inv_freq_i = 1 / θ^(2i / D) rounded to f32, angle rounded to f32, cos and sin
// of it.
struct Qwen3Rope {
  std::vector<float> cos, sin;
};
Qwen3Rope qwen3_rope_tables(const Qwen3Config& c, int64_t tokens);

}  // namespace strata
