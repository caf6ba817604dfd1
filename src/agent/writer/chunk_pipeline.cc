// src/agent/writer/chunk_pipeline.cc: see chunk_pipeline.h.
#include "agent/writer/chunk_pipeline.h"

#include <utility>

#include "agent/writer/writer_core.h"

namespace memlens::agent {

ChunkPipeline::ChunkPipeline(WriterIo* io) : io_(io), thread_([this] { Loop(); }) {}

ChunkPipeline::~ChunkPipeline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void ChunkPipeline::Submit(std::string* payload, const std::vector<size_t>& breaks) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return !busy_; });
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  payload_.swap(*payload);
  payload->clear();
  breaks_ = breaks;
  busy_ = true;
  lock.unlock();
  changed_.notify_all();
}

void ChunkPipeline::Wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return !busy_; });
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

void ChunkPipeline::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return busy_ || stopping_; });
    if (!busy_) return;  // stopping, and everything submitted is written
    lock.unlock();
    std::exception_ptr failure;
    try {
      chunk_.clear();
      compressor_.AppendChunk(payload_, &chunk_, &breaks_);
      io_->Write(chunk_);
    } catch (...) {  // this thread has no handler: the writer's thread gets it
      failure = std::current_exception();
    }
    lock.lock();
    if (failure) failure_ = failure;
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace memlens::agent
