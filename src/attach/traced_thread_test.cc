// src/attach/traced_thread_test.cc: a forked child of the test, borrowed with TracedThread: calls
// made in it return what they return there, and once released the child goes on exactly where
// it was (an interrupted read restarted, errno kept, a system call stopped at its entry made).
#include "attach/traced_thread.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace memlens::attach {
namespace {

char g_text[64];  // at the same address in the forked child

// The functions the tests call in the child: the test's own, not the C library's, which a
// sanitizer build replaces with interceptors that keep state of their own.
extern "C" __attribute__((noinline)) size_t CountChars(const char* text) {
  size_t n = 0;
  while (text[n]) ++n;
  return n;
}
extern "C" __attribute__((noinline)) long SetErrno(long value) {
  errno = static_cast<int>(value);
  return -1;
}

// Forks a child that runs `body` with the read end of a pipe and exits with what it returns;
// *to_child is the write end.
template <typename Body>
pid_t ForkChild(int* to_child, Body body) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[1]);
    _exit(body(fds[0]));
  }
  close(fds[0]);
  *to_child = fds[1];
  return pid;
}

int ExitCode(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}

// Sends the child `byte`, which it reads (its read restarted, or made, after the borrow) and
// exits with.
void ExpectItGoesOnTo(pid_t child, int to_child, unsigned char byte) {
  ASSERT_EQ(write(to_child, &byte, 1), 1);
  EXPECT_EQ(ExitCode(child), byte);
  close(to_child);
}

// The child's own getpid, called in it, says its pid.
void ExpectGetpidThere(TracedThread* thread, pid_t child) {
  uint64_t result = 0;
  std::string error;
  ASSERT_TRUE(thread->Call(reinterpret_cast<uint64_t>(&getpid), {}, &result, &error)) << error;
  EXPECT_EQ(static_cast<pid_t>(result), child);
}

const TracedThread::Loader kNoLoader;

// "TracerPid:" of /proc/PID/status: 0 when nothing traces it.
int TracerOf(pid_t pid) {
  FILE* status = fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "r");
  char line[256];
  int tracer = -1;
  while (status && fgets(line, sizeof line, status)) {
    if (sscanf(line, "TracerPid: %d", &tracer) == 1) break;
  }
  if (status) fclose(status);
  return tracer;
}

volatile sig_atomic_t g_usr1 = 0;
void OnUsr1(int) { g_usr1 = 1; }

TEST(TracedThread, CallsInABlockedThreadThenItsReadGoesOn) {
  int to_child = -1;
  pid_t child = ForkChild(&to_child, [](int from_parent) {
    errno = 77;
    unsigned char byte = 0;
    ssize_t n = read(from_parent, &byte, 1);  // blocked here while borrowed
    if (n != 1) return 90;
    if (errno != 77) return 91;                 // a successful read leaves errno alone
    return strcmp(g_text, "") == 0 ? static_cast<int>(byte) : 92;  // the test wrote nothing
  });
  usleep(100 * 1000);  // the child is in its read
  TracedThread thread;
  std::string error;
  ASSERT_TRUE(thread.Seize(child, child, 3000, kNoLoader, &error)) << error;
  ExpectGetpidThere(&thread, child);
  uint64_t result = 0, errno_address = 0;
  ASSERT_TRUE(thread.Call(reinterpret_cast<uint64_t>(&__errno_location), {}, &errno_address,
                          &error));
  thread.KeepErrno(errno_address);
  // The child's errno becomes EBADF: Release puts 77 back.
  ASSERT_TRUE(thread.Call(reinterpret_cast<uint64_t>(&SetErrno), {EBADF}, &result, &error));
  EXPECT_EQ(static_cast<int>(result), -1);
  const char text[] = "seven";
  uint64_t at = reinterpret_cast<uint64_t>(g_text);
  ASSERT_TRUE(thread.Write(at, text, sizeof text, &error)) << error;
  ASSERT_TRUE(thread.Call(reinterpret_cast<uint64_t>(&CountChars), {at}, &result, &error));
  EXPECT_EQ(result, 5u);
  EXPECT_EQ(thread.ReadString(at, 64), "seven");
  const char empty[] = "";
  ASSERT_TRUE(thread.Write(at, empty, 1, &error));
  thread.Release();
  ExpectItGoesOnTo(child, to_child, 42);
}

