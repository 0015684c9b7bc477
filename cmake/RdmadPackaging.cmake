# Install rules and CPack Debian packages (included from the top-level CMakeLists.txt after every
# target is defined).
#
#   cmake --build build --target package     -> build/rdmad_<ver>_<arch>.deb, rdmad-dev_<ver>_<arch>.deb
#   cmake --install build --component daemon -> the daemon, its units, config, man page
#
# Components: "daemon" (package rdmad) and "dev" (package rdmad-dev: client library, headers,
# pkg-config and CMake package files; present only once the client library targets exist).
include(GNUInstallDirs)

# The configuration lives in /etc/rdmad whatever the prefix (as the units and docs expect); the
# units go where systemd finds them. Only rdmad.service names the prefix (ExecStart=), so it is
# generated at install time from the prefix in force then (cmake --install --prefix, CPack).
set(RDMAD_CONFIG_DIR /etc/rdmad CACHE PATH "Where rdmad.toml is installed")
set(RDMAD_CONFIG_FILE ${RDMAD_CONFIG_DIR}/rdmad.toml)
set(RDMAD_SOCKET_PATH /run/rdmad/rdmad.sock)
set(RDMAD_SYSTEMD_UNITDIR /usr/lib/systemd/system CACHE PATH "Where rdmad's systemd units are installed")
set(RDMAD_SYSUSERS_DIR /usr/lib/sysusers.d CACHE PATH "Where rdmad's sysusers.d file is installed")
set(RDMAD_TMPFILES_DIR /usr/lib/tmpfiles.d CACHE PATH "Where rdmad's tmpfiles.d file is installed")
set(RDMAD_DEPLOY_OUT ${PROJECT_BINARY_DIR}/deploy)

# --- daemon component ------------------------------------------------------------------------
install(TARGETS rdmad RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR} COMPONENT daemon)
if(TARGET rdmactl)
  install(TARGETS rdmactl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT daemon)
endif()

install(CODE "
  set(RDMAD_SBINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SBINDIR}\")
  set(RDMAD_CONFIG_FILE \"${RDMAD_CONFIG_FILE}\")
  set(RDMAD_SYSTEMD_UNITDIR \"${RDMAD_SYSTEMD_UNITDIR}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/deploy/systemd/rdmad.service.in\"
                 \"${RDMAD_DEPLOY_OUT}/install/rdmad.service\" @ONLY)" COMPONENT daemon)
configure_file(${PROJECT_SOURCE_DIR}/deploy/systemd/rdmad.socket.in ${RDMAD_DEPLOY_OUT}/install/rdmad.socket @ONLY)
install(FILES ${RDMAD_DEPLOY_OUT}/install/rdmad.service ${RDMAD_DEPLOY_OUT}/install/rdmad.socket
        DESTINATION ${RDMAD_SYSTEMD_UNITDIR} COMPONENT daemon)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/rdmad.sysusers DESTINATION ${RDMAD_SYSUSERS_DIR}
        RENAME rdmad.conf COMPONENT daemon)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/rdmad.tmpfiles DESTINATION ${RDMAD_TMPFILES_DIR}
        RENAME rdmad.conf COMPONENT daemon)

# The default configuration and the man page come from the daemon itself, so they always match
# the binary that is packaged.
add_custom_command(
  OUTPUT ${RDMAD_DEPLOY_OUT}/rdmad.toml ${RDMAD_DEPLOY_OUT}/rdmad.8
  COMMAND ${CMAKE_COMMAND} -DRDMAD=$<TARGET_FILE:rdmad> -DOUT_DIR=${RDMAD_DEPLOY_OUT}
          -DCONFIG_FILE=${RDMAD_CONFIG_FILE} -DSOCKET_PATH=${RDMAD_SOCKET_PATH}
          -P ${PROJECT_SOURCE_DIR}/deploy/debian/generate_docs.cmake
  DEPENDS rdmad ${PROJECT_SOURCE_DIR}/deploy/debian/generate_docs.cmake
  COMMENT "Generating the default rdmad.toml and the rdmad(8) man page"
  VERBATIM)
