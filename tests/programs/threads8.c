// 8 threads: thread i (1..8) keeps i blocks of i*1000 bytes, and churns 20000 malloc/free
// pairs; exactly sum(i) = 36 blocks and sum(i*i*1000) = 204000 bytes stay.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

void* keep_blocks(int i) {
  void** kept = malloc(sizeof(void*) * i);  // @kept_array
  for (int k = 0; k < i; ++k) kept[k] = malloc((size_t)i * 1000);  // @per_thread
  return kept;
}

void* worker(void* arg) {
  int i = (int)(long)arg;
  for (int k = 0; k < 20000; ++k) free(malloc(16 + k % 512));  // @churn
  return keep_blocks(i);
}

int main(void) {
  pthread_t threads[8];
  for (long i = 0; i < 8; ++i) pthread_create(&threads[i], NULL, worker, (void*)(i + 1));
  for (int i = 0; i < 8; ++i) pthread_join(threads[i], NULL);
  printf("joined\n");
  return 0;
}
