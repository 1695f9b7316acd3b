# check_install.cmake: installs a fusec build into a fresh prefix and builds and runs the C
# examples against it, as a user's project would. Run by ctest (tests/install.cmake) as
#   cmake -DBUILD_DIR=.. -DSOURCE_DIR=.. -DWORK_DIR=.. [-DCONFIG=..] [-DGENERATOR=..]
#         [-DMAKE_PROGRAM=..] [-DC_COMPILER=..] [-DSANITIZE=address,..] [-DPKG_CONFIG=..]
#         -P check_install.cmake
# Steps (each failure stops the test with a message naming the step):
#   1. cmake --install BUILD_DIR --prefix WORK_DIR/prefix; the installed files are all there
#   2. examples/c with find_package(fusec): shared (fusec::fusec) and static
#      (FUSEC_EXAMPLES_STATIC=ON: fusec::fusec_static); both programs run on the CPU, exit 0
#   3. pkg-config: `cc gpt2_jit.c $(pkg-config --cflags --libs fusec)` and fused_vs_eager.c
#      with fusec-static; both run, exit 0; `--static --libs fusec` names LLVM
#      (skipped with a message where no pkg-config is installed)
#   4. the check can fail: gpt2_jit on a missing file must exit 1, on a bad -D must exit 2
# The programs run the GPT-2 block at small odd dims (B=1 T=5 C=12 H=2 and B=2 T=3 C=8 H=1).
cmake_minimum_required(VERSION 3.20)
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT ${v})
    message(FATAL_ERROR "check_install.cmake: -D${v}= is required")
  endif()
endforeach()
if(NOT GENERATOR)
  set(GENERATOR "Unix Makefiles")
endif()

set(prefix ${WORK_DIR}/prefix)
set(examples ${SOURCE_DIR}/examples/c)
set(tf ${SOURCE_DIR}/examples/gpt2_block.tf)
set(dims_a -D B=1 -D T=5 -D C=12 -D H=2)
set(dims_b -DB=2 -DT=3 -DC=8 -DH=1)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# Runs a command; stops the test unless it exits with `want` (default 0).
function(step name)
  cmake_parse_arguments(A "" "WANT;DIR" "COMMAND" ${ARGN})
  if(NOT DEFINED A_WANT)
    set(A_WANT 0)
  endif()
  if(NOT A_DIR)
    set(A_DIR ${WORK_DIR})
  endif()
  string(REPLACE ";" " " shown "${A_COMMAND}")
  message(STATUS "[${name}] ${shown}")
  execute_process(COMMAND ${A_COMMAND} WORKING_DIRECTORY ${A_DIR} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT "${rc}" STREQUAL "${A_WANT}")
    message(FATAL_ERROR "[${name}] exit status ${rc}, expected ${A_WANT}\n"
                        "--- stdout ---\n${out}--- stderr ---\n${err}")
  endif()
  set(step_out "${out}" PARENT_SCOPE)
  set(step_err "${err}" PARENT_SCOPE)
endfunction()

# ---- 1. install ---------------------------------------------------------------------------
set(cfg)
if(CONFIG)
  set(cfg --config ${CONFIG})
endif()
step(install COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} ${cfg})
foreach(f include/fusec.h lib/libfusec.a lib/libfusec.so bin/fusec
          lib/cmake/fusec/fusecConfig.cmake lib/cmake/fusec/fusecConfigVersion.cmake
          lib/cmake/fusec/fusecTargets.cmake lib/pkgconfig/fusec.pc lib/pkgconfig/fusec-static.pc)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "[install] ${prefix}/${f} is missing")
  endif()
endforeach()
file(GLOB sos ${prefix}/lib/libfusec.so.*)
if(NOT sos)
  message(FATAL_ERROR "[install] no versioned libfusec.so.* in ${prefix}/lib")
endif()
file(READ ${prefix}/lib/cmake/fusec/fusecTargets.cmake targets)
if(targets MATCHES "INTERFACE_LINK_LIBRARIES \"[^\"]*/[^\"]*\"")
  message(FATAL_ERROR "[install] fusecTargets.cmake names a library by a path of this machine "
                      "(it must use an imported target found by fusecConfig.cmake):\n${targets}")
endif()
step(installed-fusec COMMAND ${prefix}/bin/fusec --version)

# Consumers get the sanitizer runtime the library was built with.
set(san_flags "")
if(SANITIZE)
  set(san_flags "-fsanitize=${SANITIZE} -fno-omit-frame-pointer")
endif()

