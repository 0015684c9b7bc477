# Install rules and CPack Debian packages (included from the top-level CMakeLists.txt after every
# target is defined).
#
#   cmake --build build --target package  -> rdmad_<ver>_<arch>.deb, librdmad0_<ver>_<arch>.deb,
#                                            librdmad-dev_<ver>_<arch>.deb
#   cmake --install build --component daemon [--prefix P] -> the daemon, its units, config, man page
#
# Components: "daemon" (package rdmad: rdmad, rdmactl, units, config), "lib" (package librdmad0:
# the shared client library) and "dev" (package librdmad-dev: the public headers, the .so link,
# pkg-config and CMake package files; client/CMakeLists.txt installs those two).
#
# Every destination is relative to the install prefix, so `cmake --install --prefix P` writes only
# under P (and DESTDIR). Where systemd and the FHS want fixed places they follow from the prefix
# in force at install time: units, sysusers.d and tmpfiles.d in <prefix>/lib/..., the
# configuration in <prefix>/etc/rdmad, except that the prefix /usr puts it in /etc/rdmad (the rule
# GNUInstallDirs applies to sysconfdir; CPack installs with the prefix /usr).
include(GNUInstallDirs)

set(RDMAD_SOCKET_PATH /run/rdmad/rdmad.sock)
set(RDMAD_SYSTEMD_UNITDIR lib/systemd/system CACHE STRING "Where rdmad's systemd units go, relative to the prefix")
set(RDMAD_SYSUSERS_DIR lib/sysusers.d CACHE STRING "Where rdmad's sysusers.d file goes, relative to the prefix")
set(RDMAD_TMPFILES_DIR lib/tmpfiles.d CACHE STRING "Where rdmad's tmpfiles.d file goes, relative to the prefix")
set(RDMAD_DEPLOY_OUT ${PROJECT_BINARY_DIR}/deploy)
# The configuration file the packaged units and the default config name (the prefix-/usr place).
set(RDMAD_CONFIG_FILE /etc/rdmad/rdmad.toml)

# At install time: the configuration directory for the prefix in force (see above), in
# RDMAD_INSTALL_CONFIG_DIR, without DESTDIR.
set(RDMAD_INSTALL_CONFIG_DIR_CODE "
  if(IS_ABSOLUTE \"${CMAKE_INSTALL_SYSCONFDIR}\")
    set(RDMAD_INSTALL_CONFIG_DIR \"${CMAKE_INSTALL_SYSCONFDIR}/rdmad\")
  elseif(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
    set(RDMAD_INSTALL_CONFIG_DIR /etc/rdmad)
  else()
    set(RDMAD_INSTALL_CONFIG_DIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SYSCONFDIR}/rdmad\")
  endif()")

# --- daemon component ------------------------------------------------------------------------
install(TARGETS rdmad RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR} COMPONENT daemon)
if(TARGET rdmactl)
  install(TARGETS rdmactl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT daemon)
endif()

# rdmad.service names the prefix (ExecStart=) and the configuration file: it is generated at install
# time, from the prefix in force then, straight into its destination.
configure_file(${PROJECT_SOURCE_DIR}/deploy/systemd/rdmad.socket.in ${RDMAD_DEPLOY_OUT}/install/rdmad.socket @ONLY)
install(FILES ${RDMAD_DEPLOY_OUT}/install/rdmad.socket DESTINATION ${RDMAD_SYSTEMD_UNITDIR} COMPONENT daemon)
install(CODE "${RDMAD_INSTALL_CONFIG_DIR_CODE}
  set(RDMAD_SBINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SBINDIR}\")
  set(RDMAD_CONFIG_FILE \"\${RDMAD_INSTALL_CONFIG_DIR}/rdmad.toml\")
  set(unit_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${RDMAD_SYSTEMD_UNITDIR}\")
  message(STATUS \"Installing: \${unit_dir}/rdmad.service\")
  configure_file(\"${PROJECT_SOURCE_DIR}/deploy/systemd/rdmad.service.in\" \"\${unit_dir}/rdmad.service\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${unit_dir}/rdmad.service\")" COMPONENT daemon)
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
install(CODE "${RDMAD_INSTALL_CONFIG_DIR_CODE}
  file(INSTALL \"${RDMAD_DEPLOY_OUT}/rdmad.toml\" DESTINATION \"\${RDMAD_INSTALL_CONFIG_DIR}\")"
  COMPONENT daemon)
install(FILES ${RDMAD_DEPLOY_OUT}/rdmad.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT daemon)
install(FILES ${PROJECT_SOURCE_DIR}/docs/operations.md ${PROJECT_SOURCE_DIR}/docs/configuration.md
              ${PROJECT_SOURCE_DIR}/docs/kubernetes.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT daemon)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/prometheus ${PROJECT_SOURCE_DIR}/deploy/grafana
                  ${PROJECT_SOURCE_DIR}/deploy/kubernetes
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT daemon
        PATTERN tests EXCLUDE)

# --- lib and dev components: client/CMakeLists.txt (librdmad.so, headers, rdmad.pc, rdmadConfig.cmake)

# --- CPack -------------------------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rdmad)
set(CPACK_PACKAGE_VENDOR "rdmad")
set(CPACK_PACKAGE_CONTACT "rdmad maintainers <rdmad@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "per-node RDMA daemon for GPU servers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL daemon lib dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME rdmad)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_DAEMON_PACKAGE_RECOMMENDS "ibverbs-providers, rdma-core")
set(CPACK_DEBIAN_DAEMON_DESCRIPTION
    "rdmad manages RDMA queue pairs, runs DCQCN congestion control, balances flows across\n NICs, serves memory registrations to local applications and exports Prometheus metrics.")
# The client library on its own: an application needs neither the daemon's package nor the
# headers to run (the daemon may be another package version on the node, or a container's host).
set(CPACK_DEBIAN_LIB_PACKAGE_NAME librdmad0)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_LIB_DESCRIPTION
    "client library of the rdmad RDMA node daemon\n librdmad registers host and GPU memory with the node's rdmad over its Unix socket and\n opens flows between nodes.")
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${RDMAD_DEPLOY_OUT}/debian/lib/shlibs ${RDMAD_DEPLOY_OUT}/debian/lib/triggers)
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME librdmad-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "development files of librdmad\n Public headers (rdmad/rdmad.h, rdmad/rdmad.hpp), pkg-config file and CMake package\n (find_package(rdmad), target rdmad::rdmad) of the rdmad client library.")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "librdmad0 (= ${PROJECT_VERSION})")
file(MAKE_DIRECTORY ${RDMAD_DEPLOY_OUT}/debian/lib)
file(WRITE ${RDMAD_DEPLOY_OUT}/debian/lib/shlibs "librdmad 0 librdmad0 (>= ${PROJECT_VERSION})\n")
file(WRITE ${RDMAD_DEPLOY_OUT}/debian/lib/triggers "activate-noawait ldconfig\n")
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
