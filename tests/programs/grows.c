// A logical leak: for about 1 s, every 10 ms, 10 nodes of 64 bytes are added to a list that
// is never trimmed; everything is freed just before exit, so nothing leaks at exit.
#include <stdlib.h>
#include <time.h>

struct node {
  struct node* next;
  char payload[56];
};

static struct node* head;

static void grow_list(void) {
  for (int i = 0; i < 10; ++i) {
    struct node* n = malloc(sizeof *n);  // @grow
    n->next = head;
    head = n;
  }
}

int main(void) {
  struct timespec pause = {0, 10 * 1000 * 1000};
  for (int i = 0; i < 100; ++i) {
    grow_list();
    nanosleep(&pause, NULL);
  }
  while (head) {
    struct node* next = head->next;
    free(head);
    head = next;
  }
  return 0;
}
