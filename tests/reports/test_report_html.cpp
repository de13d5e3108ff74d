// report.html from hand-built rows, golden-free: the page's structure (sections, the recommended
// recipe, reasons, layer order, links), every chart with its axis titles and legend, nothing that
// refers outside the file, well-formed markup. check_html.py runs a real parser on a real run.
#include <doctest/doctest.h>

#include <regex>
#include <set>

#include "reports/html_page.hpp"
#include "reports/markup_check.hpp"
#include "reports/report_html.hpp"
#include "support/rows.hpp"
#include "support/run_info.hpp"

using namespace fp8a;
using fp8a::test::chart_error;
using fp8a::test::count_of;
using fp8a::test::markup_error;
using fp8a::test::page_error;
using fp8a::test::svgs_of;

namespace {

RunInfo fixed_info() {
  RunInfo info = testing::base_run_info(6);
  info.warnings = {"caps/step_10.safetensors: tensor 'x.weight' holds 1 NaN and 0 Inf elements <&>"};
  return info;
}

// Two layers whose names sort wrongly as text (layers.10 before layers.2), a current and an mxfp8
// candidate, mxfp8 not fitting layers.10's gradient (a hatched cell) and with a columnwise copy.
std::vector<EvaluationRow> fixed_rows() {
  using testing::make_row;
  std::vector<EvaluationRow> rows;
  for (const char* layer : {"layers.10.fc1", "layers.2.fc1"})
    for (Role role : {Role::kActivation, Role::kWeight, Role::kGradient}) {
      rows.push_back(make_row(10, layer, role, "current", 30, 0.999, role == Role::kGradient ? 7.5 : 0, 0));
      EvaluationRow mx = make_row(10, layer, role, "mxfp8", 28, 0.998, 0.5, 0);
      mx.metrics.saturated_pct = 0.01;
      if (std::string(layer) == "layers.10.fc1" && role == Role::kGradient)
        mx.applicability = Applicability::no("MXFP8 needs both dims divisible by 32");
      rows.push_back(mx);
      mx.orientation = Orientation::kColumnwise;
      rows.push_back(mx);
    }
  return rows;
}

std::vector<GemmRow> fixed_gemms() {
  std::vector<GemmRow> g;
  for (int i = 0; i < 3; ++i) {
    GemmRow r;
    r.step = 10;
    r.layer = "layers.2.fc1";
    r.gemm = static_cast<Gemm>(i);
    r.recipe = parse_recipe("current");
    r.rel_fro_err = 0.03125 * (i + 1);
    r.zeroed_pct = i == 2 ? 2.5 : 0;
    r.sign_flip_pct = 0.75;
    g.push_back(r);
  }
  return g;
}

Recommendation fixed_recommendation() {
  Recommendation rec;
  CandidatePlan cur;
  cur.candidate = {parse_recipe("current"), TrainingFormat::kHybrid};
  cur.fp8_flop_share = 5.0 / 6.0;
  cur.fp8_flops = 5e9;
  cur.speedup = 1.375;
  CandidatePlan mx;
  mx.candidate = {parse_recipe("mxfp8"), TrainingFormat::kHybrid};
  rec.candidates = {mx, cur};  // evaluation order; the ranking puts current first
  rec.chosen = 1;
  rec.ranking = {1, 0};
  rec.why = "current/hybrid keeps 83.3 % of the GEMM FLOPs in FP8";
  for (const char* layer : {"layers.10.fc1", "layers.2.fc1"}) {
    LayerDecision d;
    d.layer = layer;
    d.precision = std::string(layer) == "layers.2.fc1" ? Precision::kMixed : Precision::kFp8;
    for (int g = 0; g < 3; ++g) {
      d.gemms[g].gemm = static_cast<Gemm>(g);
      d.gemms[g].judged = true;
      d.gemms[g].precision = Precision::kFp8;
    }
    if (d.precision == Precision::kMixed) {
      d.gemms[2].precision = Precision::kBf16;
      d.gemms[2].reason = "step 10 gradient underflow 7.5 % (> 5 %) under current/hybrid";
    }
    rec.layers.push_back(d);
  }
  rec.limits = {"no amax trend from a single captured step"};
  rec.gpu = find_gpu_target("h100");
  rec.cost_source = "roofline";
  rec.cost_basis = "roofline at 8192 tokens a step (--tokens-per-step)";
  return rec;
}

}  // namespace

