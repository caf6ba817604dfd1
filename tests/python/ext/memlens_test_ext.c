// A C extension for the Python tests: allocations made without holding the GIL, from a thread
// that runs Python (attributed to the Python line that called in) and from a thread that never
// ran Python (native frames only); and a call from C back into Python.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdlib.h>

static void* kept[64];
static int kept_count;

static PyObject* alloc_without_gil(PyObject* self, PyObject* arg) {
  size_t n = PyLong_AsSize_t(arg);
  void* block;
  Py_BEGIN_ALLOW_THREADS
  block = malloc(n);  // @without_gil
  Py_END_ALLOW_THREADS
  kept[kept_count++] = block;
  Py_RETURN_NONE;
}

static void* native_thread_main(void* arg) {
  return malloc((size_t)arg);  // @native_thread
}

static PyObject* alloc_in_native_thread(PyObject* self, PyObject* arg) {
  size_t n = PyLong_AsSize_t(arg);
  pthread_t thread;
  void* block = NULL;
  Py_BEGIN_ALLOW_THREADS
  pthread_create(&thread, NULL, native_thread_main, (void*)n);
  pthread_join(thread, &block);
  Py_END_ALLOW_THREADS
  kept[kept_count++] = block;
  Py_RETURN_NONE;
}

static volatile int calls_made;

// An extension's frame between two Python frames: calls f() and returns what it returns. The
// count after the call keeps this frame on the stack (no tail call).
static PyObject* call(PyObject* self, PyObject* f) {
  PyObject* result = PyObject_CallNoArgs(f);
  calls_made = calls_made + 1;
  return result;
}

static PyMethodDef methods[] = {
    {"alloc_without_gil", alloc_without_gil, METH_O, "malloc(n) with the GIL released"},
    {"alloc_in_native_thread", alloc_in_native_thread, METH_O, "malloc(n) in a non-Python thread"},
    {"call", call, METH_O, "f(), called from C"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "memlens_test_ext", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_memlens_test_ext(void) { return PyModule_Create(&module); }
