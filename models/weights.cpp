#include "models/weights.h"

#include <cmath>

namespace strata {
namespace {

// splitmix64: a small, well-mixed generator whose output is the same on every
// platform (std::normal_distribution is not specified bit for bit).
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

int64_t fan_in(const Shape& shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

}  // namespace

std::vector<float> seeded_normal(uint64_t seed, const std::string& name, int64_t count, double mean,
                                 double std) {
  uint64_t state = seed ^ fnv1a(name);
  std::vector<float> out(static_cast<size_t>(count));
  const double two_pi = 6.283185307179586;
  for (int64_t i = 0; i < count; i += 2) {
    // Box-Muller: two uniforms in (0, 1] give two normals.
    double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
    double r = std::sqrt(-2.0 * std::log(u1));
    out[static_cast<size_t>(i)] = static_cast<float>(mean + std * r * std::cos(two_pi * u2));
    if (i + 1 < count) out[static_cast<size_t>(i + 1)] = static_cast<float>(mean + std * r * std::sin(two_pi * u2));
  }
  return out;
}

ValueId ModelWeights::get(Builder& b, const std::string& name, const Shape& shape, ParamKind kind,
                          bool match_elements) {
  if (!b.ok()) return kNoValue;
  if (seed_ && !store_.contains(name)) {
    double mean = 0.0, std = 0.0;
    switch (kind) {
      case ParamKind::conv_weight: std = 1.0 / std::sqrt(static_cast<double>(fan_in(shape))); break;
      case ParamKind::bias: std = 0.02; break;
      case ParamKind::norm_gamma: mean = 1.0; std = 0.1; break;
      case ParamKind::norm_beta: std = 0.1; break;
    }
    Status s = store_.add_owned(name, shape, seeded_normal(*seed_, name, num_elements(shape), mean, std));
    if (!s.is_ok()) return b.weight(name, shape, match_elements);  // reports through the builder
  }
  return b.weight(name, shape, match_elements);
}

ValueId ModelWeights::derive(Builder& b, const std::string& name, const Shape& shape, ParamKind kind,
                             const std::string& suffix, const Shape& out_shape,
                             const std::function<int64_t(int64_t)>& pick) {
  if (!b.ok()) return kNoValue;
  const std::string derived_name = name + suffix;
  if (!store_.contains(derived_name)) {
    // get() generates a seeded parameter and checks a stored one; its value is not used.
    Graph scratch;
    Builder check(scratch, &store_);
    if (get(check, name, shape, kind) == kNoValue) {
      b.fail(check.status());
      return kNoValue;
    }
    auto view = store_.get(name);
    if (!view) {
      b.fail(view.status());
      return kNoValue;
    }
    const int64_t count = num_elements(out_shape), limit = num_elements(view->shape);
    std::vector<float> data(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      const int64_t from = pick(i);
      if (from < 0 || from >= limit) {
        b.fail(error("deriving '{}': element {} of '{}' [{} elements] is out of range", derived_name, from, name, limit));
        return kNoValue;
      }
      data[static_cast<size_t>(i)] = view->at(from);
    }
    Status s = store_.add_owned(derived_name, out_shape, std::move(data));
    if (!s.is_ok()) {
      b.fail(s);
      return kNoValue;
    }
  }
  return b.weight(derived_name, out_shape);
}

ValueId ModelWeights::derived(Builder& b, const std::string& name, const Shape& shape, std::vector<float> data) {
  if (!b.ok()) return kNoValue;
  if (!store_.contains(name)) {
    Status s = store_.add_owned(name, shape, std::move(data));
    (void)s;  // a failure shows up as the builder's lookup error below
  }
  return b.weight(name, shape);
}

}  // namespace strata