TEST_CASE("report.html: the sections, the answer and the reasons, self-contained and well-formed") {
  const RunInfo info = fixed_info();
  const auto rows = fixed_rows();
  const auto gemms = fixed_gemms();
  const auto layers = summarize_layers(rows);
  const Recommendation rec = fixed_recommendation();
  AnswerContext answer;
  answer.recommendation = &rec;
  const Artifact a = render_report_html({&info, rows, gemms, layers, &rec, &answer});
  const std::string& s = a.contents;
  CHECK(a.name == "report.html");
  // Self-contained; every url() a reference inside the page (the hatch patterns).
  CHECK(page_error(s) == "");
  for (const char* id : {"id=\"summary\"", "id=\"heatmaps\"", "id=\"layers\""}) CHECK(s.find(id) != std::string::npos);
  // (a) the summary: TE's recipe call, why, the fallback with its reason, speedup, limits, warnings.
  CHECK(s.find("<p>Recommended: <code>Float8CurrentScaling(fp8_format=Format.HYBRID)</code>") != std::string::npos);
  CHECK(s.find("current/hybrid keeps 83.3 % of the GEMM FLOPs in FP8") != std::string::npos);
  CHECK(s.find("GEMMs kept in BF16: 1") != std::string::npos);
  CHECK(s.find("step 10 gradient underflow 7.5 % (&gt; 5 %) under current/hybrid") != std::string::npos);
  CHECK(s.find("FP8 share of GEMM FLOPs 83.3 %") != std::string::npos);
  CHECK(s.find("not judged: no amax trend from a single captured step") != std::string::npos);
  CHECK(s.find("holds 1 NaN and 0 Inf elements &lt;&amp;&gt;") != std::string::npos);
  CHECK(s.find("The answer as printed by run") != std::string::npos);
  // The candidates side by side in the recommendation's ranking, not in evaluation order.
  const auto side = s.find("The candidates side by side");
  REQUIRE(side != std::string::npos);
  const auto first = s.find("<tr class=\"top\"><td class=\"num\">1</td><td>current/hybrid</td>", side);
  CHECK(first != std::string::npos);
  CHECK(s.find("<td class=\"num\">2</td><td>mxfp8/hybrid</td>", side) > first);
  // The plan at a glance, right after the answer, layers in model order: every GEMM coloured by
  // its precision, the BF16 one with its reason on hover.
  const auto grid = s.find("<table class=\"plan\">");
  REQUIRE(grid != std::string::npos);
  CHECK(grid < s.find("GEMMs kept in BF16: 1"));
  CHECK(s.find("<tr><td>layers.2.fc1</td><td class=\"fp8\">FP8</td><td class=\"fp8\">FP8</td><td class=\"bf16\" "
               "title=\"step 10 gradient underflow 7.5 % (&gt; 5 %) under current/hybrid\">BF16</td></tr>"
               "<tr><td>layers.10.fc1</td>",
               grid) != std::string::npos);
  CHECK(s.find("5 GEMMs FP8, 1 BF16 for the numbers, 0 BF16 because FP8 would not pay, 0 not judged; FP8 share of "
               "GEMM FLOPs 83.3 %, predicted GEMM speedup 1.375x.",
               grid) != std::string::npos);
  // (b) heatmaps: every role rowwise, and the columnwise copies mxfp8 evaluates; three metrics each.
  const auto charts = svgs_of(s);
  CHECK(charts.size() == 6 * 3);
  for (const std::string& c : charts) CHECK(chart_error(c) == "");
  CHECK(s.find("SQNR of the gradient, columnwise copy (worst over steps)") != std::string::npos);
  // Model order: layers.2 before layers.10, in the heatmaps and the cards.
  CHECK(charts[0].find(">layers.2.fc1</text>") < charts[0].find(">layers.10.fc1</text>"));
  CHECK(s.find("<h3>layers.2.fc1</h3>") < s.find("<h3>layers.10.fc1</h3>"));
  // The chosen column outlined in each of both layers' rows, plus the legend key, in every map.
  CHECK(count_of(charts[0], "stroke=\"#000\" stroke-width=\"1.5\"") == 3);
  // mxfp8 does not fit layers.10's gradient: hatched in the gradient maps.
  CHECK(count_of(s, "class=\"missing\"") == 2 * 3);
  CHECK(s.find("not evaluated: MXFP8 needs both dims divisible by 32") != std::string::npos);
  // (c) cards: linked from the heatmaps' row labels; every link has its target.
  std::set<std::string> ids, links;
  const std::regex id_re("id=\"([^\"]+)\""), href_re("href=\"#([^\"]+)\"");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), id_re); it != std::sregex_iterator(); ++it)
    CHECK(ids.insert((*it)[1]).second);  // unique
  for (auto it = std::sregex_iterator(s.begin(), s.end(), href_re); it != std::sregex_iterator(); ++it)
    links.insert((*it)[1]);
  for (const auto& l : links) CHECK_MESSAGE(ids.count(l) == 1, l);
  CHECK(links.count("layer-0-layers-2-fc1") == 1);
  CHECK(s.find("<div class=\"card\" id=\"layer-0-layers-2-fc1\">") != std::string::npos);
  CHECK(s.find("<h4>GEMM-output error (gemms.csv)</h4>") != std::string::npos);
  CHECK(s.find("<td class=\"num\">0.0938</td>") != std::string::npos);  // wgrad's rel_fro_err
  CHECK(s.find("<h4>Decision: mixed under current/hybrid</h4>") != std::string::npos);
  CHECK(s.find("<tr class=\"bf16\"><td>wgrad</td><td>bf16</td>") != std::string::npos);
}

