// src/base/private_file.h
//
// Opening a capture or an index for writing. They hold command lines, paths and addresses, so
// they are the user's alone (mode 0600), and they are never opened through a symbolic link that
// someone planted at the path (O_NOFOLLOW: the call fails with ELOOP). An existing regular file
// is taken over only when the user owns it; it is then made 0600 and, if asked, truncated after
// these checks (never before them).
//
// Runs on: any thread; system calls only, no allocation (the agent calls it while starting).
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace memlens {

// flags: O_CREAT, O_TRUNC, O_APPEND as wanted (O_WRONLY, O_NOFOLLOW and O_CLOEXEC are added).
// Returns the descriptor, or -1 with errno: ELOOP for a symbolic link, EPERM for a regular file
// another user owns.
inline int OpenPrivateFile(const char* path, int flags) {
  const bool truncate = flags & O_TRUNC;
  int fd = open(path, (flags & ~O_TRUNC) | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0) st.st_mode = 0;
  if (S_ISREG(st.st_mode)) {
    if (st.st_uid != geteuid()) {
      close(fd);
      errno = EPERM;
      return -1;
    }
    if ((st.st_mode & 07777) != 0600) fchmod(fd, 0600);
    if (truncate && ftruncate(fd, 0) != 0) {
      int saved = errno;
      close(fd);
      errno = saved;
      return -1;
    }
  }
  return fd;
}

// The reason OpenPrivateFile failed, in words for a one-line message.
inline const char* PrivateFileError(int error) {
  switch (error) {
    case ELOOP: return "it is a symbolic link, which memlens does not write through";
    case EPERM: return "it belongs to another user";
    default: return nullptr;  // strerror's words are clear enough
  }
}

}  // namespace memlens
