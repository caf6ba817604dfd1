// 400 threads, one after another, each allocating and exiting: the agent must give each
// exited thread's buffer to the next thread rather than map a new one. Prints how much the
// process's address space grew between the 20th and the last thread, in MiB.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void* work(void* arg) {
  for (int i = 0; i < 1000; ++i) free(malloc(100 + i));  // @work
  return NULL;
}

long vm_size_kib(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "VmSize:", 7) == 0) kib = atol(line + 7);
  }
  fclose(f);
  return kib;
}

int main(void) {
  long after_warmup = 0;
  for (int i = 0; i < 400; ++i) {
    pthread_t t;
    pthread_create(&t, NULL, work, NULL);
    pthread_join(t, NULL);
    usleep(1000);
    if (i == 20) after_warmup = vm_size_kib();
  }
  printf("%ld\n", (vm_size_kib() - after_warmup) / 1024);
  return 0;
}