TEST_CASE("report.html: without advice, and with a training log's amax trace") {
  RunInfo info = fixed_info();
  TrainingLog log;
  for (std::int64_t step = 0; step < 5; ++step) {
    log.series[{"layers.2.fc1", Role::kActivation}].amax_by_step[step] = 1.0f + static_cast<float>(step);
    log.series[{"layers.2.fc1", Role::kGradient}].amax_by_step[step] = 1e-3f;
  }
  const auto rows = fixed_rows();
  const auto layers = summarize_layers(rows);
  AnswerContext answer;
  answer.skipped = {"no recommendation: --no-gemms leaves no GEMM evidence to judge", find_gpu_target("h100"), "roofline"};
  const std::string s = render_report_html({&info, rows, {}, layers, nullptr, &answer, {}, {}, &log}).contents;
  CHECK(markup_error(s) == "");
  CHECK(s.find("no recommendation: --no-gemms leaves no GEMM evidence to judge") != std::string::npos);
  CHECK(s.find("GEMM-output error") == std::string::npos);
  // One amax chart per logged operand (activation and gradient), in layers.2.fc1's card.
  CHECK(count_of(s, "<title>amax of the activation over the training log&#39;s steps</title>") == 1);
  CHECK(count_of(s, "<title>amax of the gradient over the training log&#39;s steps</title>") == 1);
  CHECK(count_of(s, "<svg ") == 6 * 3 + 2);
  // Nothing is marked without a chosen candidate (only the legend keys).
  CHECK(count_of(s, "stroke=\"#000\" stroke-width=\"1.5\"") == 6 * 3);
}