add_custom_target(rdmad_deploy_files ALL DEPENDS ${RDMAD_DEPLOY_OUT}/rdmad.toml ${RDMAD_DEPLOY_OUT}/rdmad.8)
install(FILES ${RDMAD_DEPLOY_OUT}/rdmad.toml DESTINATION ${RDMAD_CONFIG_DIR} COMPONENT daemon)
install(FILES ${RDMAD_DEPLOY_OUT}/rdmad.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT daemon)
install(FILES ${PROJECT_SOURCE_DIR}/docs/operations.md ${PROJECT_SOURCE_DIR}/docs/configuration.md
              ${PROJECT_SOURCE_DIR}/docs/kubernetes.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT daemon)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/prometheus ${PROJECT_SOURCE_DIR}/deploy/grafana
                  ${PROJECT_SOURCE_DIR}/deploy/kubernetes
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT daemon
        PATTERN tests EXCLUDE)

# --- dev component: whatever client library target exists --------------------------------------
set(RDMAD_CLIENT_TARGETS "")
foreach(candidate rdmad_client_shared rdmad_client)
  if(TARGET ${candidate})
    list(APPEND RDMAD_CLIENT_TARGETS ${candidate})
  endif()
endforeach()
if(RDMAD_CLIENT_TARGETS)
  list(GET RDMAD_CLIENT_TARGETS 0 RDMAD_CLIENT_MAIN)
  install(TARGETS ${RDMAD_CLIENT_TARGETS}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
  if(EXISTS ${PROJECT_SOURCE_DIR}/client/include)
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/client/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
            COMPONENT dev)
  endif()
  # Hand-written package files (no install(EXPORT)): the client library's private build
  # dependencies never leak into what users link. Paths are relative to where the files land, so
  # the same files serve /usr (the package) and any other prefix.
  file(RELATIVE_PATH RDMAD_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
  file(RELATIVE_PATH RDMAD_CMAKE_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/cmake/rdmad /)
  string(REGEX REPLACE "/$" "" RDMAD_PC_TO_PREFIX "${RDMAD_PC_TO_PREFIX}")
  string(REGEX REPLACE "/$" "" RDMAD_CMAKE_TO_PREFIX "${RDMAD_CMAKE_TO_PREFIX}")
  foreach(file rdmad.pc rdmadConfig.cmake)
    configure_file(${PROJECT_SOURCE_DIR}/deploy/debian/${file}.in ${RDMAD_DEPLOY_OUT}/${file}.genex @ONLY)
    file(GENERATE OUTPUT ${RDMAD_DEPLOY_OUT}/${file} INPUT ${RDMAD_DEPLOY_OUT}/${file}.genex)
  endforeach()
  include(CMakePackageConfigHelpers)
  write_basic_package_version_file(${RDMAD_DEPLOY_OUT}/rdmadConfigVersion.cmake
                                   COMPATIBILITY SameMinorVersion)
  install(FILES ${RDMAD_DEPLOY_OUT}/rdmad.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
  install(FILES ${RDMAD_DEPLOY_OUT}/rdmadConfig.cmake ${RDMAD_DEPLOY_OUT}/rdmadConfigVersion.cmake
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rdmad COMPONENT dev)
  set(RDMAD_PACKAGE_COMPONENTS daemon dev)
else()
  set(RDMAD_PACKAGE_COMPONENTS daemon)
endif()

# --- CPack -------------------------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rdmad)
set(CPACK_PACKAGE_VENDOR "rdmad")
set(CPACK_PACKAGE_CONTACT "rdmad maintainers <rdmad@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "per-node RDMA daemon for GPU servers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL ${RDMAD_PACKAGE_COMPONENTS})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME rdmad)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_DAEMON_DESCRIPTION
    "rdmad manages RDMA queue pairs, runs DCQCN congestion control, balances flows across\n NICs, serves memory registrations to local applications and exports Prometheus metrics.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME rdmad-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "Client library, headers, pkg-config and CMake files for rdmad.")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "rdmad (= ${PROJECT_VERSION})")
# /etc/rdmad/rdmad.toml is a conffile: upgrades keep local edits (dpkg asks).
configure_file(${PROJECT_SOURCE_DIR}/deploy/debian/conffiles.in ${RDMAD_DEPLOY_OUT}/debian/conffiles @ONLY)
foreach(script postinst prerm postrm)
  configure_file(${PROJECT_SOURCE_DIR}/deploy/debian/${script} ${RDMAD_DEPLOY_OUT}/debian/${script}
                 FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                  WORLD_READ WORLD_EXECUTE COPYONLY)
endforeach()
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
    ${RDMAD_DEPLOY_OUT}/debian/conffiles ${RDMAD_DEPLOY_OUT}/debian/postinst
    ${RDMAD_DEPLOY_OUT}/debian/prerm ${RDMAD_DEPLOY_OUT}/debian/postrm)
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
