// The Qwen3 text encoder (models/qwen3_encoder.h) against transformers, on the
// zimage_pipeline case: the prompt's ids (case.json) run over the valid tokens only
// give the case's prompt_embeds.npy, which diffusers computed in float64 from the
// right-padded, masked 512-token run: by the interpreter within 1e-4, on the Vulkan
// device (lavapipe here) f32 within 1e-4 and f16 at >= 50 dB (peak-to-peak of the
// reference). The negative and the long (truncated at 512) prompts through the
// tokenizer (text/tokenizer.h) and the chat template give their embeddings too. Loading: transformers 4 and 5 config forms, single and sharded
// safetensors, bare keys, a missing tensor, a checkpoint without the last layer.
#include "compile/compile.h"
#include "ir/interpreter.h"
#include "ir/safetensors.h"
#include "models/qwen3_encoder.h"
#include "tests/cases.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace strata {
namespace {

namespace fs = std::filesystem;
constexpr const char* kCase = "zimage_pipeline";

std::string case_path(const std::string& file) { return test_cases::case_file(kCase, file); }

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The case's embeddings are float64 .npy files (read_npy takes f4 and f2 only).
struct Reference {
  Shape shape;
  std::vector<double> data;
};
Reference read_f64_npy(const std::string& path) {
  Reference r;
  const std::string bytes = read_text(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) {
    ADD_FAILURE() << path << ": not an .npy file";
    return r;
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  const size_t len_bytes = major == 1 ? 2 : 4;
  size_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) header_len |= size_t(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  const std::string header = bytes.substr(8 + len_bytes, header_len);
  EXPECT_NE(header.find("'descr': '<f8'"), std::string::npos) << path << ": " << header;
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << path << ": " << header;
  const size_t open = header.find("'shape': ("), close = header.find(')', open);
  std::stringstream dims(header.substr(open + 10, close - open - 10));
  std::string d;
  while (std::getline(dims, d, ','))
    if (d.find_first_of("0123456789") != std::string::npos) r.shape.push_back(std::stoll(d));
  const size_t data_at = 8 + len_bytes + header_len;
  r.data.resize(static_cast<size_t>(num_elements(r.shape)));
  EXPECT_EQ(bytes.size() - data_at, r.data.size() * 8) << path;
  if (bytes.size() - data_at == r.data.size() * 8) std::memcpy(r.data.data(), bytes.data() + data_at, bytes.size() - data_at);
  return r;
}

double max_abs_diff(const Tensor& got, const Reference& want) {
  if (got.shape != want.shape) return INFINITY;
  double m = 0.0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    const double d = std::fabs(double(got.data[i]) - want.data[i]);
    if (!(d <= m)) m = d;  // NaN propagates
  }
  return m;
}

// PSNR in dB, the peak being the reference's peak-to-peak (max − min).
double psnr(const Tensor& got, const Reference& want) {
  double lo = INFINITY, hi = -INFINITY, se = 0.0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    lo = std::min(lo, want.data[i]);
    hi = std::max(hi, want.data[i]);
    const double d = double(got.data[i]) - want.data[i];
    se += d * d;
  }
  const double mse = se / static_cast<double>(want.data.size());
  return 10.0 * std::log10((hi - lo) * (hi - lo) / mse);
}

// The first `rows` rows of `t` [R, C].
Tensor first_rows(const Tensor& t, int64_t rows) {
  const int64_t cols = t.shape[1];
  return Tensor({rows, cols}, std::vector<float>(t.data.begin(), t.data.begin() + rows * cols));
}

std::vector<int64_t> prompt_ids() {
  auto j = nlohmann::json::parse(read_text(case_path("case.json")));
  EXPECT_EQ(j["prompt"]["valid"].get<int64_t>(), 27);
  return j["prompt"]["ids"].get<std::vector<int64_t>>();
}

