// An allocator that is not the C library's, for the tests of memlens in front of one
// (tests/e2e/test_sampling.py): preloaded after the agent, as a program's own jemalloc or
// tcmalloc would be, it is the "real" malloc the agent's interposers call. A bump pointer in
// 16 KiB chunks it maps itself (so mappings are made inside unsampled calls too); free keeps
// nothing (the test programs are short). At exit it says on stderr
// how many blocks it handed out, so a test knows the program's allocations went through it.
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { kHeader = 16 };
static const size_t kChunkBytes = 16 << 10;
static const size_t kLargest = (size_t)1 << 30;
static char* chunk;  // the blocks come from the end of the latest chunk
static size_t chunk_left, blocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void* malloc(size_t size) {
  if (size > kLargest) {
    errno = ENOMEM;
    return NULL;
  }
  size_t need = (size + kHeader + 15) & ~(size_t)15;
  char* block = NULL;
  pthread_mutex_lock(&lock);
  if (need > chunk_left) {  // a new chunk, mapped by the allocator itself: not the program's
    size_t bytes = need > kChunkBytes ? need : kChunkBytes;
    void* mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem != MAP_FAILED) {
      chunk = mem;
      chunk_left = bytes;
    }
  }
  if (need <= chunk_left) {
    block = chunk;
    chunk += need;
    chunk_left -= need;
    ++blocks;
  }
  pthread_mutex_unlock(&lock);
  if (!block) {
    errno = ENOMEM;
    return NULL;
  }
  memcpy(block, &size, sizeof size);
  return block + kHeader;
}

void free(void* block) { (void)block; }

void* calloc(size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) {
    errno = ENOMEM;
    return NULL;
  }
  return malloc(count * size);  // blocks are never reused: their pages are still zero
}

void* realloc(void* block, size_t size) {
  if (!block) return malloc(size);
  if (size == 0) {  // as glibc: free it, return NULL
    free(block);
    return NULL;
  }
  void* moved = malloc(size);
  if (!moved) return NULL;  // the old block lives on
  size_t old;
  memcpy(&old, (char*)block - kHeader, sizeof old);
  memcpy(moved, block, old < size ? old : size);
  free(block);
  return moved;
}

__attribute__((destructor)) static void SayHowMany(void) {
  char line[64];
  int n = snprintf(line, sizeof line, "bump_alloc: %zu blocks\n", blocks);
  if (n > 0) (void)!write(2, line, (size_t)n);
}
