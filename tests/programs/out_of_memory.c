// Allocates blocks of argv[1] bytes until malloc returns NULL (run it under `ulimit -v`), and
// copes: with the memory full it makes argv[2] pairs of small malloc and free in the room of one
// block it gives back (events the recorder must still write), waits a little, prints how many
// blocks it got, frees them all and exits 0.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  size_t size = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
  long pairs = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
  long count = 0;
  void* head = NULL;
  for (;;) {
    void** block = malloc(size);  // @until_null
    if (!block) break;
    *block = head;
    head = block;
    ++count;
  }
  void* next = *(void**)head;
  free(head);  // @give_one_back
  head = next;
  for (long i = 0; i < pairs; ++i) {
    void* small = malloc(32);  // @small
    free(small);
  }
  usleep(300000);
  printf("%ld blocks\n", count);
  while (head) {
    next = *(void**)head;
    free(head);  // @free_all
    head = next;
  }
  return 0;
}
