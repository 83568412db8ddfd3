# The layers the build enforces (issue 16). Every include is written from
# the repository root ("server/store/store.h"), and no target sees the root:
# each sees one layer root, ${CMAKE_BINARY_DIR}/layers/NAME, made here at
# configure time, which holds symbolic links to just the folders that layer
# may include. An include of another folder finds no file and the build
# fails; tests/unit/layers_enforced.sh (unit/layers_enforced) proves it.
# libpq's include folder reaches ts_store alone (linked PRIVATE there).
# <microhttpd.h> sits in /usr/include, which every target sees: so every
# layer root but http's holds a microhttpd.h that stops the build with a
# message, found before the system's.
#
#   layer    may include                          targets
#   api      api/                                 ts_api, ts_client, ts_cli, tessera
#   sched    api/ server/sched/                   ts_sched, tessera-sim
#   store    api/ server/sched/ server/store/     ts_store
#   http     api/ server/http/                    ts_http
#   server   api/ server/                         ts_server, tessera-server
#   agent    api/ agent/                          ts_agent, tessera-agent (agent/daemon/)
#   shim     api/ agent/abi/ agent/ledger/ agent/shim/     the interposer, its swap engine
#   simgpu   api/ agent/abi/ agent/ledger/ agent/simgpu/   the simulated driver, its tool
#   gpuload  api/ agent/abi/ agent/gpuload/      ts_gpuload, tessera-gpuload
#   ledger   agent/ledger/                        ts_ledger
#
# Tests are not layered: they see the whole tree (tests/CMakeLists.txt).
set(TS_LAYERS_DIR ${CMAKE_BINARY_DIR}/layers)
# links, not followed: the source folders they point to stay
file(REMOVE_RECURSE ${TS_LAYERS_DIR})

# ts_layer_define(NAME FOLDER...): the layer root NAME, with a link to each
# FOLDER of the source tree at its own path.
function(ts_layer_define name)
  foreach(folder ${ARGN})
    if(NOT IS_DIRECTORY ${CMAKE_SOURCE_DIR}/${folder})
      message(FATAL_ERROR "layer ${name}: no folder ${folder}")
    endif()
    get_filename_component(parent ${TS_LAYERS_DIR}/${name}/${folder} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${folder} ${TS_LAYERS_DIR}/${name}/${folder} SYMBOLIC)
  endforeach()
endfunction()

# ts_layer(TARGET NAME): TARGET's sources see the layer NAME and nothing else
# of the tree.
function(ts_layer target name)
  if(NOT IS_DIRECTORY ${TS_LAYERS_DIR}/${name})
    message(FATAL_ERROR "${target}: no layer ${name}")
  endif()
  target_include_directories(${target} PRIVATE ${TS_LAYERS_DIR}/${name})
endfunction()

# ts_layer_refuse(HEADER MESSAGE LAYER...): HEADER, included in a LAYER,
# stops the build with MESSAGE.
function(ts_layer_refuse header message)
  foreach(name ${ARGN})
    file(WRITE ${TS_LAYERS_DIR}/${name}/${header}
         "/* made by cmake/layers.cmake: this layer may not include ${header} */\n"
         "#error \"${message}\"\n")
  endforeach()
endfunction()

ts_layer_define(api api)
ts_layer_define(sched api server/sched)
ts_layer_define(store api server/sched server/store)
ts_layer_define(http api server/http)
ts_layer_define(server api server)
ts_layer_define(agent api agent)
ts_layer_define(shim api agent/abi agent/ledger agent/shim)
ts_layer_define(simgpu api agent/abi agent/ledger agent/simgpu)
ts_layer_define(gpuload api agent/abi agent/gpuload)
ts_layer_define(ledger agent/ledger)
ts_layer_refuse(microhttpd.h "<microhttpd.h> is server/http/'s alone (cmake/layers.cmake)"
                api sched store server agent shim simgpu gpuload ledger)
