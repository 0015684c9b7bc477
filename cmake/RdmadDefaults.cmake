# Compile settings for our own targets only (third-party headers come in as SYSTEM includes,
# so their warnings never fail our build).
set(RDMAD_WARNINGS
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused
    -Woverloaded-virtual -Wimplicit-fallthrough -Wformat=2 -Wmisleading-indentation)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND RDMAD_WARNINGS -Wduplicated-cond -Wlogical-op)  # g++ only; clang rejects them
endif()
if(RDMAD_WERROR)
  list(APPEND RDMAD_WARNINGS -Werror)
endif()

if(RDMAD_SANITIZE STREQUAL "")
  set(RDMAD_SAN_FLAGS "")
elseif(RDMAD_SANITIZE STREQUAL "address,undefined" OR RDMAD_SANITIZE STREQUAL "thread")
  set(RDMAD_SAN_FLAGS -fsanitize=${RDMAD_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  # GCC's flow warnings see through sanitizer instrumentation and report false positives in the
  # standard library (std::regex, std::function); keep them for the normal build only.
  list(APPEND RDMAD_WARNINGS -Wno-maybe-uninitialized)
  if(RDMAD_SANITIZE STREQUAL "thread")
    # GCC 12 warns that TSan does not model std::atomic_thread_fence, which Asio uses.
    list(APPEND RDMAD_WARNINGS -Wno-tsan)
  endif()
else()
  message(FATAL_ERROR "RDMAD_SANITIZE must be empty, 'address,undefined' or 'thread' (got '${RDMAD_SANITIZE}')")
endif()

# rdmad_target(<target>): apply warnings, sanitizers and the include layout to one of our targets.
function(rdmad_target target)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    return()
  endif()
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${RDMAD_WARNINGS}>
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wpedantic $<$<BOOL:${RDMAD_WERROR}>:-Werror>>
    ${RDMAD_SAN_FLAGS})
  target_link_options(${target} PRIVATE ${RDMAD_SAN_FLAGS})
endfunction()

# rdmad_library(<name> SOURCES ... DEPS ... PRIVATE_DEPS ...): one library per top-level folder.
# Public headers live in <folder>/include/rdmad/<folder>/, private code in <folder>/src/.
function(rdmad_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(rdmad_${name} STATIC ${ARG_SOURCES})
  add_library(rdmad::${name} ALIAS rdmad_${name})
  target_include_directories(rdmad_${name}
    PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(rdmad_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(rdmad_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  rdmad_target(rdmad_${name})
endfunction()
