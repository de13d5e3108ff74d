# The metric kernels as nvcc compiles them keep the CPU's fp32 arithmetic (label cuda-ptx; the
# toolkit only, no GPU). Run as
#   cmake -DNVCC=<nvcc> -DSOURCE_DIR=<repo> -DWORK_DIR=<dir> -DARCHITECTURES=<CMAKE_CUDA_ARCHITECTURES>
#         [-DHOST_COMPILER=<c++>] -P check_ptx.cmake
# For every architecture of the build it compiles each kernel source to PTX, as the build does
# (-O3, nvcc's default --fmad=true), and checks the PTX:
#   - no fp32 fused multiply-add (fma/mad .f32) and no fp32 multiply without an explicit rounding
#     mode: ptxas may fuse a plain mul.f32 with a following add into an FFMA (one rounding where the
#     CPU rounds twice), an explicitly rounded mul.rn.f32 never (PTX ISA, "mul"); fp32 products
#     such as x * scale decide the FP8 code, so a contraction would change counts, not only sums;
#   - no flush-to-zero (.ftz) and no approximate instruction (.approx): subnormal inputs, scales
#     and FP8 subnormals must behave as IEEE 754 says, as on the CPU;
#   - from sm_89 the FP8 conversions are the hardware's cvt.rn.satfinite (E4M3 and E5M2 pairs), and
#     below sm_89 there is no FP8 cvt (the software conversion, cuda/element_quant.hpp).
# The float64 sums may be contracted (fma.rn.f64): METRICS.md bounds their rounding either way.
cmake_minimum_required(VERSION 3.25)

foreach(_var NVCC SOURCE_DIR WORK_DIR ARCHITECTURES)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "check_ptx.cmake: -D${_var}=... is required")
  endif()
endforeach()

set(_kernels stats.cu metrics_per_tensor.cu metrics_blocked.cu)
set(_host_compiler)
if(DEFINED HOST_COMPILER AND NOT HOST_COMPILER STREQUAL "")
  set(_host_compiler -ccbin "${HOST_COMPILER}")
endif()
file(MAKE_DIRECTORY "${WORK_DIR}")

set(_failures 0)
macro(fail what)
  message(SEND_ERROR "${what}")
  math(EXPR _failures "${_failures} + 1")
endmacro()

foreach(_arch IN LISTS ARCHITECTURES)
  string(REGEX MATCH "^[0-9]+" _sm "${_arch}")
  if(NOT _sm)
    fail("architecture '${_arch}': no number")
    continue()
  endif()
  foreach(_src IN LISTS _kernels)
    set(_ptx "${WORK_DIR}/${_src}.sm${_sm}.ptx")
    execute_process(
      COMMAND "${NVCC}" ${_host_compiler} -std=c++20 -O3 -DNDEBUG -I${SOURCE_DIR}
              -arch=compute_${_sm} -ptx "${SOURCE_DIR}/cuda/${_src}" -o "${_ptx}"
      RESULT_VARIABLE _rc ERROR_VARIABLE _err OUTPUT_VARIABLE _out)
    if(NOT _rc EQUAL 0)
      fail("cuda/${_src} for compute_${_sm}: nvcc failed (${_rc}): ${_err}")
      continue()
    endif()
    file(READ "${_ptx}" _text)
    set(_failures_before ${_failures})
    set(_what "cuda/${_src} (compute_${_sm})")
    string(REGEX MATCHALL "[\t ](fma|mad)(\\.[a-z]+)*\\.f32[\t ]" _fused "${_text}")
    string(REGEX MATCHALL "[\t ]mul(\\.ftz)?(\\.sat)?\\.f32[\t ]" _plain_mul "${_text}")
    string(REGEX MATCHALL "\\.ftz[.\t ]" _ftz "${_text}")
    string(REGEX MATCHALL "\\.approx[.\t ]" _approx "${_text}")
    string(REGEX MATCHALL "mul\\.rn\\.f32" _rn_mul "${_text}")
    string(REGEX MATCHALL "cvt\\.rn\\.satfinite\\.e4m3x2\\.f32" _cvt_e4m3 "${_text}")
    string(REGEX MATCHALL "cvt\\.rn\\.satfinite\\.e5m2x2\\.f32" _cvt_e5m2 "${_text}")
    string(REGEX MATCHALL "cvt[.a-z0-9]*\\.e[45]m[32]" _cvt_fp8_any "${_text}")
    list(LENGTH _fused _n_fused)
    list(LENGTH _plain_mul _n_plain_mul)
    list(LENGTH _ftz _n_ftz)
    list(LENGTH _approx _n_approx)
    list(LENGTH _rn_mul _n_rn_mul)
    list(LENGTH _cvt_e4m3 _n_e4m3)
    list(LENGTH _cvt_e5m2 _n_e5m2)
    list(LENGTH _cvt_fp8_any _n_fp8_any)
    if(_n_fused GREATER 0)
      list(GET _fused 0 _first)
      string(STRIP "${_first}" _first)
      fail("${_what}: ${_n_fused} fp32 fused multiply-adds (${_first} ...)")
    endif()
    if(_n_plain_mul GREATER 0)
      fail("${_what}: ${_n_plain_mul} fp32 multiplies without .rn (ptxas may fuse them); use mul_rn")
    endif()
    if(_n_ftz GREATER 0)
      fail("${_what}: ${_n_ftz} flush-to-zero instructions")
    endif()
    if(_n_approx GREATER 0)
      fail("${_what}: ${_n_approx} approximate instructions")
    endif()
    set(_fp8_expected "no FP8 cvt (software conversion)")
    if(_src STREQUAL "stats.cu")
      set(_fp8_expected "no FP8 conversion (statistics only)")
      if(_n_fp8_any GREATER 0)
        fail("${_what}: ${_n_fp8_any} FP8 conversions in the statistics kernels")
      endif()
    elseif(_sm GREATER_EQUAL 89)
      set(_fp8_expected "hardware cvt.rn.satfinite: ${_n_e4m3} E4M3 and ${_n_e5m2} E5M2 pairs")
      if(_n_e4m3 EQUAL 0 OR _n_e5m2 EQUAL 0)
        fail("${_what}: the FP8 conversions are not the hardware's cvt.rn.satfinite.e4m3x2/e5m2x2.f32 "
             "(${_n_e4m3} and ${_n_e5m2} found)")
      endif()
    elseif(_n_fp8_any GREATER 0)
      fail("${_what}: ${_n_fp8_any} FP8 cvt instructions below sm_89, which has none")
    endif()
    if(_failures EQUAL _failures_before)
      message(STATUS "${_what}: ${_n_rn_mul} mul.rn.f32, no fp32 FMA, no ftz/approx; ${_fp8_expected}")
    endif()
  endforeach()
endforeach()

if(_failures GREATER 0)
  message(FATAL_ERROR "check_ptx: ${_failures} failure(s)")
endif()
