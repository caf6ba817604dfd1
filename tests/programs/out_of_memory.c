// Allocates blocks of argv[1] bytes until malloc returns NULL (run it under `ulimit -v`), copes:
// prints how many it got, frees them all and exits 0.
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  size_t size = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
  long count = 0;
  void* head = NULL;
  for (;;) {
    void** block = malloc(size);  // @until_null
    if (!block) break;
    *block = head;
    head = block;
    ++count;
  }
  printf("%ld blocks\n", count);
  while (head) {
    void* next = *(void**)head;
    free(head);  // @free_all
    head = next;
  }
  return 0;
}
