// src/agent/tracked_process.cc: see tracked_process.h.
#include "agent/tracked_process.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace memlens::agent {
namespace {

// Writes `value` in decimal at `out`; returns the end.
char* WriteDecimal(uint64_t value, char* out) {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value);
  while (n) *out++ = digits[--n];
  return out;
}

// Reads the decimal number at [*c, end), at least one digit, below 2^64; moves *c past it.
bool ReadDecimal(const char** c, const char* end, uint64_t* value) {
  const char* start = *c;
  *value = 0;
  for (; *c < end && **c >= '0' && **c <= '9'; ++*c) {
    const uint64_t digit = static_cast<uint64_t>(**c - '0');
    if (*value > (UINT64_MAX - digit) / 10) return false;
    *value = *value * 10 + digit;
  }
  return *c > start;
}

}  // namespace

const char* FormatTracked(const TrackedProcess& process, char (&out)[kTrackedTextSize]) {
  char* end = WriteDecimal(process.pid, out);
  if (process.start_ticks) {
    *end++ = ':';
    end = WriteDecimal(process.start_ticks, end);
  }
  *end = '\0';
  return out;
}

bool ParseTracked(const char* text, TrackedProcess* out) {
  *out = {};
  if (!text) return false;
  const char* end = text;
  while (*end) ++end;
  TrackedProcess parsed;
  const char* c = text;
  if (!ReadDecimal(&c, end, &parsed.pid)) return false;
  if (c < end && *c == ':') {
    ++c;
    if (!ReadDecimal(&c, end, &parsed.start_ticks)) return false;
  }
  if (c != end) return false;
  *out = parsed;
  return true;
}

uint64_t StartTicksFromStat(const char* stat, size_t size) {
  const char* end = stat + size;
  const char* c = end;
  while (c > stat && c[-1] != ')') --c;
  if (c == stat) return 0;  // no command name
  // Fields 3 (the state) to 22, each after one space.
  for (int field = 3; field <= 22; ++field) {
    if (c == end || *c != ' ') return 0;
    ++c;
    if (field == 22) break;
    while (c < end && *c != ' ') ++c;
  }
  uint64_t ticks = 0;
  if (!ReadDecimal(&c, end, &ticks) || (c < end && *c != ' ' && *c != '\n')) return 0;
  return ticks;
}

TrackedProcess ThisProcess() {
  const int saved_errno = errno;
  TrackedProcess self;
  self.pid = static_cast<uint64_t>(getpid());
  // Field 22 lies within the first 300 bytes or so: the command name is at most 64 bytes.
  char stat[1024];
  size_t size = 0;
  const long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    while (size < sizeof stat) {
      const long n = syscall(SYS_read, fd, stat + size, sizeof stat - size);
      if (n <= 0) break;
      size += static_cast<size_t>(n);
    }
    syscall(SYS_close, fd);
    self.start_ticks = StartTicksFromStat(stat, size);
  }
  errno = saved_errno;
  return self;
}

bool SameProcess(const TrackedProcess& named, const TrackedProcess& self) {
  return named.pid == self.pid &&
         (!named.start_ticks || !self.start_ticks || named.start_ticks == self.start_ticks);
}

bool IsThisProcess(const TrackedProcess& named) {
  if (named.pid != static_cast<uint64_t>(getpid())) return false;
  return !named.start_ticks || SameProcess(named, ThisProcess());
}

}  // namespace memlens::agent
