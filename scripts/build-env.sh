# Sourced by scripts/setup.sh and scripts/test.sh: nvcc on PATH (cuda-env.sh), and `launcher`, the
# CMake arguments that compile through ccache where it works (scripts/install-deps.sh installs it).
# Both scripts configure build/ with the same compile flags (warnings as errors, Release), so what
# setup.sh compiled test.sh does not compile again, and build-cpu/ takes from the cache every
# object it shares with build/. Relative to the checkout (CCACHE_BASEDIR), so a clone elsewhere
# hits too. CCACHE_DISABLE=1 turns it off; it is left out where it cannot compile a one-line file
# (e.g. its cache cannot be written).
source "$(dirname "${BASH_SOURCE[0]}")/cuda-env.sh"
fp8a_ccache_works() {
  local tmp rc
  command -v ccache >/dev/null || return 1
  tmp=$(mktemp -d)
  echo 'int fp8a_probe;' > "$tmp/probe.cpp"
  ccache c++ -c "$tmp/probe.cpp" -o "$tmp/probe.o" >/dev/null 2>&1 && rc=0 || rc=1
  rm -rf "$tmp"
  return $rc
}
launcher=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER=)  # also clears an earlier run's
if fp8a_ccache_works; then
  export CCACHE_BASEDIR=$PWD
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# The flags both scripts give build/.
build_flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8A_WERROR=ON -DFP8A_CUDA_EMULATION=OFF
             -DFP8A_CONSUMER_TESTS=OFF "${launcher[@]}")
# Seconds since the script started, for its "== ... (N s)" lines.
fp8a_elapsed() { echo "$(( $(date +%s) - fp8a_start )) s"; }
fp8a_start=$(date +%s)
