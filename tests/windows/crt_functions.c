// The C runtime's other allocation functions: calloc, realloc growing and shrinking a block,
// realloc(p, 0), _aligned_malloc, _aligned_realloc and _aligned_free. Built twice: against
// msvcrt.dll (mingw-w64's default) and against ucrtbase.dll (crt_functions_ucrt.exe).
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  char* zeroed = calloc(10, 30);  // @calloc
  char* grown = malloc(100);  // @malloc
  grown = realloc(grown, 5000);  // @grow
  grown = realloc(grown, 700);  // @shrink
  void* gone = malloc(64);  // @gone
  gone = realloc(gone, 0);  // frees it (msvcrt and ucrt both)
  char* aligned = _aligned_malloc(1000, 64);  // @aligned
  aligned = _aligned_realloc(aligned, 3000, 64);  // @aligned_grow
  char* aligned_freed = _aligned_malloc(512, 128);  // @aligned_freed
  _aligned_free(aligned_freed);
  printf("%d %d %d %p\n", zeroed[299], grown[0] != 0 || 1, aligned[0] != 0 || 1, gone);
  return 0;
}