// hidden_states[-2] of `ids` padded to `rows` rows (0: none), by the interpreter.
Tensor interpret_ids(Qwen3Encoder& model, const std::vector<int64_t>& ids, int64_t rows = 0) {
  auto embeds = qwen3_embed(model, ids, rows);
  EXPECT_TRUE(embeds) << embeds.message();
  if (!embeds) return {};
  auto g = build_qwen3_encoder(model, {.tokens = embeds->shape[0]});
  EXPECT_TRUE(g) << g.message();
  if (!g) return {};
  auto out = interpret(*g, model.weights, {*embeds});
  EXPECT_TRUE(out) << out.message();
  if (!out) return {};
  EXPECT_EQ(out->size(), 1u);
  return (*out)[0];
}

// The same through compile() and the test device, in `precision` (f16 matrix weights
// with an f16 plan, as the DiT's plans take them).
// With `emulated_tensor_cores`, the target takes the tensor-core kernels emulated in
// plain GLSL (codegen::TensorCores::emulated, which lavapipe runs): the passes and
// kernels a GPU with tensor cores gets. `pipelines` receives the plan's kernel names.
Tensor run_on_device(Qwen3Encoder& model, const Tensor& embeds, Precision precision,
                     bool emulated_tensor_cores = false, std::string* pipelines = nullptr) {
  auto device = find_device();
  EXPECT_TRUE(device) << device.message();
  if (!device) return {};
  TargetOptions to;
  to.precision = precision;
  auto target = make_target(*device, to);
  EXPECT_TRUE(target) << target.message();
  if (!target) return {};
  if (emulated_tensor_cores) target->codegen.tensor_cores = codegen::TensorCores::emulated;
  Qwen3Options o{.tokens = embeds.shape[0], .weight_dtype = precision == Precision::f16 ? DType::f16 : DType::f32};
  auto g = build_qwen3_encoder(model, o);
  EXPECT_TRUE(g) << g.message();
  if (!g) return {};
  std::ostringstream log;
  auto program = compile(*g, model.weights, *target, {}, log);
  EXPECT_TRUE(program) << program.message() << "\n" << log.str();
  if (!program) return {};
  if (pipelines)
    for (const auto& p : program->plan.pipelines) *pipelines += p.name + "\n";
  auto loaded = LoadedProgram::load(std::move(*program), {}, log);
  EXPECT_TRUE(loaded) << loaded.message() << "\n" << log.str();
  if (!loaded) return {};
  auto out = (*loaded)->run({embeds});
  EXPECT_TRUE(out) << out.message();
  if (!out) return {};
  return (*out)[0];
}

// A directory under the system's temp folder, removed with its contents at the end.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / fmt::format("strata_qwen3_{}_{}", tag, ::getpid());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
};

// The case's text encoder tensors, renamed by `rename` ("" drops one), written to
// `dir` as one file or as `shards` shards with an index; plus `config` as config.json.
void write_checkpoint(const fs::path& dir, const std::string& config, int shards,
                      const std::function<std::string(const std::string&)>& rename) {
  auto file = SafetensorsFile::open(case_path("text_encoder/model.safetensors"));
  ASSERT_TRUE(file) << file.message();
  std::vector<std::vector<TensorView>> parts(static_cast<size_t>(shards));
  size_t i = 0;
  for (TensorView v : (*file)->tensors()) {
    v.name = rename(v.name);
    if (!v.name.empty()) parts[i++ % parts.size()].push_back(v);
  }
  std::ofstream(dir / "config.json") << config;
  if (shards == 1) {
    ASSERT_TRUE(write_safetensors((dir / "model.safetensors").string(), parts[0]).is_ok());
    return;
  }
  nlohmann::json index;
  index["metadata"] = {{"total_size", 0}};
  for (int s = 0; s < shards; ++s) {
    const std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards);
    ASSERT_TRUE(write_safetensors((dir / name).string(), parts[static_cast<size_t>(s)]).is_ok());
    for (const TensorView& v : parts[static_cast<size_t>(s)]) index["weight_map"][v.name] = name;
  }
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
}

std::string same_name(const std::string& n) { return n; }

