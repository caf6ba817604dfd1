// src/attach/process_objects.h
//
// What `memlens attach` needs to know of another process before it can make that process call
// a function: which objects (the C library, the dynamic loader, the agent) it has loaded, where,
// and at which address a symbol of one of them lives there. Read from /proc/PID/maps and from
// the objects' files (their dynamic symbol tables, with libelf), never from the process's
// memory, so nothing here needs the process stopped.
//
// Runs on: the memlens command's main thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace memlens::attach {

// One file mapped into a process, as /proc/PID/maps lists it.
struct LoadedObject {
  std::string path;      // as the process sees it (maps' " (deleted)" taken off)
  bool deleted = false;  // the file was removed or replaced (an upgrade) since it was mapped
  uint64_t device = 0;   // maps' major:minor, as makedev() makes it
  uint64_t inode = 0;
  uint64_t lowest = 0;   // the start of its mapping at file offset 0 (its ELF header)
  uint64_t begin = 0;    // the lowest and highest addresses of its mappings: [begin, end)
  uint64_t end = 0;
};

// Every file-backed object mapped in process `pid`, in address order. False with a one-line
// reason when /proc/PID/maps cannot be read.
bool ReadLoadedObjects(pid_t pid, std::vector<LoadedObject>* objects, std::string* error);

// The first object whose file name (the path's last part) satisfies `matches`, or nullptr.
const LoadedObject* FindObject(const std::vector<LoadedObject>& objects,
                               const std::function<bool(const std::string& name)>& matches);

// The address in process `pid` of the function or object `symbol` defined by `object` (looked
// up in the file's dynamic symbol table, relocated by where its first segment is mapped). False
// with a one-line reason when the file cannot be read, is no longer the one mapped (its device
// and inode differ), or does not define the symbol.
bool FindSymbol(pid_t pid, const LoadedObject& object, const char* symbol, uint64_t* address,
                std::string* error);

// Why the program of process `pid` cannot take the agent ("" when it can, or when its file
// cannot be read: ptrace then says why): not a 64-bit x86 program.
std::string ProgramRefusal(pid_t pid);

// The process's command name (/proc/PID/comm), "?" when it cannot be read.
std::string ProgramName(pid_t pid);

// The value of `key:` in /proc/PID/status ("State", "Tgid", "TracerPid", "Uid", "SigIgn"...),
// its leading blanks taken off; "" when the process or the field is not there.
std::string StatusField(pid_t pid, const std::string& key);

}  // namespace memlens::attach
