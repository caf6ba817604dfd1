// StackResolver::Site resolves only the frames that decide a stack's allocation site: it must
// name the same frame as resolving the whole stack and applying SiteIndex.
#include "analyzer/model/sites.h"

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

}  // namespace
}  // namespace memlens::analyzer
