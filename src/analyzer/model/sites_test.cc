// StackResolver::Site resolves only the frames that decide a stack's allocation site: it must
// name the same frame as resolving the whole stack and applying SiteIndex.
#include "analyzer/model/sites.h"
#include "analyzer/views/sites.h"

#include <gtest/gtest.h>

namespace memlens::analyzer {
namespace {

using format::AnnotationFrameIp;
using format::PythonFrameIp;

// Node ids are dense: each node's parent comes before it.
uint64_t AddNode(Profile* p, uint64_t parent, uint64_t ip) {
  p->nodes.push_back({parent, ip, 0});
  return p->nodes.size() - 1;
}

void ExpectSameSite(StackResolver* resolver, uint64_t stack) {
  Stack frames = resolver->Frames(stack);
  ASSERT_FALSE(frames.empty());
  const SourceFrame& whole = *frames[resolver->SiteIndex(frames)];
  SourceFrame site = resolver->Site(stack);
  EXPECT_EQ(site.function, whole.function);
  EXPECT_EQ(site.file, whole.file);
  EXPECT_EQ(site.line, whole.line);
  EXPECT_EQ(site.module_offset, whole.module_offset);
}

TEST(StackResolverSite, PythonStacksTakeTheProgramsOwnLine) {
  Profile p;
  p.python_codes[1] = {1, "/home/u/app.py", "main", 1};
  p.python_codes[2] = {2, "/usr/lib/python3.11/json/encoder.py", "encode", 1};
  p.heap_names[3] = "pool";
  uint64_t outer = AddNode(&p, 0, 0x1000);                     // native, outermost
  uint64_t app = AddNode(&p, outer, PythonFrameIp(1, 10));     // the program's line
  uint64_t lib = AddNode(&p, app, PythonFrameIp(2, 20));       // the standard library
  uint64_t inner = AddNode(&p, lib, 0x2000);                   // the interpreter, natively
  uint64_t heap = AddNode(&p, inner, AnnotationFrameIp(format::Annotation::kHeap, 3));
  StackResolver resolver(p);
  ExpectSameSite(&resolver, heap);
  EXPECT_EQ(resolver.Site(heap).line, 10u);
  EXPECT_EQ(resolver.Site(heap).file, "/home/u/app.py");
  ExpectSameSite(&resolver, lib);
  EXPECT_EQ(resolver.Site(lib).line, 10u);
  uint64_t lib_only = AddNode(&p, AddNode(&p, 0, PythonFrameIp(2, 30)), 0x2000);
  StackResolver again(p);
  ExpectSameSite(&again, lib_only);  // only library frames: the innermost Python one
  EXPECT_EQ(again.Site(lib_only).line, 30u);
}

TEST(StackResolverSite, NativeStacksStopPastTheAllocator) {
  Profile p;
  p.heap_names[3] = "pool";
  uint64_t outer = AddNode(&p, 0, 0x3000);
  uint64_t caller = AddNode(&p, outer, 0x4000);
  uint64_t heap = AddNode(&p, caller, AnnotationFrameIp(format::Annotation::kHeap, 3));
  StackResolver resolver(p);
  ExpectSameSite(&resolver, heap);
  EXPECT_EQ(resolver.Site(heap).module_offset, 0x4000u);  // the annotation is plumbing
  uint64_t only_annotation = AddNode(&p, 0, AnnotationFrameIp(format::Annotation::kHeap, 3));
  StackResolver again(p);
  ExpectSameSite(&again, only_annotation);  // nothing past the plumbing: the outermost frame
  EXPECT_EQ(again.Site(0).function, "");    // the empty stack
}

TEST(StackResolverFrames, MemlensOwnFramesAreHidden) {
  Profile p;
  format::ModuleRecord agent;
  agent.id = 7;
  agent.path = "/opt/memlens/lib/libmemlens.so";
  agent.segments = {{0x5000, 0x1000}};
  p.modules[agent.id] = agent;
  uint64_t outer = AddNode(&p, 0, 0x1000);
  uint64_t interposer = AddNode(&p, outer, 0x5100);  // the agent's dlopen, say
  p.nodes[interposer].module = agent.id;
  uint64_t inner = AddNode(&p, interposer, 0x3000);
  StackResolver resolver(p);
  Stack frames = resolver.Frames(inner);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0]->module_offset, 0x3000u);
  EXPECT_EQ(frames[1]->module_offset, 0x1000u);
  EXPECT_EQ(resolver.Site(interposer).module_offset, 0x1000u);
}

