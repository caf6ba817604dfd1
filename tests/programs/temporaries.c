// Temporary allocations known exactly: 1000 malloc/free pairs at one line (each block freed
// before the thread allocates anything else: 1000 temporaries), and a list of 500 nodes kept
// until exit (no temporaries: every node outlives the next allocation; the last one is never
// freed, so it is not "freed before anything else was allocated" either).
#include <stdlib.h>
#include <string.h>

struct node {
  struct node* next;
  char payload[40];
};

static void use(char* p, size_t n) { memset(p, 1, n); }

int main(void) {
  for (int i = 0; i < 1000; ++i) {
    char* scratch = malloc(64);  // @scratch
    use(scratch, 64);
    free(scratch);
  }
  struct node* head = NULL;
  for (int i = 0; i < 500; ++i) {
    struct node* n = malloc(sizeof *n);  // @kept
    n->next = head;
    head = n;
  }
  return head != NULL ? 0 : 1;
}