TEST(Qwen3Encoder, InterpreterMatchesPromptEmbedsWithin1e4) {
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_qwen3_dir(case_path("text_encoder"));
  ASSERT_TRUE(model) << model.message();
  const std::vector<int64_t> ids = prompt_ids();
  ASSERT_EQ(ids.size(), 27u);
  // Only the 27 valid tokens run; the reference is the padded, masked 512-token run's
  // rows at the unmasked tokens.
  const Tensor got = interpret_ids(*model, ids);
  const Reference want = read_f64_npy(case_path("prompt_embeds.npy"));
  ASSERT_EQ(want.shape, (Shape{27, 64}));
  const double d = max_abs_diff(got, want);
  std::printf("[ qwen3    ] interpreter f32 prompt_embeds max |d| = %.3g\n", d);
  EXPECT_LE(d, 1e-4);
}

// The pipeline's ids of `prompt`: the chat template, then the first 512 tokens.
std::vector<int64_t> pipeline_ids(const std::string& prompt) {
  auto tokenizer = Tokenizer::from_dir(case_path("tokenizer"));
  EXPECT_TRUE(tokenizer) << tokenizer.message();
  auto chat = ChatTemplate::from_dir(case_path("tokenizer"));
  EXPECT_TRUE(chat) << chat.message();
  if (!tokenizer || !chat) return {};
  auto ids = encode_truncated(*tokenizer, chat->render_user_prompt(prompt), 512);
  EXPECT_TRUE(ids) << ids.message();
  if (!ids) return {};
  return std::vector<int64_t>(ids->ids.begin(), ids->ids.end());
}

// The negative prompt (29 tokens) and the long prompt (truncated to 512: the whole
// padded length, no pad at all) through the tokenizer, on the interpreter in f32 and
// on the device in f16.
TEST(Qwen3Encoder, NegativeAndTruncatedLongPromptMatchTheCase) {
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_qwen3_dir(case_path("text_encoder"));
  ASSERT_TRUE(model) << model.message();
  auto j = nlohmann::json::parse(read_text(case_path("case.json")));
  EXPECT_EQ(pipeline_ids(j["prompt"]["text"].get<std::string>()), prompt_ids());
  for (const char* key : {"negative_prompt", "long_prompt"}) {
    const std::vector<int64_t> ids = pipeline_ids(j[key]["text"].get<std::string>());
    const Reference want = read_f64_npy(case_path(j[key]["embeds_file"].get<std::string>()));
    ASSERT_EQ(want.shape.size(), 2u) << key;
    ASSERT_EQ(static_cast<int64_t>(ids.size()), want.shape[0]) << key;
    const double d = max_abs_diff(interpret_ids(*model, ids), want);
    auto embeds = qwen3_embed(*model, ids);
    ASSERT_TRUE(embeds) << embeds.message();
    const Tensor f16 = run_on_device(*model, *embeds, Precision::f16);
    ASSERT_EQ(f16.shape, want.shape) << key;
    const double db = psnr(f16, want);
    std::printf("[ qwen3    ] %-15s %3zu tokens: interpreter f32 max |d| = %.3g; Vulkan f16 PSNR %.1f dB\n", key,
                ids.size(), d, db);
    EXPECT_LE(d, 1e-4) << key;
    EXPECT_GE(db, 50.0) << key;
  }
  EXPECT_EQ(j["long_prompt"]["rows"].get<int64_t>(), 512);
}

TEST(Qwen3Encoder, RightPaddingChangesNoValidRow) {
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_qwen3_dir(case_path("text_encoder"));
  ASSERT_TRUE(model) << model.message();
  const std::vector<int64_t> ids = prompt_ids();
  const Tensor valid = interpret_ids(*model, ids);
  const Tensor padded = interpret_ids(*model, ids, 64);  // 37 zero rows after the prompt
  ASSERT_EQ(padded.shape, (Shape{64, 64}));
  // Causal: a valid token never sees a later row, whatever the pad rows hold.
  EXPECT_EQ(max_abs_diff(first_rows(padded, 27), valid), 0.0);
  for (float v : padded.data) ASSERT_TRUE(std::isfinite(v));
}

