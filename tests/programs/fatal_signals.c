// Dies of a signal after allocating a known number of blocks, or reports its signal
// dispositions, which must read the same with and without memlens. argv[1]:
//   pipe   prints "ready", waits until the reader of stdout has gone, allocates, then writes
//          again: SIGPIPE, as in `prog | head -1`
//   term   allocates, then raise(SIGTERM)
//   usr1   allocates, then raise(SIGUSR1)
//   query  prints the disposition of a few signals, sets some and reads them back, then does
//          the same in a forked child and in a program that child execs (`report`)
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kBlocks = 1000 };
void* kept[kBlocks];

static void OnSignal(int signo) { (void)signo; }

static const char* Name(void (*handler)(int)) {
  if (handler == SIG_DFL) return "default";
  if (handler == SIG_IGN) return "ignored";
  return handler == OnSignal ? "ours" : "another handler";
}

static void Report(int signo, const char* name) {
  struct sigaction old;
  sigaction(signo, NULL, &old);
  printf("%s %s flags=%#x\n", name, Name(old.sa_handler), (unsigned)old.sa_flags);
}

int main(int argc, char** argv) {
  const char* how = argc > 1 ? argv[1] : "query";
  if (!strcmp(how, "report")) {  // exec'd: handlers are reset, ignored signals stay ignored
    Report(SIGTERM, "exec TERM");
    Report(SIGHUP, "exec HUP");
    Report(SIGUSR1, "exec USR1");
    return 0;
  }
  if (!strcmp(how, "query")) {
    Report(SIGTERM, "TERM");
    Report(SIGPIPE, "PIPE");
    Report(SIGSEGV, "SEGV");
    Report(SIGUSR1, "USR1");
    Report(SIGCHLD, "CHLD");
    printf("signal(USR1) was %s\n", Name(signal(SIGUSR1, OnSignal)));
    Report(SIGUSR1, "USR1");
    printf("signal(USR1) was %s\n", Name(signal(SIGUSR1, SIG_DFL)));
    Report(SIGUSR1, "USR1");
    struct sigaction ignore = {0};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGHUP, &ignore, NULL);
    Report(SIGHUP, "HUP");
    signal(SIGUSR1, OnSignal);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
      Report(SIGTERM, "child TERM");
      Report(SIGUSR1, "child USR1");
      fflush(stdout);
      execl(argv[0], argv[0], "report", (char*)NULL);
      _exit(127);
    }
    int status;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
  }
  if (!strcmp(how, "pipe")) {
    printf("ready\n");
    fflush(stdout);
    struct pollfd gone = {1, 0, 0};
    while (poll(&gone, 1, 10000) == 0 || !(gone.revents & POLLERR)) {}
  }
  for (int i = 0; i < kBlocks; ++i) kept[i] = malloc(48);  // @before_signal
  if (!strcmp(how, "term")) raise(SIGTERM);
  if (!strcmp(how, "usr1")) raise(SIGUSR1);
  if (!strcmp(how, "pipe")) write(1, "more\n", 5);
  return 0;  // not reached
}
