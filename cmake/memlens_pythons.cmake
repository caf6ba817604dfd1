# cmake/memlens_pythons.cmake: the Python hooks library (src/python), one per interpreter.
#
# For the interpreter CMake finds (Python3_EXECUTABLE: python3 on PATH unless given) and each
# executable in MEMLENS_PYTHONS, it asks the interpreter itself for its version, build (free-
# threaded or not), headers and extension suffix, and builds build/lib/libmemlens_python<tag>.so,
# tag = "3.13" or "3.13t" (free-threaded). MEMLENS_PYTHON_TAGS lists the tags built;
# MEMLENS_PYTHON_<tag>_INCLUDE and _EXT_SUFFIX describe each (tests/CMakeLists.txt builds the
# test extension with them).

# The versions there is a frame layout header for (src/python/frames_<major>_<minor>.h, which
# interpreter_frames.h picks by version): the headers are the list.
file(GLOB memlens_frame_headers RELATIVE ${CMAKE_SOURCE_DIR}/src/python
     CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/python/frames_*.h)
set(MEMLENS_SUPPORTED_PYTHONS "")
foreach(header IN LISTS memlens_frame_headers)
  string(REGEX REPLACE "^frames_([0-9]+)_([0-9]+)\\.h$" "\\1.\\2" version ${header})
  list(APPEND MEMLENS_SUPPORTED_PYTHONS ${version})
endforeach()
list(SORT MEMLENS_SUPPORTED_PYTHONS COMPARE NATURAL)
set(MEMLENS_PYTHONS "" CACHE STRING
    "more Python interpreters (executables, a ;-list) to build Python hooks for")
set(MEMLENS_PYTHON_TAGS "")

# Asks `python` about itself; sets <prefix>_VERSION, _TAG, _INCLUDE, _EXT_SUFFIX (empty when it
# does not run).
function(memlens_ask_python python prefix)
  execute_process(COMMAND ${python} -I -c
    "import sys, sysconfig; g = sysconfig.get_config_var; print('%d.%d' % sys.version_info[:2], 't' if g('Py_GIL_DISABLED') else '', sysconfig.get_path('include'), g('EXT_SUFFIX'), sep=';')"
    OUTPUT_VARIABLE answer OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE status ERROR_QUIET)
  list(LENGTH answer fields)
  if(NOT status EQUAL 0 OR NOT fields EQUAL 4)
    set(answer ";;;")
  endif()
  list(GET answer 0 version)
  list(GET answer 1 t)
  list(GET answer 2 include)
  list(GET answer 3 suffix)
  set(${prefix}_VERSION "${version}" PARENT_SCOPE)
  set(${prefix}_TAG "${version}${t}" PARENT_SCOPE)
  set(${prefix}_INCLUDE "${include}" PARENT_SCOPE)
  set(${prefix}_EXT_SUFFIX "${suffix}" PARENT_SCOPE)
endfunction()

# Builds the hooks for `python`; `required`: a problem is a configure error rather than a warning.
function(memlens_add_python python required)
  set(level WARNING)
  if(required)
    set(level FATAL_ERROR)
  endif()
  memlens_ask_python(${python} PY)
  if(PY_VERSION STREQUAL "")
    message(${level} "${python} does not run as a Python interpreter: no Python hooks for it")
    return()
  endif()
  if(NOT PY_VERSION IN_LIST MEMLENS_SUPPORTED_PYTHONS)
    string(REPLACE ";" ", " supported "${MEMLENS_SUPPORTED_PYTHONS}")
    message(${level} "${python} is Python ${PY_TAG}; memlens reads the frames of Python "
            "${supported} (src/python/interpreter_frames.h): no Python hooks for it")
    return()
  endif()
  if(NOT EXISTS "${PY_INCLUDE}/Python.h")
    message(${level} "${python} (Python ${PY_TAG}) has no headers at ${PY_INCLUDE} (Debian: "
            "python${PY_VERSION}-dev): no Python hooks for it")
    return()
  endif()
  if(PY_TAG IN_LIST MEMLENS_PYTHON_TAGS)
    message(STATUS "Python hooks ${PY_TAG}: already built for ${MEMLENS_PYTHON_${PY_TAG}_EXECUTABLE}, "
            "${python} skipped")
    return()
  endif()
  set(target memlens_python_hooks_${PY_TAG})
  add_library(${target} MODULE ${CMAKE_SOURCE_DIR}/src/python/python_hooks.cc)
  set_target_properties(${target} PROPERTIES OUTPUT_NAME memlens_python${PY_TAG} PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden)
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}/src ${PY_INCLUDE})
  target_compile_options(${target} PRIVATE ${MEMLENS_AGENT_FLAGS})
  # Python's symbols come from the interpreter the library is loaded into.
  target_link_libraries(${target} PRIVATE ${CMAKE_DL_LIBS})
  add_dependencies(memlens_agent ${target})
  install(TARGETS ${target} LIBRARY DESTINATION ${MEMLENS_INSTALL_PREFIX}lib)
  message(STATUS "Python hooks ${PY_TAG}: ${python}")
  set(MEMLENS_PYTHON_TAGS ${MEMLENS_PYTHON_TAGS} ${PY_TAG} PARENT_SCOPE)
  set(MEMLENS_PYTHON_${PY_TAG}_EXECUTABLE "${python}" PARENT_SCOPE)
  set(MEMLENS_PYTHON_${PY_TAG}_INCLUDE "${PY_INCLUDE}" PARENT_SCOPE)
  set(MEMLENS_PYTHON_${PY_TAG}_EXT_SUFFIX "${PY_EXT_SUFFIX}" PARENT_SCOPE)
endfunction()

find_package(Python3 COMPONENTS Interpreter)
if(Python3_EXECUTABLE)
  memlens_add_python(${Python3_EXECUTABLE} FALSE)
endif()
foreach(python IN LISTS MEMLENS_PYTHONS)
  memlens_add_python(${python} TRUE)
endforeach()
if(NOT MEMLENS_PYTHON_TAGS)
  string(REPLACE ";" ", " supported "${MEMLENS_SUPPORTED_PYTHONS}")
  message(WARNING "No supported Python (${supported}) with its headers found: "
          "Python frames will not be recorded (Python3_EXECUTABLE selects the interpreter)")
endif()
