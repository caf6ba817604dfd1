/* bench/workloads/fanout.c
 *
 * A program that fans out into short-lived processes, as a build drives its compilers:
 *
 *   fanout CHILDREN STEPS
 *
 * starts CHILDREN children one after another, each by fork and exec of this program
 * ("fanout child STEPS"), and waits for each. A child keeps a window of 256 live blocks and
 * makes STEPS steps, each a free and a malloc of 16..4096 bytes (fixed-seed xorshift), then
 * exits. The parent prints "children=N steps=N" to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int Child(long steps) {
  void* window[256] = {0};
  unsigned long long state = 0x9E3779B97F4A7C15ull;
  for (long i = 0; i < steps; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    free(window[i & 255]);
    size_t size = 16 + (state >> 8) % 4081;
    window[i & 255] = malloc(size);
    ((volatile char*)window[i & 255])[size - 1] = 1;
  }
  for (int i = 0; i < 256; ++i) free(window[i]);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "child") == 0) return Child(atol(argv[2]));
  if (argc != 3) {
    fprintf(stderr, "usage: %s CHILDREN STEPS\n", argv[0]);
    return 2;
  }
  int children = atoi(argv[1]);
  for (int k = 0; k < children; ++k) {
    pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], "child", argv[2], (char*)NULL);
      _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  fprintf(stderr, "children=%d steps=%s\n", children, argv[2]);
  return 0;
}
