// The options and setup that every command evaluating captures shares (run, compare): the recipe
// and format lists, the capture reading options, the worker threads and the backend.
#pragma once

#include <tbb/global_control.h>

#include <memory>
#include <string>

#include "cli/backend_registry.hpp"
#include "cli/options.hpp"
#include "engine/run.hpp"

namespace fp8a::cli {

// The values of the shared options, as parsed (validated by the functions below).
struct EvaluationOptions {
  std::string recipes_text;
  std::string format_text;
  std::string reduction_text;
  std::string npy_dtype_text;
  std::string device_text;
  int threads = 0;
};

// --recipes, --format, --amax-reduction, --npy-dtype (in this order, for --help).
void add_recipe_options(po::options_description& desc, EvaluationOptions* values);
// --threads, --device.
void add_backend_options(po::options_description& desc, EvaluationOptions* values);

// The recipes, formats and amax reduction of a run. Usage errors fp8a.usage.201 (recipes), 202
// (formats), 208 (--amax-reduction).
RunConfig evaluation_config(const EvaluationOptions& values);

// What evaluates: the thread limit (kept alive with the backend), the backends this build has, the
// --device choice and the backend. Usage error fp8a.usage.206 for a bad or unusable --device.
struct EvaluationBackend {
  std::unique_ptr<tbb::global_control> thread_limit;
  BuildBackends backends;
  DeviceChoice device_choice = DeviceChoice::kAuto;
  std::unique_ptr<Backend> backend;
};
EvaluationBackend start_backend(const EvaluationOptions& values);

}  // namespace fp8a::cli
