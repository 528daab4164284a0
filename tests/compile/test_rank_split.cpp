// Bands split across ranks (compile/rank_split.h), without MPI: R ranks run as R
// threads in this process, each with its own device and LoadedProgram, exchanging
// rows through an in-process allgather. Checked: every band dispatch runs on exactly
// one rank and every other dispatch on all; the output of 2, 3 and 4 ranks is
// bit-identical to one rank's on seeded Flux- and Qwen-Image-style decoders banded
// under a small binding limit (GroupNorms over windows included); a failed exchange
// stops the run with an error naming the node; bad layouts are errors.
#include "compile/compile.h"
#include "compile/rank_split.h"
#include "models/vae.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace strata {
namespace {

// An alltoall among `ranks` threads: each writes what it sends into the slots
// (from, to), all wait, each copies the slots (from, itself) out, all wait again
// before the slots are reused.
class ThreadExchange {
public:
  explicit ThreadExchange(int ranks)
      : ranks_(static_cast<size_t>(ranks)), slots_(ranks_ * ranks_), sync_(ranks) {}

  class Rank : public RankExchange {
  public:
    Rank(ThreadExchange& shared, int rank) : shared_(shared), rank_(static_cast<size_t>(rank)) {}
    Status alltoall(std::span<const std::byte> send, std::span<const uint64_t> send_counts, std::span<std::byte> recv,
                    std::span<const uint64_t> recv_counts, uint64_t largest) override {
      const size_t n = shared_.ranks_;
      uint64_t at = 0;
      for (size_t to = 0; to < n; ++to) {
        shared_.slots_[rank_ * n + to].assign(send.begin() + static_cast<ptrdiff_t>(at),
                                              send.begin() + static_cast<ptrdiff_t>(at + send_counts[to]));
        at += send_counts[to];
        if (send_counts[to] > largest) return error("sending {} bytes, more than the largest {}", send_counts[to], largest);
      }
      shared_.sync_.arrive_and_wait();
      at = 0;
      Status status = Status::ok();
      for (size_t from = 0; from < n; ++from) {
        const std::vector<std::byte>& slot = shared_.slots_[from * n + rank_];
        if (slot.size() != recv_counts[from])
          status = error("rank {} sent {} bytes, not {}", from, slot.size(), recv_counts[from]);
        else if (!slot.empty())  // an empty vector's data() may be null, which memcpy may not take
          std::memcpy(recv.data() + at, slot.data(), slot.size());
        at += recv_counts[from];
      }
      shared_.sync_.arrive_and_wait();
      ++exchanges;
      received += recv.size();
      return status;
    }
    int exchanges = 0;
    uint64_t received = 0;

