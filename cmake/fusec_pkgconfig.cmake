# fusec_pkgconfig.cmake: writes fusec.pc and fusec-static.pc into the build tree from
# cmake/fusec.pc.in (included by the install section of the top-level CMakeLists.txt).
#
#   pkg-config --cflags --libs fusec            the shared library
#   pkg-config --static --libs fusec            ... plus what libfusec.a needs (Libs.private:
#                                               LLVM 19's shared library, pthread, dl, m:
#                                               the static library's link interface)
#   pkg-config --cflags --libs fusec-static     libfusec.a by its path, plus the same libraries
#                                               (a plain -lfusec would pick the .so)
# The files are relocatable: the prefix is found from the .pc file's own directory
# (${pcfiledir}), so `cmake --install --prefix P` to any P gives correct flags.
# Needs: _fusec_static_iface (fusec_static's link interface as the build made it: absolute
# library paths, Threads::Threads, plain names), LLVM_LIB, LLVM_LIB_DIR, PROJECT_VERSION,
# GNUInstallDirs.

if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "fusec: the relocatable pkg-config file needs a relative CMAKE_INSTALL_LIBDIR")
endif()
file(RELATIVE_PATH FUSEC_PC_REL_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" FUSEC_PC_REL_PREFIX "${FUSEC_PC_REL_PREFIX}")
set(FUSEC_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(FUSEC_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(FUSEC_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()

# Libs.private from the static library's link interface: /usr/lib/llvm-19/lib/libLLVM-19.so
# gives -L${llvm_libdir} -lLLVM-19, another absolute path -L<dir> -l<name>, Threads::Threads
# -lpthread, a plain name -l<name>.
set(FUSEC_PC_PRIVATE "")
foreach(_l IN LISTS _fusec_static_iface)
  if(IS_ABSOLUTE "${_l}")
    get_filename_component(_n "${_l}" NAME_WE)
    string(REGEX REPLACE "^lib" "" _n "${_n}")
    get_filename_component(_d "${_l}" DIRECTORY)
    if(_l STREQUAL LLVM_LIB)
      set(_d "\${llvm_libdir}")
    endif()
    string(APPEND FUSEC_PC_PRIVATE " -L${_d} -l${_n}")
  elseif(_l STREQUAL "Threads::Threads")
    string(APPEND FUSEC_PC_PRIVATE " -lpthread")
  elseif(_l MATCHES "::|^\\$<|^-")
    message(FATAL_ERROR "fusec.pc: no pkg-config form known for the link item '${_l}'")
  else()
    string(APPEND FUSEC_PC_PRIVATE " -l${_l}")
  endif()
endforeach()
string(STRIP "${FUSEC_PC_PRIVATE}" FUSEC_PC_PRIVATE)

set(FUSEC_PC_NAME fusec)
set(FUSEC_PC_DESCRIPTION "fusec tensor compiler library (shared)")
set(FUSEC_PC_LIBS "-L\${libdir} -lfusec")
set(FUSEC_PC_LIBS_PRIVATE "${FUSEC_PC_PRIVATE}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/fusec.pc.in ${CMAKE_CURRENT_BINARY_DIR}/fusec.pc @ONLY)

set(FUSEC_PC_NAME fusec-static)
set(FUSEC_PC_DESCRIPTION "fusec tensor compiler library (static: libfusec.a)")
set(FUSEC_PC_LIBS "\${libdir}/libfusec.a ${FUSEC_PC_PRIVATE}")
set(FUSEC_PC_LIBS_PRIVATE "")
configure_file(${CMAKE_CURRENT_LIST_DIR}/fusec.pc.in ${CMAKE_CURRENT_BINARY_DIR}/fusec-static.pc @ONLY)
