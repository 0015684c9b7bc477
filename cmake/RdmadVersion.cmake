# Version and commit baked into the binaries (rdmad --version, rdmad_build_info).
set(RDMAD_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS ${CMAKE_SOURCE_DIR}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE RDMAD_COMMIT
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE git_rc)
  if(NOT git_rc EQUAL 0 OR RDMAD_COMMIT STREQUAL "")
    set(RDMAD_COMMIT "unknown")
  endif()
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/version.h.in ${CMAKE_BINARY_DIR}/generated/rdmad/version.h @ONLY)
add_library(rdmad_version INTERFACE)
target_include_directories(rdmad_version INTERFACE ${CMAKE_BINARY_DIR}/generated)