  private:
    ThreadExchange& shared_;
    size_t rank_;
  };

private:
  size_t ranks_;
  std::vector<std::vector<std::byte>> slots_;
  std::barrier<> sync_;
};

// A rank whose peer is gone: every exchange fails.
class BrokenExchange : public RankExchange {
public:
  Status alltoall(std::span<const std::byte>, std::span<const uint64_t>, std::span<std::byte>,
                  std::span<const uint64_t>, uint64_t) override {
    return error("rank 1 exited");
  }
};

Tensor test_latent(int64_t h, int64_t w) {
  Tensor z({1, 16, h, w});
  for (size_t i = 0; i < z.data.size(); ++i) z.data[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 2.0);
  return z;
}

// The seeded decoder compiled for the test device under `limit` (bands). The program
// reads its weights from `vae` when loaded: keep it alive.
Expected<Program> compile_decoder(Vae& vae, const Tensor& latent, Precision precision, uint64_t limit) {
  STRATA_ASSIGN_OR_RETURN(Graph g, build_decoder(vae, {.latent_h = latent.shape[2], .latent_w = latent.shape[3]}));
  STRATA_ASSIGN_OR_RETURN(runtime::DeviceInfo device, find_device());
  STRATA_ASSIGN_OR_RETURN(Target target, make_target(device, {.precision = precision, .binding_limit = limit, .memory_budget = {}}));
  std::ostringstream log;
  return compile(g, vae.weights, target, CompilerOptions{}, log);
}

// `ranks` threads, each loading `program` as its rank and decoding `latent`; every
// rank's output.
std::vector<Expected<Tensor>> decode_on_ranks(const Program& program, const Tensor& latent, int ranks,
                                              std::vector<int>* exchanges = nullptr,
                                              const RankCostModel& costs = {}) {
  ThreadExchange shared(ranks);
  std::vector<Expected<Tensor>> out(static_cast<size_t>(ranks), error("not run"));
  std::vector<int> counts(static_cast<size_t>(ranks), 0);
  std::vector<std::thread> threads;
  std::mutex loading;  // one load at a time: they read the same WeightStore
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      ThreadExchange::Rank exchange(shared, r);
      std::ostringstream log;
      LoadOptions options;
      options.pipeline_threads = 1;
      options.ranks = {ranks, r};
      options.exchange = &exchange;
      options.rank_costs = costs;
      auto loaded = [&] {
        std::lock_guard lock(loading);
        return LoadedProgram::load(program, options, log);
      }();
      if (!loaded) {
        out[static_cast<size_t>(r)] = loaded.status();
        return;
      }
      auto result = (*loaded)->run({latent});
      out[static_cast<size_t>(r)] = result ? Expected<Tensor>(std::move((*result)[0])) : Expected<Tensor>(result.status());
      counts[static_cast<size_t>(r)] = exchange.exchanges;
    });
  for (std::thread& t : threads) t.join();
  if (exchanges) *exchanges = counts;
  return out;
}

// Cost models that favour one side: messages cost a second each and bytes and
// operations nothing (recompute wherever it saves a message), or operations forever.
const RankCostModel kRecomputeFavoured{.link_bytes_per_s = 1e30, .message_latency_s = 1, .flops_per_s = 1e30};
const RankCostModel kNeverRecompute{.link_bytes_per_s = 25e9, .message_latency_s = 20e-6, .flops_per_s = 1e-30};

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape == b.shape && std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) == 0;
}

TEST(RankSplit, EveryBandOnOneRankEverythingElseOnAll) {
  Vae vae = seeded_vae(flux_small_config(), 7);
  auto program = compile_decoder(vae, test_latent(20, 12), Precision::f16, 160 << 10);
  ASSERT_TRUE(program) << program.message();
  const runtime::Plan& plan = program->plan;
  int64_t band_dispatches = 0;
  for (const runtime::DispatchDesc& d : plan.dispatches)
    band_dispatches += d.label.find(":band ") != std::string::npos || d.label.find(":apply ") != std::string::npos ||
                       d.label.find(":stats ") != std::string::npos;
  ASSERT_GT(band_dispatches, 0) << "the limit must band the decoder";
  for (int ranks : {2, 3, 4}) {
    SCOPED_TRACE(ranks);
    std::map<std::string, int> runs;  // label -> ranks running it
    int64_t kept = 0;
    for (int r = 0; r < ranks; ++r) {
      auto split = split_plan_for_rank(plan, {ranks, r}, kNeverRecompute);
      ASSERT_TRUE(split) << split.message();
      EXPECT_EQ(split->shared_dispatches, band_dispatches);
      ASSERT_EQ(split->entries.size(), 1u);
      EXPECT_EQ(split->entries[0].segments.size(), split->entries[0].splits.size() + 1);
      EXPECT_EQ(static_cast<int64_t>(split->entries[0].splits.size()), split->split_nodes);
      for (const runtime::DispatchDesc& d : split->plan.dispatches) ++runs[d.label];
      kept += split->kept_dispatches;
      // Shares of a banded node tile one run of bytes, in band order, owners
      // non-decreasing (statistics windows: one run per segment).
      for (const SplitNode& n : split->entries[0].splits)
        for (size_t j = 1; j < n.shares.size() && n.kind != "stats"; ++j) {
          EXPECT_EQ(n.shares[j].offset, n.shares[j - 1].offset + n.shares[j - 1].bytes) << n.node;
          EXPECT_GE(n.shares[j].owner, n.shares[j - 1].owner) << n.node;
        }
    }
    const int64_t others = static_cast<int64_t>(plan.dispatches.size()) - band_dispatches;
    EXPECT_EQ(kept, band_dispatches + others * ranks);
    for (const runtime::DispatchDesc& d : plan.dispatches) {
      const bool band = d.label.find(":band ") != std::string::npos || d.label.find(":apply ") != std::string::npos ||
                        d.label.find(":stats ") != std::string::npos;
      EXPECT_EQ(runs[d.label], band ? 1 : ranks) << d.label;
    }
  }
  // One rank: the plan unchanged but for its single entry's name.
  auto one = split_plan_for_rank(plan, {1, 0});
  ASSERT_TRUE(one) << one.message();
  EXPECT_EQ(one->split_nodes, 0);
  EXPECT_EQ(one->plan.dispatches.size(), plan.dispatches.size());
}

