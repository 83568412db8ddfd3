# install_conf.cmake - run by `cmake --install` (and by cpack) for the server
# and agent components: writes the component's configuration file and
# systemd unit with the paths of the prefix installed to, which is known
# only now (`cmake --install build --prefix P`).
#   prefix /usr (the Debian packages): /etc/tessera, /var/lib/tessera-*,
#     /usr/lib/systemd/system
#   any other prefix P: P/etc/tessera, P/var/lib/tessera-*, P/lib/systemd/system
# An existing configuration file is never overwritten: the new one is
# written beside it as NAME.new.
# Set by packaging/CMakeLists.txt: TS_COMPONENT, TS_PACKAGING_DIR, TS_BINDIR,
# TS_STAGE_DIR (a folder of the build for the files written).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(TS_ETC /etc/tessera)
  set(TS_VAR /var)
else()
  set(TS_ETC ${CMAKE_INSTALL_PREFIX}/etc/tessera)
  set(TS_VAR ${CMAKE_INSTALL_PREFIX}/var)
endif()
set(TS_BIN ${CMAKE_INSTALL_PREFIX}/${TS_BINDIR})
set(TS_LIB ${CMAKE_INSTALL_PREFIX}/lib/tessera)
set(TS_UNITDIR ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
if(TS_COMPONENT STREQUAL "server")
  set(TS_STATE tessera)
else()
  set(TS_STATE tessera-agent)
endif()
set(TS_DATA_DIR ${TS_VAR}/lib/${TS_STATE})
# jobs' checkpoints: written by the agents, in their data folder
set(TS_CHECKPOINT_ROOT ${TS_VAR}/lib/tessera-agent/checkpoints)
set(TS_DOCDIR ${CMAKE_INSTALL_PREFIX}/share/doc/tessera-${TS_COMPONENT})

set(stage ${TS_STAGE_DIR}/${TS_COMPONENT})
file(MAKE_DIRECTORY ${stage})
configure_file(${TS_PACKAGING_DIR}/tessera-${TS_COMPONENT}.service.in
               ${stage}/tessera-${TS_COMPONENT}.service @ONLY)
configure_file(${TS_PACKAGING_DIR}/${TS_COMPONENT}.conf.in ${stage}/${TS_COMPONENT}.conf @ONLY)

file(INSTALL ${stage}/tessera-${TS_COMPONENT}.service DESTINATION ${TS_UNITDIR}
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
# server.conf may hold a secret (admin-token): readable by its owner only;
# the Debian package gives it to root:tessera, mode 0640
set(conf ${TS_ETC}/${TS_COMPONENT}.conf)
if(EXISTS "$ENV{DESTDIR}${conf}")
  file(RENAME ${stage}/${TS_COMPONENT}.conf ${stage}/${TS_COMPONENT}.conf.new)
  message(STATUS "Keeping: $ENV{DESTDIR}${conf} (the new one is ${TS_COMPONENT}.conf.new)")
  set(conf_file ${stage}/${TS_COMPONENT}.conf.new)
else()
  set(conf_file ${stage}/${TS_COMPONENT}.conf)
endif()
file(INSTALL ${conf_file} DESTINATION ${TS_ETC} FILE_PERMISSIONS OWNER_READ OWNER_WRITE)
