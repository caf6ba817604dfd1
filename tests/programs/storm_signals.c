// SIGALRM every 20 us (setitimer) while the main thread and a second thread allocate. The
// handler counts each signal and, when the interrupted thread is between its allocator calls
// (its flag says so), allocates and frees 24 bytes: malloc is not async-signal-safe, so it is
// called only where the thread interrupted is in no allocator call. Also checks that a blocking
// read() is interrupted (EINTR) by a handler without SA_RESTART and restarted by one with it.
// Prints the deterministic results, then (last line) the handler's own counts.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { kMainAllocations = 300000, kThreadAllocations = 300000 };

static __thread volatile sig_atomic_t t_may_allocate;  // this thread is in no allocator call
static atomic_long signals_seen, handler_allocations;
static atomic_int main_is_reading;
static int pipe_fds[2];

static void on_alarm(int signal) {
  (void)signal;
  int saved_errno = errno;
  atomic_fetch_add(&signals_seen, 1);
  if (t_may_allocate) {
    void* block = malloc(24);  // @in_handler
    if (block) atomic_fetch_add(&handler_allocations, 1);
    free(block);
  }
  errno = saved_errno;
}

static void set_handler(int flags) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_alarm;
  action.sa_flags = flags;
  sigemptyset(&action.sa_mask);
  sigaction(SIGALRM, &action, NULL);
}

static void set_timer(long microseconds) {
  struct itimerval timer = {{0, microseconds}, {0, microseconds}};
  setitimer(ITIMER_REAL, &timer, NULL);
}

// `count` blocks of 1..512 bytes, each freed at once; returns their bytes.
static long allocate_main(long count) {
  long bytes = 0;
  for (long i = 0; i < count; ++i) {
    size_t size = 1 + i % 512;
    t_may_allocate = 0;
    char* block = malloc(size);  // @main_loop
    t_may_allocate = 1;
    block[0] = 1;
    bytes += size;
    t_may_allocate = 0;
    free(block);
    t_may_allocate = 1;
  }
  t_may_allocate = 0;
  return bytes;
}

static void* second_thread(void* arg) {
  long* bytes = arg;
  for (long i = 0; i < kThreadAllocations; ++i) {
    size_t size = 1 + i % 1000;
    t_may_allocate = 0;
    char* block = malloc(size);  // @thread_loop
    t_may_allocate = 1;
    block[0] = 1;
    *bytes += size;
    t_may_allocate = 0;
    free(block);
    t_may_allocate = 1;
  }
  t_may_allocate = 0;
  // Wake the main thread's read only once it has blocked for a while, under the signals.
  while (!atomic_load(&main_is_reading)) {
  }
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do clock_gettime(CLOCK_MONOTONIC, &now);
  while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 50000000L);
  if (write(pipe_fds[1], "x", 1) != 1) abort();
  return NULL;
}

int main(void) {
  if (pipe(pipe_fds) != 0) return 1;
  char byte;

  set_handler(0);
  set_timer(20);
  ssize_t got = read(pipe_fds[0], &byte, 1);
  printf("read without SA_RESTART: %s\n", got < 0 && errno == EINTR ? "EINTR" : "not interrupted");

  set_handler(SA_RESTART);
  long thread_bytes = 0;
  pthread_t thread;
  if (pthread_create(&thread, NULL, second_thread, &thread_bytes) != 0) return 1;
  long main_bytes = allocate_main(kMainAllocations);
  atomic_store(&main_is_reading, 1);
  got = read(pipe_fds[0], &byte, 1);
  printf("read with SA_RESTART: %s\n", got == 1 ? "restarted" : strerror(errno));
  pthread_join(thread, NULL);
  set_timer(0);

  printf("main: %d blocks, %ld bytes\n", kMainAllocations, main_bytes);
  printf("thread: %d blocks, %ld bytes\n", kThreadAllocations, thread_bytes);
  printf("handler: %ld signals, %ld blocks of 24 bytes\n", atomic_load(&signals_seen),
         atomic_load(&handler_allocations));
  return 0;
}
