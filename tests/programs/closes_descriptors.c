// Closes every descriptor it inherited, the way daemons and ssh do, then writes files of its
// own and allocates on. argv[1] says how: loop (close() on every number), closefrom,
// close_range, dup2 (every number made a copy of one file, then closed), raw (the close_range
// system call, past the C library). Prints "files intact" when each of its files holds exactly
// what it wrote, and exits 1 otherwise.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { kBlocks = 100, kFiles = 8, kTop = 1200 };
void* kept[2 * kBlocks];

static void Pause(void) { usleep(250000); }  // the writer flushes a chunk at least every 100 ms

int main(int argc, char** argv) {
  const char* how = argc > 1 ? argv[1] : "loop";
  for (int i = 0; i < kBlocks; ++i) kept[i] = malloc(1000);  // @before_close
  Pause();
  if (!strcmp(how, "loop")) {
    for (int fd = 3; fd < kTop; ++fd) close(fd);
  } else if (!strcmp(how, "closefrom")) {
    closefrom(3);
  } else if (!strcmp(how, "close_range")) {
    if (close_range(3, ~0u, 0) != 0) return 2;
  } else if (!strcmp(how, "dup2")) {
    int fd = open("/dev/null", O_WRONLY);
    for (int n = 3; n < kTop; ++n) {
      if (n != fd && dup2(fd, n) != n) return 3;
    }
    for (int n = 3; n < kTop; ++n) close(n);
  } else if (!strcmp(how, "raw")) {
    if (syscall(SYS_close_range, 3, ~0u, 0) != 0) return 2;
  }
  char name[32];
  int fds[kFiles];
  for (int f = 0; f < kFiles; ++f) {
    snprintf(name, sizeof name, "own%d.txt", f);
    fds[f] = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (write(fds[f], "program data\n", 13) != 13) return 4;
  }
  for (int i = kBlocks; i < 2 * kBlocks; ++i) kept[i] = malloc(2000);  // @after_close
  Pause();
  for (int f = 0; f < kFiles; ++f) {
    if (write(fds[f], "more\n", 5) != 5) return 4;
  }
  Pause();
  int intact = 1;
  for (int f = 0; f < kFiles; ++f) {
    struct stat st;
    if (fstat(fds[f], &st) != 0 || st.st_size != 18) {
      printf("own%d.txt holds %lld bytes, not 18\n", f, (long long)st.st_size);
      intact = 0;
    }
    close(fds[f]);
  }
  if (intact) printf("files intact\n");
  return intact ? 0 : 1;
}
