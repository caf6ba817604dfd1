// src/analyzer/views/blocks.cc: see blocks.h.
#include "analyzer/views/blocks.h"

#include <algorithm>

#include "format/records.h"

namespace memlens::analyzer {
namespace {

// The Python frames of a stack, innermost first, straight from its trie nodes: a Python node
// is its own frame (code record + line), so nothing is symbolized.
Stack PythonFrames(const Profile& p, StackResolver* resolver, uint64_t stack) {
  Stack frames;
  for (uint64_t node = stack; node != 0 && node < p.nodes.size(); node = p.nodes[node].parent) {
    if (!format::IsPythonFrameIp(p.nodes[node].ip)) continue;
    for (const SourceFrame& f : resolver->NodeFrames(node)) frames.push_back(&f);
  }
  return frames;
}

}  // namespace

BlocksView BuildBlocks(const Profile& p, StackResolver* resolver, const BlocksQuery& query) {
  BlocksView view;
  for (const LiveBlockRow& b : p.blocks) {
    if (b.stack != 0 && !p.stacks.count(b.stack)) continue;  // the filters dropped its stack
    view.total.bytes += b.size;
    view.total.blocks += 1;
    view.by_domain[b.domain].bytes += b.size;
    view.by_domain[b.domain].blocks += 1;
    if (!query.list_blocks) continue;
    if (query.containing && (query.containing < b.address ||
                             query.containing - b.address >= std::max<uint64_t>(b.size, 1))) {
      continue;
    }
    view.blocks.push_back(b);
    if (view.stacks.count(b.stack)) continue;
    view.stack_ids.push_back(b.stack);
    view.stacks[b.stack] =
        query.python_frames_only ? PythonFrames(p, resolver, b.stack) : resolver->Frames(b.stack);
  }
  return view;
}

}  // namespace memlens::analyzer