TEST(TracedThread, ARunningThreadIsStoppedAtItsNextSafeSystemCall) {
  int to_child = -1;
  pid_t child = ForkChild(&to_child, [](int from_parent) {
    fcntl(from_parent, F_SETFL, O_NONBLOCK);
    unsigned char byte = 0;
    while (read(from_parent, &byte, 1) != 1) syscall(SYS_getppid);  // never blocks
    return static_cast<int>(byte);
  });
  usleep(50 * 1000);
  TracedThread thread;
  std::string error;
  ASSERT_TRUE(thread.Seize(child, child, 3000, kNoLoader, &error)) << error;
  ExpectGetpidThere(&thread, child);
  thread.Release();
  ExpectItGoesOnTo(child, to_child, 9);
}

TEST(TracedThread, NoSafePointInTimeLeavesTheThreadUntouched) {
  int to_child = -1;
  pid_t child = ForkChild(&to_child, [](int) {
    for (volatile unsigned long i = 0;; ++i) {
    }
    return 0;
  });
  usleep(50 * 1000);
  TracedThread thread;
  std::string error;
  EXPECT_FALSE(thread.Seize(child, child, 200, kNoLoader, &error));
  EXPECT_NE(error.find("made no system call where memlens may stop it"), std::string::npos)
      << error;
  EXPECT_EQ(TracerOf(child), 0);  // let go, still running
  kill(child, SIGKILL);
  EXPECT_EQ(ExitCode(child), 1000 + SIGKILL);
  close(to_child);
}

TEST(TracedThread, ASignalThatComesWhileBorrowedIsDeliveredAfterwardsAndTheReadRestarts) {
  int to_child = -1;
  pid_t child = ForkChild(&to_child, [](int from_parent) {
    struct sigaction usr1 {};
    usr1.sa_handler = OnUsr1;
    usr1.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &usr1, nullptr);
    sigset_t segv;
    sigemptyset(&segv);
    sigaddset(&segv, SIGSEGV);
    sigprocmask(SIG_BLOCK, &segv, nullptr);  // must still be blocked afterwards
    unsigned char byte = 0;
    if (read(from_parent, &byte, 1) != 1) return 90;
    sigset_t now;
    sigprocmask(SIG_BLOCK, nullptr, &now);
    if (!sigismember(&now, SIGSEGV)) return 91;
    return g_usr1 ? static_cast<int>(byte) : 92;
  });
  usleep(100 * 1000);
  TracedThread thread;
  std::string error;
  ASSERT_TRUE(thread.Seize(child, child, 3000, kNoLoader, &error)) << error;
  ASSERT_EQ(kill(child, SIGUSR1), 0);  // held back while the thread is borrowed
  ExpectGetpidThere(&thread, child);
  thread.Release();
  usleep(50 * 1000);  // the handler runs, the read goes on (SA_RESTART)
  ExpectItGoesOnTo(child, to_child, 33);
}

TEST(TracedThread, AnEndedProcessIsNoCallTarget) {
  TracedThread thread;
  std::string error;
  pid_t child = fork();
  if (child == 0) _exit(0);
  EXPECT_EQ(ExitCode(child), 0);
  EXPECT_FALSE(thread.Seize(child, child, 100, kNoLoader, &error));
  uint64_t result = 0;
  EXPECT_FALSE(thread.Call(reinterpret_cast<uint64_t>(&getpid), {}, &result, &error));
}

}  // namespace
}  // namespace memlens::attach
