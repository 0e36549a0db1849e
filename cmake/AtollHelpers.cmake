# Warnings shared by every atoll target, in one INTERFACE target.
add_library(atoll_warnings INTERFACE)
target_compile_options(atoll_warnings INTERFACE -Wall -Wextra -Wshadow -Wno-unused-parameter)
if(ATOLL_WERROR)
  target_compile_options(atoll_warnings INTERFACE -Werror)
endif()
if(ATOLL_SANITIZE)
  target_compile_options(atoll_warnings INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer)
  target_link_options(atoll_warnings INTERFACE -fsanitize=address,undefined)
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
