// fp8-advisor compare: two captures or earlier run folders (a good run and a bad one, or two steps
// of one run) evaluated alike, matched tensor by tensor and ranked by how far their metrics
// diverge (policies/compare.hpp); writes compare.csv, compare.md and compare.html, prints the top of
// the ranking.
#include <algorithm>
#include <iostream>
#include <optional>

#include "cli/options.hpp"
#include "pipeline/run_pipeline.hpp"
#include "cli/version.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "datasets/capture.hpp"
#include "datasets/metrics_table.hpp"
#include "policies/compare.hpp"
#include "reports/compare_html.hpp"
#include "reports/compare_report.hpp"
#include "rundir/output_lock.hpp"
#include "rundir/output_set.hpp"

namespace fp8a::cli {

namespace {

// Matches listed on stdout, in compare.md and in compare.html's ranked table.
constexpr std::size_t kStdoutTop = 10;
constexpr std::size_t kMarkdownTop = 20;
constexpr std::size_t kHtmlTop = 50;

struct Side {
  const char* name;  // "base" or "cand"
  std::string path;
  std::vector<std::string> log_paths;  // --base-training-log / --cand-training-log
  bool run_folder = false;
  std::vector<MetricsRecord> records;
};

// The values of one field over a run folder's rows, in order of first appearance.
template <class Field>
std::vector<std::string> distinct(const std::vector<MetricsRecord>& rows, Field field) {
  std::vector<std::string> out;
  for (const auto& r : rows)
    if (std::find(out.begin(), out.end(), r.*field) == out.end()) out.push_back(r.*field);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// `compare`'s options, parsed and checked.
struct CompareCommand {
  std::vector<std::string> inputs;
  std::vector<std::string> base_logs, cand_logs;
  std::string out_dir;
  EvaluationOptions eval;
  RunConfig config;            // evaluation_config of eval: the recipes and formats asked for
  bool formats_given = false;  // --format given
  bool quiet = false;
};

// Unset: --help was printed. Usage errors name the option.
std::optional<CompareCommand> parse_compare(const Invocation& inv) {
  CompareCommand cmd;
  po::options_description desc("Options");
  desc.add_options()
      ("inputs", po::value(&cmd.inputs)->multitoken(),
       "BASE CAND (positional): each a capture file or directory, as run --capture takes them, or "
       "the --out folder of an earlier run (its metrics.csv is read back)")
      ("out", po::value(&cmd.out_dir)->required(), "output directory (created if missing)");
  add_recipe_options(desc, cmd.eval, "recipes");
  add_backend_options(desc, cmd.eval);
  desc.add_options()
      ("base-training-log", po::value(&cmd.base_logs)->multitoken(),
       "BASE's training log (amax trace CSV or nvdlfw_inspect logs, as run --training-log): "
       "delayed scaling replayed exactly; BASE must be a capture")
      ("cand-training-log", po::value(&cmd.cand_logs)->multitoken(),
       "CAND's training log, likewise")
      ("quiet", "print only the ranked list on stdout");
  po::positional_options_description positional;
  positional.add("inputs", -1);
  po::variables_map vm;
  if (!parse_options(inv, desc, &positional, &vm, "fp8-advisor compare BASE CAND --out DIR [options]", std::cout))
    return std::nullopt;
  if (cmd.inputs.size() != 2)
    throw usage_error("fp8a.usage.218", "fp8-advisor compare: expected two inputs, BASE and CAND; got " +
                                            std::to_string(cmd.inputs.size()));
  check_out_option(cmd.out_dir);
  cmd.config = evaluation_config(cmd.eval);
  cmd.formats_given = !vm["format"].defaulted();
  cmd.quiet = vm.count("quiet") != 0;
  return cmd;
}

// Which side is a run folder (its metrics.csv read back, checked to be one run's set), and
// whether a training log was given for one (a usage error: its metrics.csv holds the replay).
void classify_sides(Side (&sides)[2], const FileSystem& fs) {
  for (Side& s : sides) {
    s.run_folder = is_run_output_folder(s.path, fs);
    if (s.run_folder) check_output_set(s.path, "run");  // not a mixed set of two runs' files
    if (s.run_folder && !s.log_paths.empty())
      throw usage_error("fp8a.usage.219",
                        std::string("fp8-advisor compare: --") + s.name + "-training-log is for a capture; " + s.name +
                            " " + s.path + " is a run folder (its metrics.csv holds the replay)");
  }
}

// Two run folders evaluated in different formats (none given): only the formats both hold can be
// compared; said on stderr, or refused when they share none.
void check_shared_formats(const Side (&sides)[2]) {
  if (!sides[0].run_folder || !sides[1].run_folder || sides[0].records.empty() || sides[1].records.empty()) return;
  const auto f0 = distinct(sides[0].records, &MetricsRecord::format);
  const auto f1 = distinct(sides[1].records, &MetricsRecord::format);
  std::vector<std::string> shared;
  for (const std::string& f : f0)
    if (std::find(f1.begin(), f1.end(), f) != f1.end()) shared.push_back(f);
  if (shared.empty())
    throw input_error("fp8a.compare.102", "compare: base " + sides[0].path + " was evaluated in format " + join(f0) +
                                              " and cand " + sides[1].path + " in " + join(f1) +
                                              ": no format to compare; run both in one (--format)");
  if (shared.size() != f0.size() || shared.size() != f1.size())
    std::cerr << "fp8-advisor: compare: base was evaluated in format " << terminal_text(join(f0)) << ", cand in "
              << terminal_text(join(f1)) << ": comparing " << terminal_text(join(shared)) << " only\n";
}

// The recipes and formats both sides are compared under: those asked for, else the run folder's
// (its formats auto's when every FP8 recipe is in its kind's default format only).
RunConfig compared_config(const CompareCommand& cmd, const Side* folder) {
  RunConfig config = cmd.config;
  if (folder == nullptr) return config;
  if (!cmd.eval.recipes_given) config.recipes = parse_recipe_list(join(distinct(folder->records, &MetricsRecord::recipe)));
  if (cmd.formats_given) return config;
  const bool by_kind = std::all_of(config.recipes.begin(), config.recipes.end(), [&](const Recipe& recipe) {
    return !is_fp8(recipe.kind) ||
           std::all_of(folder->records.begin(), folder->records.end(), [&](const MetricsRecord& r) {
             return r.recipe != recipe.spec() ||
                    r.format == training_format_name(recipe_kind_traits(recipe.kind).default_format);
           });
  });
  if (!by_kind) {
    config.formats_by_kind = false;
    config.formats = parse_training_format_list(join(distinct(folder->records, &MetricsRecord::format)));
  }
  return config;
}

// A run folder's rows under recipes and formats the comparison does not evaluate, left out.
void keep_compared_rows(Side (&sides)[2], const RunConfig& config, const std::vector<std::string>& specs) {
  for (Side& s : sides)
    std::erase_if(s.records, [&](const MetricsRecord& r) {
      const auto spec = std::find(specs.begin(), specs.end(), r.recipe);
      if (spec == specs.end()) return true;
      const Recipe& recipe = config.recipes[static_cast<std::size_t>(spec - specs.begin())];
      return std::none_of(config.formats.begin(), config.formats.end(), [&](TrainingFormat f) {
        return r.format == training_format_name(f) && evaluates(config, recipe, f);
      });
    });
}

// Each capture side evaluated (the per-tensor metrics alone), the backend started for the first.
void evaluate_captures(Side (&sides)[2], const TrainingLog (&logs)[2], const CompareCommand& cmd,
                       const RunConfig& config, const FileSystem& fs, CompareInfo& info) {
  std::optional<EvaluationBackend> evaluator;
  for (int i = 0; i < 2; ++i) {
    Side& s = sides[i];
    if (s.run_folder) continue;
    if (!evaluator) {
      evaluator = start_backend(cmd.eval);
      info.backend = evaluator->backend->name();
      info.device = evaluator->backend->device();
    }
    const CaptureSet captures = load_captures({s.path}, fs, capture_options(cmd.eval.npy_dtype_text));
    RunRequest request;  // the evaluation alone: no GEMM error, no recommendation
    request.config = config;
    request.gemms = false;
    if (!s.log_paths.empty()) request.config.training_log = &logs[i];
    s.records = metrics_records(run_pipeline(request, captures, *evaluator->backend, nullptr).rows);
  }
}

}  // namespace

int command_compare(const Invocation& inv) {
  const std::optional<CompareCommand> parsed = parse_compare(inv);
  if (!parsed) return kExitOk;
  const CompareCommand& cmd = *parsed;
  const OutputLock out_lock(cmd.out_dir, join_command_line(inv.command_line));  // one run per --out
  DiskFileSystem fs;
  Side sides[2] = {{"base", cmd.inputs[0], cmd.base_logs, false, {}}, {"cand", cmd.inputs[1], cmd.cand_logs, false, {}}};
  classify_sides(sides, fs);
  // Every log is read before anything is evaluated, so that a bad one fails fast.
  // The amaxes replay delayed scaling; the other statistics go as they are read.
  TrainingLog logs[2];
  DropLoggedSteps drop;
  for (int i = 0; i < 2; ++i)
    if (!sides[i].log_paths.empty()) logs[i] = load_training_log(sides[i].log_paths, fs, &drop);
  for (Side& s : sides)
    if (s.run_folder) s.records = read_metrics_csv(s.path + "/metrics.csv", fs);
  if (!cmd.formats_given) check_shared_formats(sides);
  const auto found = std::find_if(sides, sides + 2, [](const Side& s) { return s.run_folder && !s.records.empty(); });
  const Side* folder = found != sides + 2 ? found : nullptr;
  const RunConfig config = compared_config(cmd, folder);
  std::vector<std::string> specs;
  for (const Recipe& r : config.recipes) specs.push_back(r.spec());
  const std::string formats = format_option(config);
  keep_compared_rows(sides, config, specs);
  CompareInfo info;
  info.version = FP8A_VERSION;
  info.git_revision = FP8A_GIT_REVISION;
  info.command_line = inv.command_line;
  evaluate_captures(sides, logs, cmd, config, fs, info);
  for (const Side& s : sides)
    if (s.records.empty())
      throw input_error("fp8a.compare.101", std::string("compare: ") + s.name + " " + s.path +
                                                ": no evaluated tensor under " +
                                                (folder != nullptr && (!cmd.eval.recipes_given || !cmd.formats_given)
                                                     ? std::string("the recipes and formats of ") + folder->name +
                                                           "'s run folder: "
                                                     : std::string()) +
                                                "--recipes " + join(specs) + " --format " + formats);
  const CompareResult result = compare_records(sides[0].records, sides[1].records);
  if (result.matches.empty())
    throw input_error("fp8a.compare.102",
                      "compare: nothing matched: no (layer, tensor, recipe, format, orientation) of "
                      "base " + sides[0].path + " is in cand " + sides[1].path);

  info.base_path = sides[0].path;
  info.cand_path = sides[1].path;
  info.base_kind = sides[0].run_folder ? "run folder" : "capture";
  info.cand_kind = sides[1].run_folder ? "run folder" : "capture";
  info.base_log_files = logs[0].files;
  info.cand_log_files = logs[1].files;
  const std::string wrote = write_artifacts(
      cmd.out_dir, "compare", {render_compare_csv(result), render_compare_md(result, info, kMarkdownTop),
                               render_compare_html(result, info, kHtmlTop)},
      inv.command_line);
  const std::string list = render_compare_list(result, kStdoutTop);
  if (cmd.quiet) {
    std::cout << list;
    return kExitOk;
  }
  std::cout << "fp8-advisor " << FP8A_VERSION << " compare: base " << info.base_path << " (" << info.base_kind << ", "
            << result.base_rows << " rows), cand " << info.cand_path << " (" << info.cand_kind << ", "
            << result.cand_rows << " rows)\n"
            << result.matches.size() << " matches (" << result.same_step_matches
            << " at the same step), unmatched: " << result.base_unmatched_rows << " base rows, "
            << result.cand_unmatched_rows << " cand rows\n\n"
            << "largest divergences (score: METRICS.md \"Divergence score\"):\n"
            << list << "\n" << terminal_text(wrote) << "\n";
  return kExitOk;
}

}  // namespace fp8a::cli
