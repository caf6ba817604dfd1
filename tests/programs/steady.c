// A steady state of the same shape as grows.c: for about 1 s, every 10 ms, 10 nodes of 64
// bytes are built into a list which is then freed whole: the heap never grows.
#include <stdlib.h>
#include <time.h>

struct node {
  struct node* next;
  char payload[56];
};

static void build_and_drop(void) {
  struct node* head = NULL;
  for (int i = 0; i < 10; ++i) {
    struct node* n = malloc(sizeof *n);  // @build
    n->next = head;
    head = n;
  }
  while (head) {
    struct node* next = head->next;
    free(head);
    head = next;
  }
}

int main(void) {
  struct timespec pause = {0, 10 * 1000 * 1000};
  for (int i = 0; i < 100; ++i) {
    build_and_drop();
    nanosleep(&pause, NULL);
  }
  return 0;
}
