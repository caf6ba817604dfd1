// Frees in allocation order, long after: for about 0.8 s, every 10 ms, 20 blocks of 48 bytes
// are allocated and the 20 allocated 25 rounds (about 250 ms) before are freed. The writer
// closes a chunk every 100 ms, so each free names an allocation two or three chunks back:
// a reader resuming mid-capture must decode the chunks in reach before it (capture format 5).
#include <stdlib.h>
#include <time.h>

enum { kRounds = 80, kPerRound = 20, kLag = 25 };

static void* window[kLag][kPerRound];

int main(void) {
  struct timespec pause = {0, 10 * 1000 * 1000};
  for (int round = 0; round < kRounds; ++round) {
    void** slot = window[round % kLag];
    for (int i = 0; i < kPerRound; ++i) {
      free(slot[i]);           // NULL in the first kLag rounds
      slot[i] = malloc(48);    // @window
    }
    nanosleep(&pause, NULL);
  }
  for (int r = 0; r < kLag; ++r) {
    for (int i = 0; i < kPerRound; ++i) free(window[r][i]);
  }
  return 0;
}