struct Param {
  std::string arch;
  Precision precision;
  int64_t h, w;
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << p.arch << (p.precision == Precision::f16 ? " f16 " : " f32 ") << p.h << "x" << p.w;
}

class RankDecode : public ::testing::TestWithParam<Param> {};

TEST_P(RankDecode, BitIdenticalToOneRank) {
  const Param& p = GetParam();
  Vae vae = p.arch == "flux_small" ? seeded_vae(flux_small_config(), 7) : seeded_vae(qwen_small_config(), 7);
  const Tensor latent = test_latent(p.h, p.w);
  auto program = compile_decoder(vae, latent, p.precision, 160 << 10);
  ASSERT_TRUE(program) << program.message();
  auto one = decode_on_ranks(*program, latent, 1);
  ASSERT_TRUE(one[0]) << one[0].message();
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(ranks);
    std::vector<int> exchanges;
    auto many = decode_on_ranks(*program, latent, ranks, &exchanges);
    auto split = split_plan_for_rank(program->plan, {ranks, 0});
    ASSERT_TRUE(split);
    ASSERT_GT(split->split_nodes, 0);
    for (int r = 0; r < ranks; ++r) {
      ASSERT_TRUE(many[static_cast<size_t>(r)]) << many[static_cast<size_t>(r)].message();
      EXPECT_TRUE(same_bytes(*many[static_cast<size_t>(r)], *one[0])) << "rank " << r << " of " << ranks;
      int moving = 0;  // split nodes after which some rank receives bytes
      for (const SplitNode& n : split->entries[0].splits) moving += !n.transfers.empty();
      EXPECT_EQ(exchanges[static_cast<size_t>(r)], moving) << "one exchange per split node that moves bytes";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeded, RankDecode,
                         ::testing::Values(Param{"flux_small", Precision::f16, 20, 12},
                                           Param{"flux_small", Precision::f32, 12, 12},
                                           Param{"qwen_small", Precision::f16, 24, 16}),
                         [](const auto& info) {
                           return info.param.arch + (info.param.precision == Precision::f16 ? "_f16" : "_f32");
                         });

// After a conv whose output the next conv or GroupNorm reads in bands, a rank receives
// the rows its own bands read (the halos), not the other ranks' rows; after a
// GroupNorm's statistics windows it receives the other ranks' partial slots (which the
// reduce, on every rank, reads whole), a few KiB, not the tensor.
TEST(RankSplit, RanksReceiveHalosAndStatisticsPartialsNotWholeTensors) {
  Vae vae = seeded_vae(flux_small_config(), 7);
  auto program = compile_decoder(vae, test_latent(20, 12), Precision::f16, 160 << 10);
  ASSERT_TRUE(program) << program.message();
  for (int ranks : {2, 4})
    for (int r = 0; r < ranks; ++r) {
      SCOPED_TRACE(fmt::format("rank {} of {}", r, ranks));
      auto split = split_plan_for_rank(program->plan, {ranks, r}, kNeverRecompute);
      ASSERT_TRUE(split) << split.message();
      const std::vector<SplitNode>& splits = split->entries[0].splits;
      int conv_conv = 0, conv_norm = 0, stats = 0;
      for (size_t k = 0; k + 1 < splits.size(); ++k) {
        const SplitNode& n = splits[k];
        const uint64_t others = n.share_bytes() - n.owned(r);
        if (n.kind == "stats") {
          ++stats;
          EXPECT_EQ(n.received(r), others) << n.node << ": the reduce reads every slot";
          EXPECT_LE(n.share_bytes(), uint64_t{16} << 10) << n.node << ": partial slots, not rows";
          continue;
        }
        EXPECT_LE(n.received(r), others) << n.node;
        if (n.kind == "band" && n.received(r) < others) {
          conv_conv += splits[k + 1].kind == "band";
          conv_norm += splits[k + 1].kind == "stats";
        }
      }
      EXPECT_GT(conv_conv, 0) << "no conv -> conv boundary exchanges less than the tensor";
      EXPECT_GT(conv_norm, 0) << "no conv -> norm boundary exchanges less than the tensor";
      EXPECT_GT(stats, 0) << "no statistics windows split";
      EXPECT_LT(split->received_bytes, split->gathered_bytes / 2) << split->received_bytes << " received";
    }
}

// Recompute or exchange (RankCostModel): where a message costs a second and
// operations nothing, convs whose rows only the ranks' own bands read later are
// recomputed where that saves messages (their neighbours' bands run on the ranks that
// read their rows, and no byte crosses after them); where operations cost forever,
// none is. Either way 2 and 4 ranks give the bytes of one; recomputing runs more
// dispatches and exchanges after fewer nodes.
TEST(RankSplit, RecomputingOrExchangingHalosGivesTheSameBytes) {
  Vae vae = seeded_vae(flux_small_config(), 7);
  const Tensor latent = test_latent(20, 12);
  auto program = compile_decoder(vae, latent, Precision::f16, 160 << 10);
  ASSERT_TRUE(program) << program.message();
  auto one = decode_on_ranks(*program, latent, 1);
  ASSERT_TRUE(one[0]) << one[0].message();
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(ranks);
    auto recomputing = split_plan_for_rank(program->plan, {ranks, 1}, kRecomputeFavoured);
    auto exchanging = split_plan_for_rank(program->plan, {ranks, 1}, kNeverRecompute);
    ASSERT_TRUE(recomputing && exchanging);
    int recomputed = 0;
    for (const SplitNode& n : recomputing->entries[0].splits) {
      if (!n.recompute) continue;
      ++recomputed;
      EXPECT_EQ(n.kind, "band") << n.node;
      EXPECT_TRUE(n.transfers.empty()) << n.node << ": a recomputed node moves no bytes";
      EXPECT_FALSE(n.recomputed.empty()) << n.node;
      EXPECT_LT(n.recompute_s, n.exchange_s) << n.node;
    }
    EXPECT_GT(recomputed, 0) << "recomputation must be chosen somewhere";
    for (const SplitNode& n : exchanging->entries[0].splits) EXPECT_FALSE(n.recompute) << n.node;
    auto exchanges = [](const RankPlan& p) {
      int n = 0;
      for (const SplitNode& s : p.entries[0].splits) n += !s.transfers.empty();
      return n;
    };
    EXPECT_LT(exchanges(*recomputing), exchanges(*exchanging));
    EXPECT_GT(recomputing->kept_dispatches, exchanging->kept_dispatches);
    for (const RankCostModel& costs : {kRecomputeFavoured, kNeverRecompute}) {
      auto many = decode_on_ranks(*program, latent, ranks, nullptr, costs);
      for (int r = 0; r < ranks; ++r) {
        ASSERT_TRUE(many[static_cast<size_t>(r)]) << many[static_cast<size_t>(r)].message();
        EXPECT_TRUE(same_bytes(*many[static_cast<size_t>(r)], *one[0]))
            << "rank " << r << " of " << ranks << (costs.flops_per_s > 1 ? " recomputing" : " exchanging");
      }
    }
  }
}

