#include "models/weights.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace strata {
namespace fs = std::filesystem;

namespace {

// The shard files a diffusers "*.safetensors.index.json" lists (its weight_map).
Expected<std::vector<std::string>> shard_files(const fs::path& index_path) {
  std::ifstream f(index_path);
  if (!f) return error("cannot open '{}'", index_path.string());
  std::stringstream ss;
  ss << f.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return error("'{}': not a safetensors index (no weight_map object)", index_path.string());
  std::set<std::string> files;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string()) return error("'{}': weight_map entry '{}' is not a file name", index_path.string(), tensor);
    files.insert(file.get<std::string>());
  }
  return std::vector<std::string>(files.begin(), files.end());
}

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
  const uint64_t start = seed ^ fnv1a(name);
  std::vector<float> out(static_cast<size_t>(count));
  const double two_pi = 6.283185307179586;
  // Pair p (elements 2p, 2p + 1) takes draws 2p and 2p + 1; splitmix64's state
  // advances by the same constant per draw, so a chunk starting at pair p starts from
  // state start + 2p·γ and every chunk computes exactly the values of one pass.
  auto fill = [&](int64_t first_pair, int64_t end_pair) {
    uint64_t state = start + static_cast<uint64_t>(2 * first_pair) * 0x9e3779b97f4a7c15ull;
    for (int64_t p = first_pair; p < end_pair; ++p) {
      const int64_t i = 2 * p;
      // Box-Muller: two uniforms in (0, 1] give two normals.
      double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
      double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
      double r = std::sqrt(-2.0 * std::log(u1));
      out[static_cast<size_t>(i)] = static_cast<float>(mean + std * r * std::cos(two_pi * u2));
      if (i + 1 < count) out[static_cast<size_t>(i + 1)] = static_cast<float>(mean + std * r * std::sin(two_pi * u2));
    }
  };
  const int64_t pairs = (count + 1) / 2;
  constexpr int64_t kPairsPerThread = 1 << 19;  // below ~1 M values a thread costs more than it saves
  const int64_t threads =
      std::clamp<int64_t>(pairs / kPairsPerThread, 1, std::max<int64_t>(1, std::thread::hardware_concurrency()));
  if (threads == 1) {
    fill(0, pairs);
    return out;
  }
  std::vector<std::thread> pool;
  const int64_t per = (pairs + threads - 1) / threads;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back(fill, t * per, std::min(pairs, (t + 1) * per));
  for (std::thread& th : pool) th.join();
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
    std::atomic<bool> failed{false};
    std::atomic<int64_t> bad{0};  // an out-of-range pick, when failed
    auto copy = [&](int64_t first, int64_t end) {
      for (int64_t i = first; i < end; ++i) {
        const int64_t from = pick(i);
        if (from < 0 || from >= limit) {
          bad = from;
          failed = true;
          return;
        }
        data[static_cast<size_t>(i)] = view->at(from);
      }
    };
    // Full-size video convs derive hundreds of millions of values: copy on all cores.
    const int64_t threads = std::clamp<int64_t>(count / (1 << 20), 1, std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    const int64_t per = (count + threads - 1) / threads;
    for (int64_t t = 1; t < threads; ++t) pool.emplace_back(copy, t * per, std::min(count, (t + 1) * per));
    copy(0, std::min(count, per));
    for (std::thread& th : pool) th.join();
    if (failed) {
      b.fail(error("deriving '{}': element {} of '{}' [{} elements] is out of range", derived_name, bad.load(), name,
                   limit));
      return kNoValue;
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

Status add_diffusers_weights(const std::string& dir, WeightStore& store) {
  const fs::path root(dir);
  const fs::path single = root / "diffusion_pytorch_model.safetensors";
  const fs::path index = root / "diffusion_pytorch_model.safetensors.index.json";
  if (fs::exists(single)) return store.add_file(single.string());
  if (!fs::exists(index))
    return error("'{}' has no diffusion_pytorch_model.safetensors (nor a sharded .index.json)", dir);
  STRATA_ASSIGN_OR_RETURN(auto shards, shard_files(index));
  for (const auto& shard : shards) STRATA_RETURN_IF_ERROR(store.add_file((root / shard).string()));
  return Status::ok();
}

}  // namespace strata
