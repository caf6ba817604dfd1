// src/agent/writer/module_scanner.h
//
// ModuleScanner: the writer's view of the ELF objects mapped in the process (dl_iterate_phdr),
// so every instruction pointer in the capture lies in a module recorded before it. Modules that
// go away (dlclose) are reported as unloaded but kept, so late frames still find them.
//
// Runs on: the writer thread (and, under memlens run, application threads after a dlopen,
// hosted.cc). A scan and a fork on another thread exclude each other (module_scanner.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/records.h"

namespace memlens::agent {

class ModuleScanner {
 public:
  // Re-reads the loaded objects. Appends newly loaded ones to *loaded and the ids of vanished
  // ones to *unloaded.
  void Rescan(std::vector<format::ModuleRecord>* loaded, std::vector<uint64_t>* unloaded);
  // True when ip lies in an executable segment of a module seen so far.
  bool Contains(uint64_t ip) const;

 private:
  struct Known {
    uint64_t id;
    std::string path;
    uint64_t load_bias;
    std::vector<format::Segment> segments;
    bool loaded;
  };
  std::vector<Known> modules_;
  uint64_t next_id_ = 1;
};

}  // namespace memlens::agent