TEST(Qwen3Encoder, VulkanMatchesPromptEmbedsF32Within1e4AndF16Above50dB) {
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_qwen3_dir(case_path("text_encoder"));
  ASSERT_TRUE(model) << model.message();
  auto embeds = qwen3_embed(*model, prompt_ids());
  ASSERT_TRUE(embeds) << embeds.message();
  const Reference want = read_f64_npy(case_path("prompt_embeds.npy"));
  const Tensor f32 = run_on_device(*model, *embeds, Precision::f32);
  const Tensor f16 = run_on_device(*model, *embeds, Precision::f16);
  ASSERT_EQ(f32.shape, want.shape);
  ASSERT_EQ(f16.shape, want.shape);
  for (float v : f16.data) ASSERT_TRUE(std::isfinite(v));
  const double d32 = max_abs_diff(f32, want), db16 = psnr(f16, want);
  std::printf("[ qwen3    ] Vulkan f32 max |d| = %.3g; f16 max |d| = %.3g, PSNR %.1f dB\n", d32,
              max_abs_diff(f16, want), db16);
  EXPECT_LE(d32, 1e-4);
  EXPECT_GE(db16, 50.0);
}

TEST(Qwen3Encoder, ReadsTheCaseConfigInTransformers5Form) {
  STRATA_REQUIRE_CASE(kCase);
  const std::string path = case_path("text_encoder/config.json");
  auto c = parse_qwen3_config(read_text(path), path);
  ASSERT_TRUE(c) << c.message();
  // The values of text_encoder/config.json.
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->num_hidden_layers, 3);
  EXPECT_EQ(c->num_attention_heads, 4);
  EXPECT_EQ(c->num_key_value_heads, 2);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->intermediate_size, 160);
  EXPECT_EQ(c->vocab_size, 764);
  EXPECT_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_EQ(c->rope_theta, 1e6);
}

// transformers 4 writes rope_theta at the top level (and Qwen3-4B's config has no
// rope_parameters); head_dim absent defaults to hidden / heads.
TEST(Qwen3Encoder, Transformers4ConfigGivesTheSameModel) {
  STRATA_REQUIRE_CASE(kCase);
  TempDir dir("v4");
  const std::string v4 = R"({"architectures": ["Qwen3ForCausalLM"], "attention_bias": false,
    "hidden_act": "silu", "hidden_size": 64, "intermediate_size": 160, "max_position_embeddings": 1024,
    "model_type": "qwen3", "num_attention_heads": 4, "num_hidden_layers": 3, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
    "tie_word_embeddings": true, "torch_dtype": "float32", "transformers_version": "4.51.0",
    "use_sliding_window": false, "vocab_size": 764})";
  std::ofstream(dir.path / "config.json") << v4;
  fs::create_symlink(fs::absolute(case_path("text_encoder/model.safetensors")), dir.path / "model.safetensors");
  auto c = parse_qwen3_config(v4, "v4");
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->head_dim, 16);
  auto v4_model = load_qwen3_dir(dir.str());
  auto v5_model = load_qwen3_dir(case_path("text_encoder"));
  ASSERT_TRUE(v4_model) << v4_model.message();
  ASSERT_TRUE(v5_model) << v5_model.message();
  const std::vector<int64_t> ids = prompt_ids();
  EXPECT_EQ(max_abs_diff(interpret_ids(*v4_model, ids), interpret_ids(*v5_model, ids)), 0.0);
}

