// ModelWeights: how model builders ask for their parameters.
//
// A builder names each tensor with the shape its config implies. Against a loaded
// diffusers directory the tensor must be there with that shape (else an error naming
// it); in seeded mode a missing tensor is generated from the seed with that shape, so
// the same builder code yields a full-size architecture with no weights on disk
// (the demo, benchmarks, and tests that need a model no case ships).
#pragma once

#include "ir/builder.h"
#include "ir/weight_store.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace strata {

// What a parameter is, which decides how a seeded one is drawn.
enum class ParamKind {
  conv_weight,  // N(0, 1/fan_in): activations keep their scale through the stack
  bias,         // N(0, 0.02)
  norm_gamma,   // 1 + N(0, 0.1): off the default so that it matters
  norm_beta,    // N(0, 0.1)
};

class ModelWeights {
public:
  // Weights from `store` only.
  explicit ModelWeights(WeightStore& store) : store_(store) {}
  // Weights from `store`, generating any missing one from `seed`.
  ModelWeights(WeightStore& store, uint64_t seed) : store_(store), seed_(seed) {}

  // The constant for `name`, checked (or generated) to have `shape`. With
  // `match_elements`, any stored shape with as many elements is accepted (diffusers
  // keeps some γ as [C,1,1,1]).
  ValueId get(Builder& b, const std::string& name, const Shape& shape, ParamKind kind,
              bool match_elements = false);
  // Adds (or replaces nothing: keeps an existing) owned constant computed by the
  // model from its config, e.g. the latent statistics, and returns its value.
  ValueId derived(Builder& b, const std::string& name, const Shape& shape, std::vector<float> data);

  // A constant derived from parameter `name` (checked or generated as get() does):
  // element i of the result [out_shape] is element pick(i) of the parameter. Stored
  // once as "<name><suffix>"; e.g. one temporal tap of a 3-D conv's weight as a 2-D
  // conv weight, "<name>[t=0]". An out-of-range pick is an error naming both.
  ValueId derive(Builder& b, const std::string& name, const Shape& shape, ParamKind kind, const std::string& suffix,
                 const Shape& out_shape, const std::function<int64_t(int64_t)>& pick);

  WeightStore& store() { return store_; }
  bool seeded() const { return seed_.has_value(); }

private:
  WeightStore& store_;
  std::optional<uint64_t> seed_;
};

// Adds a diffusers model directory's weights to `store`: DIR/diffusion_pytorch_model.
// safetensors, or every shard its .safetensors.index.json lists. Errors name DIR when
// neither is there, and the index when it is not one.
Status add_diffusers_weights(const std::string& dir, WeightStore& store);

// Deterministic N(mean, std) values for a tensor: depends only on seed and name, so
// the order in which a builder asks does not matter.
std::vector<float> seeded_normal(uint64_t seed, const std::string& name, int64_t count, double mean,
                                 double std);

}  // namespace strata
