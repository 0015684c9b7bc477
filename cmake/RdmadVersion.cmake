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
  # Re-run this when a new commit is checked out, so an incremental build reports the right one.
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --git-path HEAD
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE git_head OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  execute_process(COMMAND ${GIT_EXECUTABLE} symbolic-ref -q HEAD
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE git_ref OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  foreach(f ${git_head} .git/${git_ref} .git/packed-refs)
    if(f AND EXISTS ${CMAKE_SOURCE_DIR}/${f})
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${f})
    endif()
  endforeach()
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/version.h.in ${CMAKE_BINARY_DIR}/generated/rdmad/version.h @ONLY)
add_library(rdmad_version INTERFACE)
target_include_directories(rdmad_version INTERFACE ${CMAKE_BINARY_DIR}/generated)
