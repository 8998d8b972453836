# CTest: the C++ package as a user gets it. Installs this build into a fresh prefix
# (cmake --install), builds examples/cpp (its own project: find_package(vit CONFIG REQUIRED))
# against it, then runs it: trains a tiny ViT on the digits through vit::train_model with an
# epoch callback, classifies an image with the checkpoint it wrote (the same top class as `vit
# predict`), and checks that its logits on the image's pixels equal `vit predict --tensor`'s.
# -DBUILD_DIR -DSOURCE_DIR -DVIT (the vit executable) -DGENERATOR
set(work ${BUILD_DIR}/package-test)
file(REMOVE_RECURSE ${work})
file(MAKE_DIRECTORY ${work})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${work}/prefix)
foreach(f include/vit/vit.h include/vit/error.h)
  if(NOT EXISTS ${work}/prefix/${f})
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()
file(GLOB_RECURSE config ${work}/prefix/*/vitConfig.cmake)
file(GLOB_RECURSE version_file ${work}/prefix/*/vitConfigVersion.cmake)
if(NOT config OR NOT version_file)
  message(FATAL_ERROR "no vitConfig.cmake / vitConfigVersion.cmake under ${work}/prefix")
endif()

run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/cpp -B ${work}/example -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${work}/prefix
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${work}/example)

# Train through the library (1 epoch of the digits), with the callback.
run(${work}/example/classify --train ${SOURCE_DIR}/data/mnist ${work}/run)
if(NOT last_output MATCHES "callback: epoch 1/1 test accuracy" OR NOT last_output MATCHES "trained 1 epoch")
  message(FATAL_ERROR "the epoch callback or the result is missing:\n${last_output}")
endif()

# Classify an image with the trained checkpoint, saving its preprocessed pixels; compare the
# top class with `vit predict`'s on the image.
run(${work}/example/classify ${work}/run/last.safetensors --save-input ${work}
    ${SOURCE_DIR}/tests/golden/preprocess/coffee.png)
string(REGEX MATCH "coffee.png:  ([^ ]+) ([0-9.]+)% \\(logit ([-0-9.e]+)\\)" m "${last_output}")
if(NOT m)
  message(FATAL_ERROR "no prediction in:\n${last_output}")
endif()
set(label ${CMAKE_MATCH_1})
set(percent ${CMAKE_MATCH_2})
run(${VIT} predict --checkpoint ${work}/run/last.safetensors ${SOURCE_DIR}/tests/golden/preprocess/coffee.png --top-k 1)
if(NOT last_output MATCHES " ${percent}%  ${label}")
  message(FATAL_ERROR "vit predict says\n${last_output}\nthe package said ${label} ${percent}%")
endif()

# The same logits, bit for bit, as `vit predict --tensor` on the pixels the package produced.
run(${work}/example/classify ${work}/run/last.safetensors ${work}/coffee.png.npy)
run(${VIT} predict --checkpoint ${work}/run/last.safetensors --tensor ${work}/coffee.png.npy --out ${work}/ref.npy)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${work}/coffee.png.logits.npy ${work}/ref.npy
                RESULT_VARIABLE differ)
if(differ)
  message(FATAL_ERROR "the package's logits differ from vit predict --tensor's")
endif()
message(STATUS "package OK: ${label} ${percent}% from both; identical logits")