// Without a small binding limit nothing needs bands; CompilerOptions::min_bands (what
// --ranks N sets) cuts every large node into N bands, so N ranks share them, and the
// output is still the bytes of the plan compiled for one process.
TEST(RankSplit, MinimumBandsGiveEveryRankWorkWithTheSameBytes) {
  Vae vae = seeded_vae(flux_small_config(), 7);
  const Tensor latent = test_latent(12, 12);
  auto device = find_device();
  ASSERT_TRUE(device) << device.message();
  auto target = make_target(*device, {.precision = Precision::f16, .binding_limit = {}, .memory_budget = {}});
  ASSERT_TRUE(target) << target.message();
  auto g = build_decoder(vae, {.latent_h = 12, .latent_w = 12});
  ASSERT_TRUE(g) << g.message();
  std::ostringstream log;
  auto plain = compile(*g, vae.weights, *target, CompilerOptions{}, log);
  ASSERT_TRUE(plain) << plain.message();
  ASSERT_EQ(split_plan_for_rank(plain->plan, {2, 0})->split_nodes, 0) << "the test needs a plan without bands";
  CompilerOptions banded;
  banded.min_bands = 2;
  auto shared = compile(*g, vae.weights, *target, banded, log);
  ASSERT_TRUE(shared) << shared.message();
  auto split = split_plan_for_rank(shared->plan, {2, 1});
  ASSERT_TRUE(split) << split.message();
  EXPECT_GT(split->split_nodes, 10);
  auto one = decode_on_ranks(*plain, latent, 1);
  auto two = decode_on_ranks(*shared, latent, 2);
  ASSERT_TRUE(one[0]) << one[0].message();
  for (auto& r : two) {
    ASSERT_TRUE(r) << r.message();
    EXPECT_TRUE(same_bytes(*r, *one[0]));
  }
}

