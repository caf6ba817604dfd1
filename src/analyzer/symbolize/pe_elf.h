// src/analyzer/symbolize/pe_elf.h
//
// PeToElf: dresses a PE image's symbol information as an ELF64 executable, so that the
// Symbolizer hands it to libdwfl like any Linux object and everything it does for ELF (the
// function index, inlined frames, line tables, demangling, caches) works unchanged for the
// Windows agent's modules. libdwfl reads only ELF; teaching it PE is not possible from outside.
//
// The ELF has, at the PE's preferred addresses (image base + rva), so that ip - load_bias is
// the same address in both:
//   - one PT_LOAD covering the whole image (SizeOfImage), no file bytes: it gives libdwfl the
//     module's address range;
//   - an SHT_NOBITS section per PE section that is not debug info (same name, address, size):
//     symbol lookups find the section of an address;
//   - the PE's .debug_* sections, bytes copied, at address 0 as in any ELF (mingw-w64's DWARF
//     already holds the preferred addresses: a linked image needs no relocation);
//   - .symtab/.strtab from the COFF functions, each sized up to the next function (COFF gives
//     no sizes, and libdwfl matches sizeless symbols only within narrow rules).
//
// Called by: the Symbolizer, on its thread. PeToElf is pure; ElfMemfd makes a file of it.
#pragma once

#include <string>
#include <string_view>

#include "analyzer/symbolize/pe_image.h"

namespace memlens::analyzer {

// `file` is the bytes `image` was parsed from.
std::string PeToElf(const PeImage& image, std::string_view file);

// An anonymous in-memory file (memfd_create, close-on-exec) holding `bytes`, read position 0,
// for dwfl_report_elf; -1 with errno set on failure. `name` shows in /proc/self/fd only.
int ElfMemfd(const std::string& name, std::string_view bytes);

}  // namespace memlens::analyzer