# ---- 2. CMake: find_package(fusec) ------------------------------------------------------------
set(gen -G ${GENERATOR})
if(MAKE_PROGRAM)
  list(APPEND gen -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(C_COMPILER)
  list(APPEND gen -DCMAKE_C_COMPILER=${C_COMPILER})
endif()
foreach(kind shared static)
  set(bdir ${WORK_DIR}/cmake-${kind})
  set(static OFF)
  if(kind STREQUAL "static")
    set(static ON)
  endif()
  step(cmake-${kind}-configure COMMAND ${CMAKE_COMMAND} -S ${examples} -B ${bdir} ${gen}
       -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=RelWithDebInfo
       "-DCMAKE_C_FLAGS=-Werror ${san_flags}" "-DCMAKE_EXE_LINKER_FLAGS=${san_flags}"
       -DFUSEC_EXAMPLES_STATIC=${static})
  step(cmake-${kind}-build COMMAND ${CMAKE_COMMAND} --build ${bdir})
  # the default block (FUSEC_EXAMPLE_TF) with small dims, then an explicit path
  step(cmake-${kind}-gpt2_jit COMMAND ${bdir}/gpt2_jit --device cpu ${dims_a})
  if(NOT step_out MATCHES "all 1 output match the reference")
    message(FATAL_ERROR "[cmake-${kind}-gpt2_jit] unexpected output:\n${step_out}")
  endif()
  step(cmake-${kind}-fused_vs_eager COMMAND ${bdir}/fused_vs_eager ${tf} --device cpu ${dims_b}
       --warmup 1 --repeat 2)
  if(NOT step_out MATCHES "speedup fused over eager: [0-9.]+x")
    message(FATAL_ERROR "[cmake-${kind}-fused_vs_eager] no speedup line:\n${step_out}")
  endif()
endforeach()
# the shared build must really use libfusec.so
execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_TRACE_LOADED_OBJECTS=1 ${WORK_DIR}/cmake-shared/gpt2_jit
                OUTPUT_VARIABLE ldd RESULT_VARIABLE rc)
if(rc EQUAL 0 AND NOT ldd MATCHES "libfusec\\.so")
  message(FATAL_ERROR "[cmake-shared] gpt2_jit does not load libfusec.so:\n${ldd}")
endif()

# ---- 3. pkg-config --------------------------------------------------------------------------------
if(NOT PKG_CONFIG)
  message(STATUS "[pkg-config] skipped: no pkg-config on this machine")
else()
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  set(cc cc)
  if(C_COMPILER)
    set(cc ${C_COMPILER})
  endif()
  separate_arguments(san_list UNIX_COMMAND "${san_flags}")
  step(pkg-config-static-libs COMMAND ${PKG_CONFIG} --static --libs fusec)
  if(NOT step_out MATCHES "-lLLVM" OR NOT step_out MATCHES "-lpthread" OR NOT step_out MATCHES "-lm")
    message(FATAL_ERROR "[pkg-config] --static --libs fusec lacks LLVM/pthread/m: ${step_out}")
  endif()
  step(pkg-config-libs COMMAND ${PKG_CONFIG} --libs fusec)
  if(step_out MATCHES "LLVM")
    message(FATAL_ERROR "[pkg-config] --libs fusec (shared) should not name LLVM: ${step_out}")
  endif()
  set(pdir ${WORK_DIR}/pkg-config)
  file(MAKE_DIRECTORY ${pdir})
  foreach(pair "fusec;gpt2_jit" "fusec-static;fused_vs_eager")
    list(GET pair 0 pkg)
    list(GET pair 1 prog)
    step(pkg-config-${pkg} COMMAND ${PKG_CONFIG} --cflags --libs ${pkg})
    separate_arguments(flags UNIX_COMMAND "${step_out}")
    # as documented: cc prog.c $(pkg-config --cflags --libs fusec)
    step(pkg-config-${pkg}-cc COMMAND ${cc} -std=c11 -Wall -Wextra -Werror ${san_list}
         "-DFUSEC_EXAMPLE_TF=\"${tf}\"" ${examples}/${prog}.c ${flags} -o ${pdir}/${prog})
  endforeach()
  set(ENV{LD_LIBRARY_PATH} "${prefix}/lib:$ENV{LD_LIBRARY_PATH}")
  step(pkg-config-gpt2_jit COMMAND ${pdir}/gpt2_jit ${tf} --device cpu ${dims_b} --seed 7)
  step(pkg-config-fused_vs_eager COMMAND ${pdir}/fused_vs_eager --device cpu ${dims_a} --warmup 0
       --repeat 1)
endif()

# ---- 4. the harness sees failures --------------------------------------------------------------
set(bdir ${WORK_DIR}/cmake-shared)
step(fails-missing-file WANT 1 COMMAND ${bdir}/gpt2_jit ${WORK_DIR}/no-such-file.tf --device cpu)
if(NOT step_err MATCHES "no-such-file.tf")
  message(FATAL_ERROR "[fails-missing-file] the error does not name the file:\n${step_err}")
endif()
step(fails-bad-dim WANT 2 COMMAND ${bdir}/gpt2_jit ${tf} --device cpu -D B=0)
step(fails-compile WANT 1 COMMAND ${bdir}/fused_vs_eager ${tf} --device cpu -D H=5)
if(NOT step_err MATCHES "gpt2_block.tf:[0-9]+:[0-9]+: error")
  message(FATAL_ERROR "[fails-compile] no file:line:col diagnostic:\n${step_err}")
endif()
message(STATUS "install test passed")