TEST_CASE("report.html: the amax trace with the delayed window and the forecast, the log2|x| histogram with windows") {
  RunInfo info = fixed_info();
  info.recipes = {parse_recipe("current"), parse_recipe("delayed:history=2"), parse_recipe("mxfp8")};
  TrainingLog log;
  for (std::int64_t step = 0; step < 6; ++step)
    log.series[{"layers.2.fc1", Role::kActivation}].amax_by_step[step] = step == 1 ? 8.0f : 1.0f;
  const auto rows = fixed_rows();
  const auto layers = summarize_layers(rows);
  const Recommendation rec = fixed_recommendation();
  DelayedForecast f;
  f.layer = "layers.2.fc1";
  f.role = Role::kActivation;
  f.recipe = "delayed:history=2:algo=max:margin=0";
  f.has_trend = true;
  f.slope_log2_per_1000 = 500;  // 2x per 2 steps
  f.steps_spanned = 5;
  f.step = 5;
  f.fit_first_step = 0;
  f.fit_last_step = 5;
  f.fitted_log2_at_last = 0;
  f.saturation_step = 8;
  f.reason = "starts saturating near step 8";
  const std::vector<DelayedForecast> forecasts{f};
  // layers.2.fc1's activation at step 10: |x| from 2^-20 to 2^3, 1000 elements a binade, 7 zeros.
  // The step and candidate histogram_choices picks for it (policies/histogram_choice.hpp).
  OperandHistogram h;
  for (const HistogramChoice& c : histogram_choices(rows))
    if (c.key.layer == "layers.2.fc1" && c.key.role == Role::kActivation) h.choice = c;
  REQUIRE(h.choice.key.step == 10);
  h.histogram.min_exp = -20;
  h.histogram.counts.assign(24, 1000);
  h.histogram.amin_nonzero = std::ldexp(1.0f, -20);
  h.histogram.amax_finite = 12.0f;
  h.histogram.zeros = 7;
  h.histogram.numel = 24 * 1000 + 7;
  const std::vector<OperandHistogram> histograms{h};
  AnswerContext answer;
  answer.recommendation = &rec;
  const std::string s = render_report_html({&info, rows, fixed_gemms(), layers, &rec, &answer, forecasts, histograms, &log}).contents;
  CHECK(markup_error(s) == "");
  const auto charts = svgs_of(s);
  const auto chart = [&](const std::string& title) {
    for (const auto& c : charts)
      if (c.find("<title>" + title + "</title>") != std::string::npos) return c;
    return std::string();
  };
  // The amax trace: the logged amax, the delayed recipe's window max (the step 1 spike held for
  // steps 2 and 3), the fitted trend dashed past step 5 and the forecast's step, labelled.
  const std::string amax = chart("amax of the activation over the training log&#39;s steps");
  REQUIRE(!amax.empty());
  CHECK(count_of(amax, "class=\"axis-title\"") == 2);
  CHECK(amax.find(">delayed:history=2:algo=max:margin=0: window max</text>") != std::string::npos);
  CHECK(amax.find(">fitted trend (+500.00 binades / 1000 steps), extended</text>") != std::string::npos);
  CHECK(amax.find("stroke-dasharray=\"7 4\"") != std::string::npos);
  CHECK(amax.find(">forecast: delayed:history=2 saturates @8</text>") != std::string::npos);
  CHECK(count_of(amax, "<circle ") == 1);
  CHECK(count_of(amax, "<path ") == 3);
  CHECK(s.find("starts saturating near step 8") != std::string::npos);
  // The histogram of step 10 (mxfp8 leaves the most outside there: 0.51 %): axis titles in its
  // units, the chosen current/hybrid window shaded (scale_inv 1/179.2: 2^-16.5 .. 2^1.3), mxfp8's
  // drawn as edges, and bars on both sides of the chosen window.
  const std::string hist = chart("log2 |x| of the activation at step 10");
  REQUIRE(!hist.empty());
  CHECK(hist.find(">log2 |x| (binade)</text>") != std::string::npos);
  CHECK(hist.find(">elements (log scale)</text>") != std::string::npos);
  CHECK(count_of(hist, "class=\"window\"") == 2);
  CHECK(hist.find(">window of chosen current/hybrid (e4m3)</text>") != std::string::npos);
  CHECK(hist.find(">block scales&#39; windows of mxfp8/hybrid (e4m3)</text>") != std::string::npos);
  CHECK(hist.find("<g class=\"window-edges\">") != std::string::npos);
  for (const char* g : {"<g class=\"bars-below\"", "<g class=\"bars-above\"", "<g class=\"bars\""}) {
    const std::size_t at = hist.find(g);
    REQUIRE(at != std::string::npos);
    CHECK(hist.compare(hist.find('>', at) + 1, 5, "<rect") == 0);  // not empty
  }
  CHECK(s.find("representable |x| from 2^-16.5 to 2^1.3") != std::string::npos);
  CHECK(s.find("Histogram at step 10, the step where a candidate, mxfp8/hybrid, leaves the most elements outside "
               "its window (0.51 %); 24007 elements, of them 7 zeros") != std::string::npos);
}

