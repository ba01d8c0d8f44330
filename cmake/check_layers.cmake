# The layers of src/lucid, lowest first, and the lower layers each may include. A header or source
# of a layer that includes "lucid/<folder>/..." of a folder not listed for it fails the build (the
# layer_check target, which lucid_core depends on) and the unit test layers.include_rule.
#   cmake -DSOURCE_DIR=<src/lucid> [-DSTAMP=<file written when the rule holds>] -P check_layers.cmake
# Files directly under SOURCE_DIR (the installed API, lucid.h/lucid.cpp) stand above every layer.
cmake_minimum_required(VERSION 3.20)
set(LAYERS util structures config metrics model loss optim data dist replay plot report weights feed inference
    evaluate train deploy predict cli)
set(MAY_INCLUDE_util "")
set(MAY_INCLUDE_structures util)
set(MAY_INCLUDE_config util)
set(MAY_INCLUDE_metrics util structures)
set(MAY_INCLUDE_model util config)
set(MAY_INCLUDE_loss util config model)  # the loss reads the head's layout from the model
set(MAY_INCLUDE_optim util model)
set(MAY_INCLUDE_data util structures config metrics loss)  # the loader builds the loss's targets
set(MAY_INCLUDE_dist util model loss)  # the seams act in the BatchNorm forward and the loss reduction
set(MAY_INCLUDE_replay util model loss optim)
set(MAY_INCLUDE_plot util structures data metrics)
set(MAY_INCLUDE_report util structures data metrics plot)
# The model files (checkpoints, model_source, the run record's model values); the default dataset and
# loader options resolve a record's data= and overlap_mask=.
set(MAY_INCLUDE_weights util config model optim data)
set(MAY_INCLUDE_feed util data loss)  # prepared splits into the loader, the fit's BatchSource
set(MAY_INCLUDE_inference util structures model)  # the Network interface, the eager network, postprocess
set(MAY_INCLUDE_evaluate util metrics model loss data plot feed inference)
set(MAY_INCLUDE_train util config model loss optim data dist replay plot report weights feed evaluate)
set(MAY_INCLUDE_deploy util model weights inference)  # exported files' networks, load_network
set(MAY_INCLUDE_predict util structures data model inference)
set(MAY_INCLUDE_cli ${LAYERS})

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layers.cmake: give -DSOURCE_DIR=<the src/lucid folder>")
endif()
get_filename_component(SOURCE_DIR "${SOURCE_DIR}" ABSOLUTE)
file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/*.h" "${SOURCE_DIR}/*.cpp" "${SOURCE_DIR}/*.cu"
     "${SOURCE_DIR}/*.cuh")
list(SORT files)
set(violations "")
foreach(rel IN LISTS files)
  if(NOT rel MATCHES "^([a-z_]+)/")
    continue()
  endif()
  set(layer "${CMAKE_MATCH_1}")
  if(NOT layer IN_LIST LAYERS)
    list(APPEND violations "${rel}: the folder '${layer}' has no place in cmake/check_layers.cmake")
    continue()
  endif()
  file(STRINGS "${SOURCE_DIR}/${rel}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"lucid/[a-z_]+/")
  foreach(line IN LISTS includes)
    string(REGEX MATCH "\"lucid/([a-z_]+)/[^\"]*\"" inc "${line}")
    set(target "${CMAKE_MATCH_1}")
    if(NOT target STREQUAL layer AND NOT target IN_LIST MAY_INCLUDE_${layer})
      string(REPLACE ";" " " allowed "${MAY_INCLUDE_${layer}}")
      list(APPEND violations "${rel}: includes ${inc}, above its layer (${layer} may include: ${allowed})")
    endif()
  endforeach()
endforeach()
if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "includes that run up the layers of src/lucid (cmake/check_layers.cmake):\n  ${text}")
endif()
if(STAMP)
  file(WRITE "${STAMP}" "the layers hold\n")
endif()