TEST(RankSplit, FailedExchangeStopsTheRunNamingTheNode) {
  Vae vae = seeded_vae(flux_small_config(), 7);
  const Tensor latent = test_latent(20, 12);
  auto program = compile_decoder(vae, latent, Precision::f16, 160 << 10);
  ASSERT_TRUE(program) << program.message();
  BrokenExchange broken;
  std::ostringstream log;
  LoadOptions options;
  options.ranks = {2, 0};
  options.exchange = &broken;
  auto loaded = LoadedProgram::load(*program, options, log);
  ASSERT_TRUE(loaded) << loaded.message();
  auto result = (*loaded)->run({latent});
  ASSERT_FALSE(result);
  EXPECT_NE(result.message().find("exchanging the rows of '"), std::string::npos) << result.message();
  EXPECT_NE(result.message().find("rank 1 exited"), std::string::npos) << result.message();
  EXPECT_FALSE((*loaded)->replay().is_ok()) << "replay cannot exchange rows";
}

TEST(RankSplit, BadLayoutsAreErrors) {
  runtime::Plan empty;
  for (RankLayout bad : {RankLayout{0, 0}, RankLayout{2, 2}, RankLayout{2, -1}}) {
    auto split = split_plan_for_rank(empty, bad);
    ASSERT_FALSE(split);
    EXPECT_NE(split.message().find("0 <= rank < ranks"), std::string::npos) << split.message();
  }
  EXPECT_EQ(band_owner(0, 5, 2), 0);
  EXPECT_EQ(band_owner(2, 5, 2), 0);
  EXPECT_EQ(band_owner(3, 5, 2), 1);
  EXPECT_EQ(band_owner(4, 5, 4), 3);
  EXPECT_EQ(band_owner(0, 2, 4), 0);
  EXPECT_EQ(band_owner(1, 2, 4), 2);
}

}  // namespace
}  // namespace strata