TEST_CASE("report.html: a 100-layer model, 16 candidates, 2 steps stays a few MB") {
  // The page's bound (issue 15: "a few MB at most for a 100-layer model").
  constexpr std::size_t kMaxBytes = 5'000'000;
  std::vector<EvaluationRow> rows;
  const std::vector<Recipe> recipes = parse_recipe_list(default_recipe_list());
  for (std::int64_t step : {1, 2})
    for (int l = 0; l < 100; ++l)
      for (Role role : {Role::kActivation, Role::kWeight, Role::kGradient})
        for (TrainingFormat f : kAllTrainingFormats)
          for (const Recipe& recipe : recipes)
            for (Orientation o : {Orientation::kRowwise, Orientation::kColumnwise}) {
              if (o == Orientation::kColumnwise && recipe.kind != RecipeKind::kBlock && recipe.kind != RecipeKind::kMx)
                continue;
              EvaluationRow r = testing::make_row(step, "layers." + std::to_string(l) + ".mlp.linear_fc1", role,
                                                  recipe.spec(), 20 + l % 13, 0.99, 0.25 * (l % 7), 0);
              r.format = f;
              r.fp8 = fp8_format_for(f, role);
              r.orientation = o;
              rows.push_back(r);
            }
  const RunInfo info = fixed_info();
  const auto layers = summarize_layers(rows);
  const Artifact a = render_report_html({&info, rows, {}, layers, nullptr, nullptr});
  MESSAGE("100-layer page: ", a.contents.size(), " bytes");
  CHECK(a.contents.size() < kMaxBytes);
  CHECK(markup_error(a.contents) == "");
  // What did not fit is said on the page.
  if (a.contents.find("<div class=\"card\" id=\"layer-99-") == std::string::npos)
    CHECK(a.contents.find("layer cards: the first ") != std::string::npos);
}

