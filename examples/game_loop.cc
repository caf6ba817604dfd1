// examples/game_loop.cc
//
// A game loop with a marker at the start of every frame. Each frame builds and drops its
// temporary buffers, and every tenth frame spawns an Enemy that the world keeps in a registry
// nobody prunes: a logical leak (freed only at shutdown, so an exit-time leak check finds
// nothing). `memlens leaks --growth` takes the frame markers as its windows and names
// SpawnEnemy's stack.
//
//   memlens run -- build/examples/game_loop
//   memlens leaks CAPTURE --growth               # checkpoints: the "frame" markers
//   memlens top CAPTURE@marker:frame#50          # what was in use as frame 50 began
//
// tests/e2e/test_api.py checks its figures exactly.
#include <cstdio>
#include <memory>
#include <vector>

#include "memlens/memlens.h"

struct Enemy {
  float position[2];
  float velocity[2];
  int health;
  int kind;
  char name[40];
};
static_assert(sizeof(Enemy) == 64, "the figures in the tests assume a 64-byte Enemy");

std::vector<Enemy*> g_registry;  // reserved up front: only the enemies themselves grow

Enemy* SpawnEnemy(int frame) {
  Enemy* enemy = new Enemy{{0, 0}, {1, 1}, 100, frame % 3, {}};  // @spawn
  g_registry.push_back(enemy);
  return enemy;
}

long SimulateFrame(int frame) {
  std::vector<int> scratch(1000, frame);  // 4,000 bytes, gone at the end of the frame
  auto particles = std::make_unique<float[]>(256);
  long sum = 0;
  for (int v : scratch) sum += v;
  particles[0] = static_cast<float>(sum);
  if (frame % 10 == 9) SpawnEnemy(frame);
  return sum + static_cast<long>(particles[0]);
}

int main() {
  g_registry.reserve(64);
  long total = 0;
  for (int frame = 0; frame < 100; ++frame) {
    memlens_add_marker("frame", "loop");
    total += SimulateFrame(frame);
  }
  memlens_add_marker("shutdown", nullptr);
  for (Enemy* enemy : g_registry) delete enemy;
  std::printf("done %zu enemies %ld\n", g_registry.size(), total);
  return 0;
}
