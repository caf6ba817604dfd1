// operator new[] and delete[] (libstdc++'s, through the CRT's malloc): ten arrays of 1000 ints
// (4000 bytes each) live at once, the peak, then all deleted; then one array of 25000 chars
// that is never deleted.
#include <cstdio>

int main() {
  int* arrays[10];
  for (int i = 0; i < 10; ++i) arrays[i] = new int[1000];  // @arrays
  for (int i = 0; i < 10; ++i) arrays[i][0] = i;
  for (int i = 0; i < 10; ++i) delete[] arrays[i];
  char* kept = new char[25000];  // @kept
  kept[0] = 1;
  std::printf("done %d\n", kept[0]);
  return 0;
}