// The three-tier plan: layers.2 on NVFP4 (the base), layers.10 on MXFP8 because NVFP4 fails its
// wgrad, and a third module in BF16, priced: what each tier costs (its threshold load) and buys.
TEST_CASE("report.html: the per-module plan at a glance, coloured by tier, with what each tier costs and buys") {
  const RunInfo info = fixed_info();
  std::vector<EvaluationRow> rows = fixed_rows();
  const char* kLayers[] = {"layers.2.fc1", "layers.10.fc1", "layers.11.fc2"};
  const auto candidate = [&](const char* recipe, bool layer10_wgrad_fails) {
    CandidatePlan c;
    c.candidate = {parse_recipe(recipe), TrainingFormat::kE4M3};
    c.total_flops = 9e9;
    for (const char* name : kLayers) {
      LayerJudgement l;
      l.layer = name;
      l.fp8_safe = std::string(name) != "layers.11.fc2";
      for (int g = 0; g < 3; ++g) {
        GemmJudgement& j = l.gemms[g];
        j.gemm = static_cast<Gemm>(g);
        j.judged = true;
        j.flops = 1e9;
        j.risk = 0.25;
        j.fp8_safe = l.fp8_safe;
        j.worst.passed = l.fp8_safe;
        if (!l.fp8_safe) j.worst.reason = "step 10 wgrad output amplified <8x>";
      }
      if (layer10_wgrad_fails && std::string(name) == "layers.10.fc1") {
        l.fp8_safe = l.gemms[2].fp8_safe = l.gemms[2].worst.passed = false;
        l.gemms[2].worst.reason = "step 10 activation (columnwise copy) underflow 89.2 %";
      }
      c.layers.push_back(l);
    }
    return c;
  };
  Recommendation rec = fixed_recommendation();
  rec.candidates = {candidate("nvfp4", true), candidate("mxfp8", false)};
  rec.candidates[0].fp8_flops = 6e9;
  rec.chosen = 0;
  rec.ranking = {0, 1};
  rec.gpu = find_gpu_target("b200");
  ModulePlan mp;
  mp.base = 0;
  mp.modules = {{"layers.2.fc1", 0, ""},
                {"layers.10.fc1", 1, "wgrad: NVFP4 fails; mxfp8/e4m3 passes all its GEMMs"},
                {"layers.11.fc2", std::nullopt, "no per-module recipe passes all its GEMMs (2 tried)"}};
  mp.why = "per module: 1 of 3 on nvfp4/e4m3, 1 on mxfp8/e4m3, 1 in BF16";
  mp.speedup = 1.5;
  mp.tiers = {{0, 1, 3, 3e9, 0.75, 300e-6, 100e-6}, {1, 1, 3, 3e9, 0.75, 300e-6, 150e-6},
              {std::nullopt, 1, 3, 3e9, 0.0, 300e-6, 300e-6}};
  rec.module_plan = mp;
  for (EvaluationRow& r : rows)
    if (r.key.layer == "layers.2.fc1") r.recipe = parse_recipe("nvfp4");
  const auto layers = summarize_layers(rows);
  const Artifact a = render_report_html({&info, rows, {}, layers, &rec, nullptr});
  const std::string& s = a.contents;
  CHECK(page_error(s) == "");
  CHECK(markup_error(s) == "");
  const auto at = s.find("<h3>The per-module plan at a glance (te_precision_config.yaml: what Megatron trains)</h3>");
  REQUIRE(at != std::string::npos);
  // Model order; each GEMM's cell in its tier's colour, the MXFP8 module's wgrad saying why NVFP4
  // would not do, its other GEMMs that NVFP4 passes them.
  CHECK(s.find("<tr><td>layers.2.fc1</td><td class=\"fp4\">nvfp4/e4m3</td><td class=\"fp4\">nvfp4/e4m3</td>"
               "<td class=\"fp4\">nvfp4/e4m3</td></tr><tr><td>layers.10.fc1</td><td class=\"alt\" title=\"wgrad: "
               "NVFP4 fails; mxfp8/e4m3 passes all its GEMMs; under nvfp4/e4m3: passes\">mxfp8/e4m3</td>",
               at) != std::string::npos);
  CHECK(s.find("<td class=\"alt\" title=\"wgrad: NVFP4 fails; mxfp8/e4m3 passes all its GEMMs; under nvfp4/e4m3: "
               "step 10 activation (columnwise copy) underflow 89.2 %\">mxfp8/e4m3</td></tr>",
               at) != std::string::npos);
  CHECK(s.find("<tr><td>layers.11.fc2</td><td class=\"bf16\" title=\"no per-module recipe passes all its GEMMs (2 "
               "tried); under nvfp4/e4m3: step 10 wgrad output amplified &lt;8x&gt;\">BF16</td>",
               at) != std::string::npos);
  // The tiers, in ms: NVFP4 saves 0.2 of the plan's 0.35 (57.1 %), MXFP8 0.15 (42.9 %), BF16 nothing.
  CHECK(s.find("<tr><td class=\"fp4\">nvfp4/e4m3</td><td class=\"num\">1</td><td class=\"num\">3</td>"
               "<td class=\"num\">33.3 %</td><td class=\"num\">0.25</td><td class=\"num\">0.3</td>"
               "<td class=\"num\">0.1</td><td class=\"num\">0.2</td><td class=\"num\">57.1 %</td></tr>",
               at) != std::string::npos);
  CHECK(s.find("<td class=\"num\">0.15</td><td class=\"num\">42.9 %</td></tr>", at) != std::string::npos);
  CHECK(s.find("<tr><td class=\"bf16\">BF16</td><td class=\"num\">1</td><td class=\"num\">3</td>"
               "<td class=\"num\">33.3 %</td><td class=\"num\">-</td><td class=\"num\">0.3</td>"
               "<td class=\"num\">0.3</td><td class=\"num\">0</td><td class=\"num\">0.0 %</td></tr>",
               at) != std::string::npos);
  CHECK(s.find("on b200 by the roofline, one module at a time; the whole plan 1.500x over all-BF16.", at) !=
        std::string::npos);
}

