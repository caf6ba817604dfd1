// examples/foo_pool.cc
//
// A fixed-size pool allocator for Foo objects that tells memlens about its blocks: the pool is
// one malloc'd block (what the system heap sees), and every Foo handed out inside it is
// reported to a named heap, "FooHeap", typed with Foo's name. Beside it, a bump arena of
// untyped scratch buffers ("ScratchArena"), rewound once per round. Without memlens the
// program runs the same, and every memlens call is a branch on a cached null pointer.
//
//   memlens run -- build/examples/foo_pool
//   memlens summary memlens-foo_pool-*.mlens            # custom heaps beside the system heap
//   memlens top CAPTURE@snapshot:nine-foos --by heap    # each heap's own figures
//   memlens top CAPTURE@snapshot:nine-foos --heap FooHeap --by type
//
// tests/e2e/test_api.py checks its figures exactly.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <vector>

#include "memlens/memlens.h"

struct Foo {
  double position[3];
  int id;
  char name[36];
};
static_assert(sizeof(Foo) == 64, "the figures in the tests assume a 64-byte Foo");

// Capacity Foos in one block; a free list threads through the free slots.
class FooPool {
 public:
  explicit FooPool(size_t capacity)
      : heap_("FooHeap"), slots_(static_cast<Slot*>(std::malloc(capacity * sizeof(Slot)))) {
    for (size_t i = 0; i < capacity; ++i) slots_[i].next = i + 1 < capacity ? &slots_[i + 1] : nullptr;
    free_ = slots_;
  }
  ~FooPool() { std::free(slots_); }  // heap_ is destroyed after: the heap goes with the pool

  Foo* New(int id) {
    if (!free_) return nullptr;
    Slot* slot = free_;
    free_ = slot->next;
    Foo* foo = new (slot->storage) Foo{{0, 0, 0}, id, {}};
    heap_.AllocTyped(foo);  // after taking it off the free list
    return foo;
  }
  void Delete(Foo* foo) {
    heap_.Free(foo);  // before putting it back on the free list
    foo->~Foo();
    Slot* slot = reinterpret_cast<Slot*>(foo);
    slot->next = free_;
    free_ = slot;
  }

 private:
  union Slot {
    Slot* next;
    alignas(Foo) unsigned char storage[sizeof(Foo)];
  };
  memlens::Heap heap_;
  Slot* slots_;
  Slot* free_ = nullptr;
};

// A bump arena: blocks are never freed one by one, the arena is rewound at once.
class ScratchArena {
 public:
  explicit ScratchArena(size_t bytes)
      : heap_("ScratchArena"), base_(static_cast<char*>(std::malloc(bytes))), size_(bytes) {}
  ~ScratchArena() { std::free(base_); }
  void* Take(size_t bytes) {
    if (used_ + bytes > size_) return nullptr;
    void* p = base_ + used_;
    used_ += (bytes + 15) & ~size_t{15};
    heap_.Alloc(p, bytes);
    return p;
  }
  void Rewind() {
    heap_.Reset();
    used_ = 0;
  }

 private:
  memlens::Heap heap_;
  char* base_;
  size_t size_;
  size_t used_ = 0;
};

int main() {
  FooPool pool(16);  // one 1,024-byte block from malloc
  Foo* foos[12];
  for (int i = 0; i < 12; ++i) foos[i] = pool.New(i);
  for (int i : {3, 7, 11}) pool.Delete(foos[i]);
  // A standard container whose blocks go to a heap of their own, typed with its element type.
  memlens::Heap index_heap("FooIndex");
  std::vector<Foo*, memlens::HeapAllocator<Foo*>> index{memlens::HeapAllocator<Foo*>(index_heap)};
  index.reserve(16);  // one 128-byte block
  for (int i = 0; i < 12; ++i) {
    if (i % 4 != 3) index.push_back(foos[i]);  // the nine still in the pool
  }
  memlens_take_snapshot("nine-foos");  // FooHeap: 9 Foos, 576 bytes

  ScratchArena arena(4096);  // one 4,096-byte block from malloc
  for (int round = 0; round < 4; ++round) {
    memlens::ScopedRegion region("round");
    for (size_t bytes : {size_t{100}, size_t{200}, size_t{300}}) std::memset(arena.Take(bytes), round, bytes);
    if (round == 3) memlens_take_snapshot("arena-full");  // ScratchArena: 3 blocks, 600 bytes
    arena.Rewind();
  }
  long sum = 0;
  for (Foo* foo : index) sum += foo->id;
  std::printf("done %ld %zu\n", sum, index.size());
  return 0;
}