TEST(Qwen3Encoder, ConfigErrorsNameTheField) {
  const std::string base = R"("hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
    "num_hidden_layers": 3, "intermediate_size": 160, "vocab_size": 764)";
  auto parse = [&](const std::string& extra) { return parse_qwen3_config("{" + base + extra + "}", "te/config.json"); };
  ASSERT_TRUE(parse(R"(, "rope_theta": 10000)"));
  ASSERT_TRUE(parse(R"(, "rope_parameters": {"rope_theta": 10000, "rope_type": "default"})"));
  const std::map<std::string, std::string> bad = {
      {"", "rope_theta"},
      {R"(, "rope_theta": "big")", "rope_theta"},
      {R"(, "rope_parameters": {"rope_theta": -1})", "rope_parameters.rope_theta"},
      {R"(, "rope_parameters": {"rope_theta": 1e6, "rope_type": "yarn"})", "rope_parameters.rope_type"},
      {R"(, "rope_theta": 1e6, "rope_scaling": {"rope_type": "linear", "factor": 2})", "rope_scaling.rope_type"},
      {R"(, "rope_theta": 1e6, "model_type": "qwen2")", "model_type"},
      {R"(, "rope_theta": 1e6, "head_dim": 15)", "head_dim"},
      {R"(, "rope_theta": 1e6, "head_dim": "wide")", "head_dim"},
      {R"(, "rope_theta": 1e6, "use_sliding_window": true)", "use_sliding_window"},
      {R"(, "rope_theta": 1e6, "layer_types": ["full_attention", "sliding_attention"])", "layer_types"},
      {R"(, "rope_theta": 1e6, "hidden_act": "gelu")", "hidden_act"},
      {R"(, "rope_theta": 1e6, "rms_norm_eps": 0)", "rms_norm_eps"},
  };
  for (const auto& [extra, field] : bad) {
    auto c = parse(extra);
    ASSERT_FALSE(c) << extra;
    EXPECT_NE(c.message().find("te/config.json"), std::string::npos) << c.message();
    EXPECT_NE(c.message().find(field), std::string::npos) << field << ": " << c.message();
  }
  auto groups = parse_qwen3_config(R"({"num_attention_heads": 6, "num_key_value_heads": 4, "hidden_size": 96,
                                       "rope_theta": 1e6})",
                                   "te/config.json");
  ASSERT_FALSE(groups);
  EXPECT_NE(groups.message().find("num_key_value_heads"), std::string::npos) << groups.message();
}

// Sharded with an index, keys bare (as a Qwen3Model saves them) or under "model.":
// the same tensors give the same rows as the case's single file.
TEST(Qwen3Encoder, ShardedAndBareKeyCheckpointsLoadLikeTheSingleFile) {
  STRATA_REQUIRE_CASE(kCase);
  const std::string config = read_text(case_path("text_encoder/config.json"));
  auto single = load_qwen3_dir(case_path("text_encoder"));
  ASSERT_TRUE(single) << single.message();
  EXPECT_EQ(single->prefix, "model.");
  const std::vector<int64_t> ids = prompt_ids();
  const Tensor want = interpret_ids(*single, ids);

  TempDir sharded("sharded");
  write_checkpoint(sharded.path, config, 3, same_name);
  auto s = load_qwen3_dir(sharded.str());
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(s->prefix, "model.");
  EXPECT_EQ(max_abs_diff(interpret_ids(*s, ids), want), 0.0);

  TempDir bare("bare");
  write_checkpoint(bare.path, config, 2, [](const std::string& n) { return n.substr(n.find('.') + 1); });
  auto b = load_qwen3_dir(bare.str());
  ASSERT_TRUE(b) << b.message();
  EXPECT_EQ(b->prefix, "");
  EXPECT_EQ(max_abs_diff(interpret_ids(*b, ids), want), 0.0);
}

TEST(Qwen3Encoder, AMissingTensorIsAnErrorNamingIt) {
  STRATA_REQUIRE_CASE(kCase);
  TempDir dir("missing");
  const std::string gone = "model.layers.1.mlp.up_proj.weight";
  write_checkpoint(dir.path, read_text(case_path("text_encoder/config.json")), 1,
                   [&](const std::string& n) { return n == gone ? std::string() : n; });
  auto model = load_qwen3_dir(dir.str());
  ASSERT_TRUE(model) << model.message();
  auto g = build_qwen3_encoder(*model, {.tokens = 5});
  ASSERT_FALSE(g);
  EXPECT_NE(g.message().find(gone), std::string::npos) << g.message();
  EXPECT_NE(g.message().find(dir.str()), std::string::npos) << g.message();

  TempDir no_embed("noembed");
  write_checkpoint(no_embed.path, read_text(case_path("text_encoder/config.json")), 1,
                   [](const std::string& n) { return n.find("embed_tokens") != std::string::npos ? "" : n; });
  auto e = load_qwen3_dir(no_embed.str());
  ASSERT_FALSE(e);
  EXPECT_NE(e.message().find("embed_tokens.weight"), std::string::npos) << e.message();

  TempDir empty("empty");
  std::ofstream(empty.path / "config.json") << read_text(case_path("text_encoder/config.json"));
  auto none = load_qwen3_dir(empty.str());
  ASSERT_FALSE(none);
  EXPECT_NE(none.message().find("model.safetensors"), std::string::npos) << none.message();
}