TEST(EntryPackage, PythonDashMRunsItsPackageAsTheProgramsOwnCode) {
  Profile p;
  p.process.argv = {"python3", "-X", "dev", "-u", "-m", "tool.cli", "-m", "x"};
  p.python_codes[1] = {1, "/venv/lib/python3.11/site-packages/tool/work.py", "build", 1};
  p.python_codes[2] = {2, "/venv/lib/python3.11/site-packages/helper.py", "make", 1};
  p.python_codes[3] = {3, "/usr/lib/python3.11/runpy.py", "_run_code", 1};
  EXPECT_EQ(EntryPackage(p), "tool");
  uint64_t runpy = AddNode(&p, 0, PythonFrameIp(3, 5));
  uint64_t tool = AddNode(&p, runpy, PythonFrameIp(1, 10));
  uint64_t helper = AddNode(&p, tool, PythonFrameIp(2, 20));
  StackResolver resolver(p);
  ExpectSameSite(&resolver, helper);
  EXPECT_EQ(resolver.Site(helper).line, 10u);  // tool's line, not the helper library's
  // The package's compiled code (a mypyc or C extension module) is its own code too.
  format::ModuleRecord speedups;
  speedups.id = 9;
  speedups.path = "/venv/lib/python3.11/site-packages/tool/_speed.cpython-311-x86_64-linux-gnu.so";
  speedups.segments = {{0x9000, 0x1000}};
  p.modules[speedups.id] = speedups;
  uint64_t compiled = AddNode(&p, tool, 0x9100);
  p.nodes[compiled].module = speedups.id;
  uint64_t from_compiled = AddNode(&p, compiled, PythonFrameIp(2, 30));
  StackResolver with_extension(p);
  ExpectSameSite(&with_extension, from_compiled);
  EXPECT_EQ(with_extension.Site(from_compiled).module, speedups.path);
  p.process.argv = {"python3", "-c", "import tool"};
  EXPECT_EQ(EntryPackage(p), "");
  p.process.argv = {"python3", "-mtool"};
  EXPECT_EQ(EntryPackage(p), "tool");
}

// The files are not on this machine, so the modules are recognized by name, as for a capture
// analyzed elsewhere; tests/e2e/test_python.py covers the real interpreter's files.
TEST(StackResolverFrames, InterpreterFramesFoldInPythonStacks) {
  Profile p;
  p.python_codes[1] = {1, "/home/u/app.py", "<module>", 1};
  p.python_codes[2] = {2, "/home/u/app.py", "grow", 7};
  const char* paths[] = {"", "/usr/bin/python3.11",
                         "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0",
                         "/lib/x86_64-linux-gnu/libc.so.6",
                         "/home/u/ext.cpython-311-x86_64-linux-gnu.so"};
  for (uint64_t id = 1; id <= 4; ++id) {
    format::ModuleRecord m;
    m.id = id;
    m.path = paths[id];
    p.modules[id] = m;
  }
  auto add = [&](uint64_t parent, uint64_t ip, uint64_t module) {
    uint64_t node = AddNode(&p, parent, ip);
    p.nodes[node].module = module;
    return node;
  };
  uint64_t start = add(0, 0x1100, 1);                            // _start
  uint64_t libc_start = add(start, 0x3100, 3);                   // __libc_start_main
  uint64_t main = add(libc_start, 0x2100, 2);                    // Py_BytesMain
  uint64_t module = add(main, PythonFrameIp(1, 5), 0);           // <module>
  uint64_t ext = add(module, 0x4100, 4);                         // the extension calls back
  uint64_t call = add(ext, 0x2200, 2);                           // _PyObject_Call
  uint64_t grow = add(call, PythonFrameIp(2, 9), 0);             // grow
  uint64_t append = add(grow, 0x2300, 2);                        // list_append
  uint64_t resize = add(append, 0x2400, 2);                      // list_resize, allocates
  uint64_t thread = add(add(0, 0x3200, 3), 0x4200, 4);           // start_thread, the ext's
  auto offsets = [](const Stack& frames) {
    std::vector<uint64_t> out;
    for (const SourceFrame* f : frames) out.push_back(f->python ? f->line : f->module_offset);
    return out;
  };
  StackResolver folded(p);
  EXPECT_EQ(offsets(folded.Frames(resize)), (std::vector<uint64_t>{0x2400, 9, 0x4100, 5}));
  EXPECT_EQ(offsets(folded.Frames(thread)), (std::vector<uint64_t>{0x4200, 0x3200}));
  ExpectSameSite(&folded, resize);
  // A stack made only of the interpreter's frames keeps the one that allocated.
  EXPECT_EQ(offsets(folded.Frames(main)), (std::vector<uint64_t>{0x2100}));
  StackOptions all;
  all.interpreter_frames = true;
  StackResolver shown(p, all);
  EXPECT_EQ(offsets(shown.Frames(resize)),
            (std::vector<uint64_t>{0x2400, 0x2300, 9, 0x2200, 0x4100, 5, 0x2100, 0x3100, 0x1100}));
  // Stacks that differ only in folded frames are one row.
  uint64_t other_call = add(ext, 0x2280, 2);
  add(add(add(other_call, PythonFrameIp(2, 9), 0), 0x2380, 2), 0x2400, 2);
  p.stacks[resize].allocations = 1;
  p.stacks[p.nodes.size() - 1].allocations = 2;
  StackResolver again(p);
  std::vector<SiteRow> rows = GroupSites(p, &again, GroupBy::kStack);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].stats.allocations, 3u);
  StackResolver shown_again(p, all);
  EXPECT_EQ(GroupSites(p, &shown_again, GroupBy::kStack).size(), 2u);
}

TEST(StackResolverFrames, NothingFoldsWithoutPython) {
  Profile p;
  format::ModuleRecord lib;
  lib.id = 1;
  lib.path = "/usr/lib/libpython3.11.so.1.0";  // embedded, but no Python frame was recorded
  p.modules[1] = lib;
  uint64_t outer = AddNode(&p, 0, 0x1000);
  p.nodes[outer].module = 1;
  uint64_t inner = AddNode(&p, outer, 0x2000);
  p.nodes[inner].module = 1;
  StackResolver resolver(p);
  EXPECT_EQ(resolver.Frames(inner).size(), 2u);
}

}  // namespace
}  // namespace memlens::analyzer
