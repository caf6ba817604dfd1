/* bench/workloads/peak_rss.h
 *
 * PeakRssKib: VmHWM of this process image, for the workloads' closing line. Not getrusage's
 * ru_maxrss: that also counts the image that exec'd us (e.g. a forking Python parent), which is
 * about as big as a workload. Plain read(2), so that measuring allocates nothing. C and C++. */
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline long PeakRssKib(void) {
  char text[4096] = {0};
  int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  const char* line = n > 0 ? strstr(text, "VmHWM:") : NULL;
  return line != NULL ? atol(line + 6) : -1;
}
