// src/agent/writer/chunk_pipeline.h
//
// ChunkPipeline: compresses and writes the writer's chunks on a thread of its own, one chunk at
// a time, while the writer goes on draining the rings. Compressing a chunk takes the writer a
// few milliseconds, in which one churning thread fills a 512 KiB ring: drained only between
// chunks, its ring had to grow to 2 MiB of the program's memory, or the thread waited on it
// (churn_1t: 460 waits a run at 512 KiB, 11-21 at 2 MiB). Used by the hosted writer only (a
// thread of `memlens run`): inside the program the writer stays one thread.
//
// Runs on: Submit and Wait on the writer's thread; compression and WriterIo::Write on the
// pipeline's own thread, never two writes at once, in the order submitted.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "format/chunk.h"

namespace memlens::agent {

class WriterIo;

class ChunkPipeline {
 public:
  explicit ChunkPipeline(WriterIo* io);
  ~ChunkPipeline();  // writes what was submitted, then ends the thread
  ChunkPipeline(const ChunkPipeline&) = delete;
  ChunkPipeline& operator=(const ChunkPipeline&) = delete;

  // Takes the payload (left empty, its buffer swapped with the last chunk's) and the block
  // starts; waits first while the previous chunk is still being written.
  void Submit(std::string* payload, const std::vector<size_t>& breaks);
  // Returns once every submitted chunk is written.
  void Wait();
  // Both rethrow, on the writer's thread, what compressing or writing threw (bad_alloc): the
  // hosted writer's catch ends the capture there, as when it compressed on its own thread.

 private:
  void Loop();

  WriterIo* io_;
  format::ChunkCompressor compressor_;
  std::string payload_;
  std::vector<size_t> breaks_;
  std::string chunk_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool busy_ = false;  // payload_ holds a chunk not yet written
  std::exception_ptr failure_;  // what the last chunk threw, for the writer's thread
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace memlens::agent