TEST_CASE("report.html: a chosen recipe that keeps no GEMM in FP8 is recommended as every GEMM in BF16") {
  // Issue 37: the page opened on "Recommended: Float8CurrentScaling(...)" right above "keeps 0.0 %
  // of the GEMM FLOPs in FP8".
  const RunInfo info = fixed_info();
  const auto rows = fixed_rows();
  const auto layers = summarize_layers(rows);
  Recommendation rec = fixed_recommendation();
  rec.candidates[1].fp8_flops = 0;
  rec.candidates[1].fp8_flop_share = 0;
  for (LayerDecision& l : rec.layers) {  // as decide_layers leaves a plan with no FP8 GEMM
    l.precision = Precision::kBf16;
    for (GemmDecision& g : l.gemms) g.precision = Precision::kBf16;
  }
  AnswerContext answer;
  answer.recommendation = &rec;
  const std::string s = render_report_html({&info, rows, fixed_gemms(), layers, &rec, &answer}).contents;
  CHECK(s.find("<p>Recommended: every GEMM in BF16 (the chosen <code>Float8CurrentScaling(fp8_format=Format.HYBRID)"
               "</code>  [current/hybrid] keeps none in FP8)</p>") != std::string::npos);
  CHECK(s.find("<p>Recommended: <code>") == std::string::npos);
}

TEST_CASE("model order: layer index, then where the module runs in its layer") {
  const std::vector<std::string> got = html::model_order(
      {"output_layer", "layers.1.mlp.linear_fc1", "layers.0.mlp.linear_fc2", "layers.0.mlp.linear_fc1",
       "layers.0.self_attention.linear_proj", "layers.0.self_attention.linear_qkv", "h.0.mlp.c_proj",
       "h.0.attn.c_proj", "h.0.mlp.c_fc", "h.0.attn.c_attn", "model.layers.2.self_attn.o_proj",
       "model.layers.2.mlp.down_proj", "model.layers.2.self_attn.q_proj", "model.layers.2.mlp.gate_proj"});
  // GPT-2's h.<N> is not a "layers.<N>" name: after the indexed ones, by name.
  const std::vector<std::string> want = {
      "layers.0.self_attention.linear_qkv", "layers.0.self_attention.linear_proj", "layers.0.mlp.linear_fc1",
      "layers.0.mlp.linear_fc2", "layers.1.mlp.linear_fc1", "model.layers.2.self_attn.q_proj",
      "model.layers.2.self_attn.o_proj", "model.layers.2.mlp.gate_proj", "model.layers.2.mlp.down_proj",
      "h.0.attn.c_attn", "h.0.attn.c_proj", "h.0.mlp.c_fc", "h.0.mlp.c_proj", "output_layer"};
  CHECK(got == want);
}
