# lf_add_test(NAME SOURCES a.cpp ... LIBS lib ... LABELS unit|integration)
# One gtest executable per call, registered with ctest under its label so CI can pick
# `ctest -L unit` and the slower `-L integration` separately.
function(lf_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  # fail_on_skip.cpp: with LF_FAIL_ON_SKIP=1 (CI) a skipped test fails its program.
  add_executable(${name} ${T_SOURCES} ${PROJECT_SOURCE_DIR}/tests/support/fail_on_skip.cpp)
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    LF_SOURCE_DIR="${PROJECT_SOURCE_DIR}" LF_BINARY_DIR="${PROJECT_BINARY_DIR}")
  lf_warnings(${name})
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
endfunction()

# Warnings for our own targets (not for generated code).
function(lf_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(LF_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
