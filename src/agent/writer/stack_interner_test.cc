// StackInterner: ids are a trie numbered in creation order, shared prefixes are stored once,
// and the whole-stack cache never confuses two stacks.
#include "agent/writer/stack_interner.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace memlens::agent {
namespace {

struct Recorded {
  std::vector<std::pair<uint64_t, uint64_t>> nodes{{0, 0}};  // id -> (parent, ip)
  auto Callback() {
    return [this](uint64_t parent, uint64_t ip) { nodes.push_back({parent, ip}); };
  }
  std::vector<uint64_t> Unwind(uint64_t id) const {  // innermost first
    std::vector<uint64_t> out;
    for (; id; id = nodes[id].first) out.push_back(nodes[id].second);
    return out;
  }
};

// One frame past node parent's path: the writer's walks, one step long.
uint64_t ExtendOne(StackInterner* interner, uint64_t parent, uint64_t ip, Recorded& rec) {
  uint64_t id = 0;
  EXPECT_EQ(interner->ExtendPath(parent, &ip, 1, &id, rec.Callback()), id);
  return id;
}

TEST(StackInterner, SharesPrefixesAndNumbersNodesInOrder) {
  StackInterner interner;
  Recorded rec;
  uint64_t a[] = {0x30, 0x20, 0x10};  // innermost first; 0x10 is the outermost frame
  uint64_t b[] = {0x31, 0x20, 0x10};
  uint64_t id_a = interner.Intern(a, 3, rec.Callback());
  uint64_t id_b = interner.Intern(b, 3, rec.Callback());
  EXPECT_EQ(id_a, 3u);
  EXPECT_EQ(id_b, 4u);  // only the innermost frame is new
  EXPECT_EQ(rec.nodes.size(), 5u);
  EXPECT_EQ(rec.nodes[1], (std::pair<uint64_t, uint64_t>{0, 0x10}));
  EXPECT_EQ(rec.nodes[4], (std::pair<uint64_t, uint64_t>{2, 0x31}));
  EXPECT_EQ(interner.Intern(a, 3, rec.Callback()), id_a);
  EXPECT_EQ(interner.Intern(a + 1, 2, rec.Callback()), 2u);  // a prefix is its own stack
  EXPECT_EQ(interner.Intern(a, 0, rec.Callback()), 0u);
}

TEST(StackInterner, ManyRandomStacksRoundTrip) {
  StackInterner interner;
  Recorded rec;
  std::mt19937_64 rng(7);
  std::map<std::vector<uint64_t>, uint64_t> seen;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint64_t> stack(1 + rng() % 40);
    for (auto& f : stack) f = 0x1000 + rng() % 64;  // small alphabet: lots of sharing
    uint64_t id = interner.Intern(stack.data(), static_cast<int>(stack.size()), rec.Callback());
    auto [it, fresh] = seen.emplace(stack, id);
    EXPECT_EQ(it->second, id);
    ASSERT_EQ(rec.Unwind(id), stack);
  }
  EXPECT_EQ(interner.node_count() + 1, rec.nodes.size());
}

TEST(StackInterner, ExtendingOneFrameAtATimeMatchesIntern) {
  // A recursion: the same ip at every depth, plus a sibling ip at every 5th level, walked again
  // and again (the trie-step cache must give the ids that the trie gives).
  StackInterner interner;
  Recorded rec;
  std::vector<uint64_t> path;  // outermost first
  std::vector<uint64_t> ids;
  for (int round = 0; round < 3; ++round) {
    uint64_t id = 0;
    path.clear();
    for (int depth = 0; depth < 300; ++depth) {
      uint64_t ip = depth % 5 == 4 && round == 1 ? 0x2222 : 0x1111;
      path.push_back(ip);
      id = ExtendOne(&interner, id, ip, rec);
      std::vector<uint64_t> innermost_first(path.rbegin(), path.rend());
      ASSERT_EQ(rec.Unwind(id), innermost_first);
      ASSERT_EQ(interner.Intern(innermost_first.data(), depth + 1, rec.Callback()), id);
      if (round == 0) ids.push_back(id);
      if (round == 2) {
        ASSERT_EQ(id, ids[depth]);  // the same path, the same ids
      }
    }
  }
  EXPECT_EQ(interner.node_count(), 300u + 296u);  // round 1 left the chain at depth 4
}

TEST(StackInterner, ExtendingAPathAtOnceMatchesInternAcrossGrowth) {
  // Paths longer than the frames fetched ahead at once, from points part way along earlier
  // ones, over 20,000 nodes in all (the children's table grows many times, mid-path too): every id
  // is the one Intern gives the same stack, and Unwind gives the path back.
  StackInterner interner;
  Recorded rec;
  std::mt19937_64 rng(11);
  std::vector<uint64_t> path, ids;  // outermost first
  for (int round = 0; round < 3000; ++round) {
    const size_t keep = path.empty() ? 0 : rng() % path.size();
    path.resize(keep);
    ids.resize(keep);
    const size_t more = 1 + rng() % 40;
    for (size_t i = 0; i < more; ++i) path.push_back(0x1000 + rng() % 4);
    ids.resize(path.size());
    const uint64_t from = keep ? ids[keep - 1] : 0;
    const uint64_t id = interner.ExtendPath(from, path.data() + keep, more, ids.data() + keep,
                                            rec.Callback());
    ASSERT_EQ(id, ids.back());
    for (size_t depth = keep; depth < path.size(); ++depth) {
      std::vector<uint64_t> innermost_first(path.rend() - depth - 1, path.rend());
      ASSERT_EQ(rec.Unwind(ids[depth]), innermost_first);
      ASSERT_EQ(interner.Intern(innermost_first.data(), static_cast<int>(depth + 1),
                                rec.Callback()),
                ids[depth]);
    }
  }
  EXPECT_GT(interner.node_count(), 20000u);
  EXPECT_EQ(interner.node_count() + 1, rec.nodes.size());
  EXPECT_EQ(interner.ExtendPath(7, nullptr, 0, nullptr, rec.Callback()), 7u);  // no frames
}

TEST(StackInterner, ForgottenPathsAreNeverReturned) {
  StackInterner interner;
  Recorded rec;
  // Interned whole, so the cache of whole stacks holds it too, besides the trie steps.
  uint64_t stack[] = {0x20, 0x10};
  uint64_t before = interner.Intern(stack, 2, rec.Callback());
  interner.ForgetPaths();
  uint64_t first = ExtendOne(&interner, 0, 0x10, rec);
  uint64_t after = ExtendOne(&interner, first, 0x20, rec);
  EXPECT_GT(first, before);
  EXPECT_EQ(after, first + 1);
  EXPECT_EQ(rec.Unwind(after), (std::vector<uint64_t>{0x20, 0x10}));
  EXPECT_EQ(interner.Intern(stack, 2, rec.Callback()), after);
}

}  // namespace
}  // namespace memlens::agent