// hidden_states[-2] is the last layer's input: a checkpoint without the last layer
// and the final norm gives the same rows.
TEST(Qwen3Encoder, TheLastLayerAndFinalNormAreNeverRead) {
  STRATA_REQUIRE_CASE(kCase);
  TempDir dir("nolast");
  write_checkpoint(dir.path, read_text(case_path("text_encoder/config.json")), 1, [](const std::string& n) {
    return n.rfind("model.layers.2.", 0) == 0 || n == "model.norm.weight" ? std::string() : n;
  });
  auto cut = load_qwen3_dir(dir.str());
  auto full = load_qwen3_dir(case_path("text_encoder"));
  ASSERT_TRUE(cut) << cut.message();
  ASSERT_TRUE(full) << full.message();
  const std::vector<int64_t> ids = prompt_ids();
  EXPECT_EQ(max_abs_diff(interpret_ids(*cut, ids), interpret_ids(*full, ids)), 0.0);
}

TEST(Qwen3Encoder, EmbedGathersRowsAndPadsWithZeros) {
  Qwen3Config c;
  c.hidden_size = 8;
  c.vocab_size = 10;
  Qwen3Encoder model = seeded_qwen3(c, 3);
  auto e = qwen3_embed(model, {4, 9, 4}, 5);
  ASSERT_TRUE(e) << e.message();
  ASSERT_EQ(e->shape, (Shape{5, 8}));
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(e->data[static_cast<size_t>(i)], e->data[static_cast<size_t>(16 + i)]) << "the same id, the same row";
    EXPECT_EQ(e->data[static_cast<size_t>(24 + i)], 0.0f);
    EXPECT_EQ(e->data[static_cast<size_t>(32 + i)], 0.0f);
  }
  EXPECT_NE(e->data[0], e->data[8]);
  auto out_of_range = qwen3_embed(model, {3, 10});
  ASSERT_FALSE(out_of_range);
  EXPECT_NE(out_of_range.message().find("token id 10"), std::string::npos) << out_of_range.message();
  EXPECT_FALSE(qwen3_embed(model, {}));
  EXPECT_FALSE(qwen3_embed(model, {1, 2, 3}, 2));
}

TEST(Qwen3Encoder, RopeTablesAreTransformersDefaultRotaryEmbedding) {
  Qwen3Config c;
  c.head_dim = 8;
  c.rope_theta = 10000.0;
  const Qwen3Rope t = qwen3_rope_tables(c, 4);
  ASSERT_EQ(t.cos.size(), 16u);
  // inv_freq_i = 10000^(-2i/8): 1, 0.1, 0.01, 0.001.
  EXPECT_EQ(t.cos[0], 1.0f);  // position 0
  EXPECT_EQ(t.sin[3], 0.0f);
  EXPECT_NEAR(t.cos[4 * 3 + 0], std::cos(3.0), 1e-7);   // position 3, pair 0
  EXPECT_NEAR(t.sin[4 * 2 + 1], std::sin(0.2), 1e-7);   // position 2, pair 1
  EXPECT_NEAR(t.sin[4 * 3 + 3], std::sin(0.003), 1e-9);  // position 3, pair 3
}

