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
set(RDMAD_ADMIN_SOCKET_PATH /run/rdmad-admin/admin.sock)  # config::default_admin_socket_path of the above
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
install(TARGETS rdmad rdmad-supervise RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR} COMPONENT daemon)
if(TARGET rdmactl)
  install(TARGETS rdmactl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT daemon)
endif()

# rdmad.service names the prefix (ExecStart=) and the configuration file: it is generated at install
# time, from the prefix in force then, straight into its destination.
configure_file(${PROJECT_SOURCE_DIR}/deploy/systemd/rdmad.socket.in ${RDMAD_DEPLOY_OUT}/install/rdmad.socket @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/deploy/systemd/rdmad-admin.socket.in ${RDMAD_DEPLOY_OUT}/install/rdmad-admin.socket
               @ONLY)
install(FILES ${RDMAD_DEPLOY_OUT}/install/rdmad.socket ${RDMAD_DEPLOY_OUT}/install/rdmad-admin.socket
        DESTINATION ${RDMAD_SYSTEMD_UNITDIR} COMPONENT daemon)
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

# The maintainer named in the packages and in their Debian changelog (set before either uses it).
set(RDMAD_PACKAGE_CONTACT "rdmad maintainers <maintainers@rdmad.dev>" CACHE STRING
    "Maintainer of the Debian packages (name <address>)")

# The default configuration and the man page come from the daemon itself, so they always match
# the binary that is packaged.
set(RDMAD_PAGES rdmad.8.gz rdmad-supervise.8.gz rdmactl.1.gz rdmad.toml.5.gz librdmad.3.gz)
list(TRANSFORM RDMAD_PAGES PREPEND ${RDMAD_DEPLOY_OUT}/ OUTPUT_VARIABLE RDMAD_PAGE_FILES)
add_custom_command(
  OUTPUT ${RDMAD_DEPLOY_OUT}/rdmad.toml ${RDMAD_PAGE_FILES} ${RDMAD_DEPLOY_OUT}/changelog.gz
  COMMAND ${CMAKE_COMMAND} -DRDMAD=$<TARGET_FILE:rdmad> -DRDMACTL=$<TARGET_FILE:rdmactl>
          -DSUPERVISE=$<TARGET_FILE:rdmad-supervise>
          -DOUT_DIR=${RDMAD_DEPLOY_OUT} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DCONFIG_FILE=${RDMAD_CONFIG_FILE} -DSOCKET_PATH=${RDMAD_SOCKET_PATH}
          -DADMIN_SOCKET_PATH=${RDMAD_ADMIN_SOCKET_PATH}
          -DPACKAGE_VERSION=${PROJECT_VERSION} -DPACKAGE_CONTACT=${RDMAD_PACKAGE_CONTACT}
          -P ${PROJECT_SOURCE_DIR}/deploy/debian/generate_docs.cmake
  DEPENDS rdmad rdmactl rdmad-supervise ${PROJECT_SOURCE_DIR}/deploy/debian/generate_docs.cmake
          ${PROJECT_SOURCE_DIR}/deploy/debian/librdmad.3
  COMMENT "Generating the default rdmad.toml, the man pages and the Debian changelog"
  VERBATIM)
add_custom_target(rdmad_deploy_files ALL DEPENDS ${RDMAD_DEPLOY_OUT}/rdmad.toml ${RDMAD_PAGE_FILES})
install(CODE "${RDMAD_INSTALL_CONFIG_DIR_CODE}
  file(INSTALL \"${RDMAD_DEPLOY_OUT}/rdmad.toml\" DESTINATION \"\${RDMAD_INSTALL_CONFIG_DIR}\")"
  COMPONENT daemon)
install(FILES ${RDMAD_DEPLOY_OUT}/rdmad.8.gz ${RDMAD_DEPLOY_OUT}/rdmad-supervise.8.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man8
  COMPONENT daemon)
install(FILES ${RDMAD_DEPLOY_OUT}/rdmactl.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT daemon)
install(FILES ${RDMAD_DEPLOY_OUT}/rdmad.toml.5.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man5 COMPONENT daemon)
install(FILES ${RDMAD_DEPLOY_OUT}/librdmad.3.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man3 COMPONENT dev)
# Every package's copyright and Debian changelog, in its own doc directory.
foreach(pair daemon:rdmad lib:librdmad0 dev:librdmad-dev)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/debian/copyright ${RDMAD_DEPLOY_OUT}/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} COMPONENT ${component})
endforeach()
# librdmad0's empty maintainer scripts stand in for CPack's ldconfig calls (the trigger does it).
install(FILES ${PROJECT_SOURCE_DIR}/deploy/debian/lib/lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME librdmad0 COMPONENT lib)
install(FILES ${PROJECT_SOURCE_DIR}/docs/operations.md ${PROJECT_SOURCE_DIR}/docs/configuration.md
              ${PROJECT_SOURCE_DIR}/docs/kubernetes.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT daemon)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/prometheus ${PROJECT_SOURCE_DIR}/deploy/grafana
                  ${PROJECT_SOURCE_DIR}/deploy/kubernetes
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT daemon
        PATTERN tests EXCLUDE
        # A source-tree tool (it writes kubernetes/prometheus-operator/prometheusrule.yaml, shipped).
        PATTERN make_prometheusrule.py EXCLUDE)

# --- lib and dev components: client/CMakeLists.txt (librdmad.so, headers, rdmad.pc, rdmadConfig.cmake)

# --- CPack -------------------------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rdmad)
set(CPACK_PACKAGE_VENDOR "rdmad")
set(CPACK_PACKAGE_CONTACT "${RDMAD_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL daemon lib dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
# Debug symbols go to rdmad-dbgsym and librdmad0-dbgsym (.ddeb, found by build id under
# /usr/lib/debug/.build-id/) where the build has them (RelWithDebInfo, the default); CPack strips
# the binaries of the packages themselves after it has split the symbols off.
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME rdmad)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_DAEMON_PACKAGE_RECOMMENDS "ibverbs-providers, rdma-core")
set(CPACK_DEBIAN_DAEMON_DESCRIPTION
    "per-node RDMA daemon for GPU servers\nrdmad manages the node's RDMA queue pairs (RoCEv2 and InfiniBand), runs DCQCN\ncongestion control, balances flows across NICs, serves memory registrations to\nlocal applications and exports Prometheus metrics.")
# The client library on its own: an application needs neither the daemon's package nor the
# headers to run (the daemon may be another package version on the node, or a container's host).
set(CPACK_DEBIAN_LIB_PACKAGE_NAME librdmad0)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_LIB_DESCRIPTION
    "client library of the rdmad RDMA node daemon\nlibrdmad registers host and GPU memory with the node's rdmad over its Unix\nsocket and opens flows between nodes.")
# The ldconfig trigger replaces the ldconfig calls CPack would put in postinst and postrm.
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${RDMAD_DEPLOY_OUT}/debian/lib/shlibs ${RDMAD_DEPLOY_OUT}/debian/lib/triggers
    ${PROJECT_SOURCE_DIR}/deploy/debian/lib/postinst ${PROJECT_SOURCE_DIR}/deploy/debian/lib/postrm)
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME librdmad-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "development files of librdmad\nPublic headers (rdmad/rdmad.h, rdmad/rdmad.hpp), pkg-config file and CMake\npackage (find_package(rdmad), target rdmad::rdmad) of the rdmad client library.")
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
