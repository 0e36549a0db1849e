# Warnings shared by every atoll target, in one INTERFACE target.
add_library(atoll_warnings INTERFACE)
target_compile_options(atoll_warnings INTERFACE -Wall -Wextra -Wshadow -Wno-unused-parameter)
# Clang checks the locking that common/base/thread_annotations.h declares (GUARDED_BY,
# REQUIRES): scripts/thread_safety.sh runs it in CI; gcc has no such analysis.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  target_compile_options(atoll_warnings INTERFACE -Wthread-safety)
endif()
if(ATOLL_WERROR)
  target_compile_options(atoll_warnings INTERFACE -Werror)
endif()
# ATOLL_SANITIZE picks the sanitizers every atoll target is built with: `address` (ASan and
# UBSan; ON, the option's old boolean form, means the same) or `thread` (TSan; it cannot be
# combined with ASan). UBSan stops at its first report instead of printing and going on, so
# that undefined behaviour fails a test rather than scrolling past in its log.
string(TOLOWER "${ATOLL_SANITIZE}" atoll_sanitize)
if(atoll_sanitize MATCHES "^(address|on|true|yes|1)$")
  set(atoll_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all)
elseif(atoll_sanitize STREQUAL "thread")
  set(atoll_sanitize_flags -fsanitize=thread)
elseif(NOT atoll_sanitize MATCHES "^(|off|false|no|0)$")
  message(FATAL_ERROR "ATOLL_SANITIZE=${ATOLL_SANITIZE}: expected address, thread or OFF")
endif()
if(atoll_sanitize_flags)
  # GCC's flow analysis sees the sanitizers' checks as paths on which libstdc++'s own members
  # (std::regex, std::function) are read uninitialized: false alarms there, so not errors.
  target_compile_options(atoll_warnings INTERFACE ${atoll_sanitize_flags} -fno-omit-frame-pointer
                                                  -Wno-maybe-uninitialized)
  target_link_options(atoll_warnings INTERFACE ${atoll_sanitize_flags})
endif()

# atoll_library(NAME SOURCES ... DEPS ... [PRIVATE_DEPS ...]): a static library with the
# project's warnings, the repository root and include/ on its include path. DEPS are what
# its headers need (passed on to its users); PRIVATE_DEPS only what its sources use.
function(atoll_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE atoll_warnings ${ARG_PRIVATE_DEPS})
endfunction()

# atoll_executable(NAME SOURCES ... DEPS ...): a program placed in build/bin.
function(atoll_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE atoll_warnings ${ARG_DEPS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endfunction()