// The released head layout (head_dim 128, 4 query heads per kv head, heads · head_dim
// ≠ hidden) at a small width, seeded bf16 weights: transformers' parameter shapes,
// and Vulkan f32 against the interpreter. The last layer is never built.
TEST(Qwen3Encoder, SeededReleasedHeadLayoutOnVulkanMatchesTheInterpreter) {
  Qwen3Config c = qwen3_4b_config();
  c.hidden_size = 192;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 1;
  c.intermediate_size = 320;
  c.num_hidden_layers = 3;
  c.vocab_size = 1000;
  Qwen3Encoder model = seeded_qwen3(c, 11);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 40; ++i) ids.push_back((i * 37 + 5) % 1000);
  const Tensor want = interpret_ids(model, ids);
  const std::map<std::string, Shape> shapes = {
      {"model.layers.0.self_attn.q_proj.weight", {512, 192}}, {"model.layers.0.self_attn.k_proj.weight", {128, 192}},
      {"model.layers.0.self_attn.v_proj.weight", {128, 192}}, {"model.layers.0.self_attn.o_proj.weight", {192, 512}},
      {"model.layers.1.self_attn.q_norm.weight", {128}},      {"model.layers.1.mlp.gate_proj.weight", {320, 192}},
      {"model.layers.1.mlp.down_proj.weight", {192, 320}},    {"model.layers.1.post_attention_layernorm.weight", {192}}};
  for (const auto& [name, shape] : shapes) {
    auto view = model.weights.get(name);
    ASSERT_TRUE(view) << view.message();
    EXPECT_EQ(view->shape, shape) << name;
    EXPECT_EQ(view->dtype, DType::bf16) << name;
  }
  EXPECT_FALSE(model.weights.contains("model.layers.2.self_attn.q_proj.weight"));
  EXPECT_FALSE(model.weights.contains("model.norm.weight"));
  auto embeds = qwen3_embed(model, ids);
  ASSERT_TRUE(embeds) << embeds.message();
  const Tensor got = run_on_device(model, *embeds, Precision::f32);
  double scale = 0.0;
  for (float v : want.data) scale = std::max(scale, double(std::fabs(v)));
  EXPECT_GT(scale, 0.1);
  const double d = max_abs_diff(got, want);
  std::printf("[ qwen3    ] seeded head_dim 128, GQA 4: Vulkan f32 vs interpreter max |d| = %.3g (max |x| %.3g)\n",
              d, scale);
  EXPECT_LE(d, 1e-5 * std::max(1.0, scale));
}

// The released head layout's f16 plan on the tensor-core kernels (emulated on
// lavapipe): the projections and the MLP take the cooperative-matrix GEMM and the
// causal attention (96 query rows: whole 32-row blocks) the cooperative-matrix
// flash kernel, as on a GPU with tensor cores; >= 50 dB against the interpreter's f32.
TEST(Qwen3Encoder, SeededReleasedHeadLayoutF16OnTensorCoreKernels) {
  Qwen3Config c = qwen3_4b_config();
  c.hidden_size = 256;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 1;
  c.intermediate_size = 512;
  c.num_hidden_layers = 3;
  c.vocab_size = 1000;
  Qwen3Encoder model = seeded_qwen3(c, 12);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 96; ++i) ids.push_back((i * 53 + 7) % 1000);
  const Tensor want32 = interpret_ids(model, ids);
  auto embeds = qwen3_embed(model, ids);
  ASSERT_TRUE(embeds) << embeds.message();
  std::string pipelines;
  const Tensor got = run_on_device(model, *embeds, Precision::f16, /*emulated_tensor_cores=*/true, &pipelines);
  ASSERT_EQ(got.shape, want32.shape);
  for (float v : got.data) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(pipelines.find("conv_gemm_coop.comp"), std::string::npos) << pipelines;
  EXPECT_NE(pipelines.find("attention_coop_dsplit.comp"), std::string::npos) << pipelines;
  const Reference want{want32.shape, std::vector<double>(want32.data.begin(), want32.data.end())};
  const double db = psnr(got, want);
  std::printf("[ qwen3    ] seeded head_dim 128, GQA 4, 96 tokens: f16 tensor-core kernels (emulated) %.1f dB\n", db);
  EXPECT_GE(db, 50.0);
}

}  // namespace
}  // namespace strata
