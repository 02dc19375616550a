// Evaluation metrics: confusion matrix, per-class precision/recall/F1, the
// defect-vs-good ROC, AUC and the threshold meeting a target escape rate.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/text.hpp"
#include "modelfile/model_file.hpp"
#include "modelfile/text.hpp"
#include "stoke/deploy.hpp"
#include "stoke/error.hpp"

namespace stoke {

using modelfile_detail::float_text;

namespace {

double ratio(double a, double b) {
  return b > 0 ? a / b : 0.0;
}

void class_metrics(Evaluation& e) {
  const std::size_t k = e.class_names.size();
  e.per_class.assign(k, {});
  std::uint64_t correct = 0;
  std::size_t present = 0;  // classes with samples
  double f1_sum = 0;
  for (std::size_t c = 0; c < k; ++c) {
    std::uint64_t predicted = 0, actual = 0;
    for (std::size_t o = 0; o < k; ++o) {
      predicted += e.confusion[o][c];
      actual += e.confusion[c][o];
    }
    auto& m = e.per_class[c];
    m.support = actual;
    m.precision = ratio(double(e.confusion[c][c]), double(predicted));
    correct += e.confusion[c][c];
    if (actual == 0) {  // not in the evaluated set: no recall, no F1
      m.recall = m.f1 = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    m.recall = ratio(double(e.confusion[c][c]), double(actual));
    m.f1 = m.precision + m.recall > 0 ? 2 * m.precision * m.recall / (m.precision + m.recall) : 0.0;
    f1_sum += m.f1;
    ++present;
  }
  e.accuracy = ratio(double(correct), double(e.samples));
  e.macro_f1 = present ? f1_sum / double(present) : 0.0;
}

// Defect score = 1 - p(good); a part is rejected when its score >= threshold.
void good_analysis(Evaluation& e, std::span<const std::int32_t> labels,
                   std::span<const float> probs, double target) {
  const std::size_t k = e.class_names.size();
  std::vector<std::pair<double, bool>> scored;  // (score, is defect)
  std::vector<double> defect_scores;
  std::size_t goods = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const double score = 1.0 - probs[i * k + static_cast<std::size_t>(e.good_label)];
    const bool defect = labels[i] != e.good_label;
    scored.emplace_back(score, defect);
    if (defect) defect_scores.push_back(score);
    goods += defect ? 0 : 1;
  }
  const std::size_t defects = defect_scores.size();
  // ROC over distinct thresholds, descending; AUC by the trapezoid rule
  // (equal to P(score(defect) > score(good)) + P(tie) / 2).
  std::sort(scored.begin(), scored.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  e.roc.clear();
  e.roc.push_back({INFINITY, 0.0, 0.0});
  std::size_t tp = 0, fp = 0;
  double auc = 0;
  for (std::size_t i = 0; i < scored.size();) {
    const double t = scored[i].first;
    for (; i < scored.size() && scored[i].first == t; ++i) (scored[i].second ? tp : fp) += 1;
    RocPoint p{t, ratio(double(tp), double(defects)), ratio(double(fp), double(goods))};
    const RocPoint& prev = e.roc.back();
    auc += (p.false_reject_rate - prev.false_reject_rate) *
           (p.detection_rate + prev.detection_rate) / 2;
    e.roc.push_back(p);
  }
  e.auc = defects && goods ? auc : 0.0;
  // The largest threshold passing at most floor(target * defects) defects.
  e.target_escape_rate = target;
  std::sort(defect_scores.begin(), defect_scores.end());
  const auto allowed = static_cast<std::size_t>(std::floor(target * double(defects) + 1e-9));
  e.threshold = defects == 0 ? 1.0 : allowed >= defects ? INFINITY : defect_scores[allowed];
  std::size_t escapes = 0, rejects = 0;
  for (const auto& [score, defect] : scored) {
    if (defect && score < e.threshold) ++escapes;
    if (!defect && score >= e.threshold) ++rejects;
  }
  e.escape_rate = ratio(double(escapes), double(defects));
  e.false_reject_rate = ratio(double(rejects), double(goods));
  // Only good parts, or only defects: no ROC; the rates of the side present keep a meaning.
  constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  if (defects == 0 || goods == 0) {
    e.roc.clear();
    e.auc = kNone;
  }
  if (defects == 0) e.threshold = e.escape_rate = kNone;
  if (defects == 0 || goods == 0) e.false_reject_rate = kNone;
}

// The library's one JSON string escaper (core/text.hpp).
std::string json_string(const std::string& s) {
  return detail::json_quote(s);
}

std::string json_number(double v) {
  return std::isfinite(v) ? float_text(v) : "null";
}

}  // namespace

Evaluation evaluate_scores(const std::vector<std::string>& class_names,
                           std::span<const std::int32_t> labels,
                           std::span<const float> probabilities, std::span<const std::string> files,
                           const EvaluationOptions& options) {
  const std::size_t k = class_names.size(), n = labels.size();
  if (k == 0 || probabilities.size() != n * k || (!files.empty() && files.size() != n)) {
    throw InvalidArgument("stoke::evaluate_scores: " + std::to_string(n) + " labels, " +
                          std::to_string(probabilities.size()) + " probabilities, " +
                          std::to_string(files.size()) + " files for " + std::to_string(k) +
                          " classes");
  }
  Evaluation e;
  e.class_names = class_names;
  e.samples = n;
  e.confusion.assign(k, std::vector<std::uint64_t>(k, 0));
  for (std::size_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || static_cast<std::size_t>(labels[i]) >= k) {
      throw InvalidArgument("stoke::evaluate_scores: label " + std::to_string(labels[i]) +
                            " of sample " + std::to_string(i) + " is not one of the " +
                            std::to_string(k) + " classes");
    }
    const float* p = probabilities.data() + i * k;
    const auto predicted = static_cast<int>(std::max_element(p, p + k) - p);
    ++e.confusion[static_cast<std::size_t>(labels[i])][static_cast<std::size_t>(predicted)];
    if (predicted != labels[i]) {
      e.misclassified.push_back(
          {files.empty() ? std::string("#").append(std::to_string(i)) : files[i], labels[i],
           predicted, p[predicted]});
    }
  }
  class_metrics(e);
  std::stable_sort(
      e.misclassified.begin(), e.misclassified.end(),
      [](const Misclassified& a, const Misclassified& b) { return a.confidence > b.confidence; });
  if (e.misclassified.size() > options.misclassified_limit)
    e.misclassified.resize(options.misclassified_limit);
  if (!options.good_class.empty()) {
    const auto it = std::find(class_names.begin(), class_names.end(), options.good_class);
    if (it == class_names.end()) {
      throw InvalidArgument("stoke::evaluate: good class '" + options.good_class +
                            "' is not one of the model's classes");
    }
    if (!(options.escape_rate >= 0 && options.escape_rate <= 1)) {
      throw InvalidArgument("stoke::evaluate: escape rate " + float_text(options.escape_rate) +
                            " is not in [0, 1]");
    }
    e.good_label = static_cast<int>(it - class_names.begin());
    good_analysis(e, labels, probabilities, options.escape_rate);
  }
  return e;
}

namespace {

// The model's label of each dataset class: the dataset's classes must be
// some of the model's.
std::vector<std::int32_t> model_labels(const Dataset& dataset, const ModelInfo& info) {
  std::vector<std::int32_t> out;
  for (const auto& name : dataset.class_names()) {
    const auto it = std::find(info.class_names.begin(), info.class_names.end(), name);
    if (it == info.class_names.end()) {
      throw InvalidArgument(
          "stoke::evaluate: the dataset's classes (" +
          modelfile_detail::join(dataset.class_names(), ",") + ") are not the model's (" +
          modelfile_detail::join(info.class_names, ",") + "): '" + name + "' is not one of them");
    }
    out.push_back(static_cast<std::int32_t>(it - info.class_names.begin()));
  }
  return out;
}

// What evaluate() gathers: per evaluated sample its model label, file and
// probabilities; the files it could not read.
struct Scores {
  std::vector<std::int32_t> labels;
  std::vector<std::string> files;
  std::vector<float> probs;
  std::vector<CorruptSample> skipped;
  std::size_t decode_failures = 0;

  void add(std::int32_t label, std::string file, const std::vector<float>& p) {
    labels.push_back(label);
    files.push_back(std::move(file));
    probs.insert(probs.end(), p.begin(), p.end());
  }
};

bool is_data_error(const Error& e) {
  return e.code() == ErrorCode::kDecode || e.code() == ErrorCode::kIo;
}

// A batch held a file that cannot be read: its samples one by one, the bad
// ones into scores.skipped.
void classify_one_by_one(Predictor& predictor, const Dataset& dataset,
                         const std::vector<std::int32_t>& to_model, std::size_t first,
                         std::size_t count, Scores& scores) {
  for (std::size_t i = first; i < first + count; ++i) {
    try {
      const auto p = predictor.predict_file(dataset.path(i));
      scores.add(to_model[static_cast<std::size_t>(dataset.label(i))], dataset.path(i),
                 p.probabilities);
    } catch (const Error& e) {
      if (!is_data_error(e)) throw;
      scores.skipped.push_back({dataset.path(i), e.what()});
      ++scores.decode_failures;
    }
  }
}

// The loader's corruption budget over the files refused at load and those
// found bad while evaluating.
void check_budget(const Dataset& dataset, const Scores& scores) {
  const LoaderOptions defaults;
  const std::size_t total = dataset.size() + dataset.report().skipped.size();
  const std::size_t budget = std::max(
      defaults.max_corrupt_samples,
      static_cast<std::size_t>(defaults.max_corrupt_fraction * static_cast<double>(total)));
  std::size_t bad = scores.decode_failures;
  for (const auto& s : dataset.report().skipped) bad += s.reason.rfind("ignored:", 0) != 0;
  if (bad <= budget) return;
  std::string list;
  for (const auto& s : scores.skipped) list += "\n  " + s.path + ": " + s.reason;
  throw DecodeError("stoke::evaluate: dataset " + dataset.report().source +
                    ": too many unreadable images (" + std::to_string(bad) + ", budget " +
                    std::to_string(budget) +
                    " = max(max_corrupt_samples, max_corrupt_fraction * size)):" + list);
}

}  // namespace

Evaluation evaluate(Predictor& predictor, const Dataset& dataset, const EvaluationOptions& options,
                    const std::function<void(std::size_t, std::size_t)>& on_progress) {
  const ModelInfo& info = predictor.info();
  const std::vector<std::int32_t> to_model = model_labels(dataset, info);
  const bool skip = options.skip_corrupt.value_or(dataset.skip_corrupt());
  const std::size_t n = dataset.size();
  LoaderOptions lo =
      modelfile_detail::loader_options_for(info, std::max<std::size_t>(1, options.batch_size));
  lo.skip_corrupt = false;  // a bad file is classified apart below, not replaced by the next
  lo.max_image_pixels = predictor.max_image_pixels();
  Loader loader(dataset, lo);
  std::vector<float> batch(loader.batch_size() * predictor.sample_size());
  std::vector<std::int32_t> batch_labels(loader.batch_size());
  Scores scores;
  for (const auto& s : dataset.report().skipped) scores.skipped.push_back({s.path, s.reason});
  for (std::size_t b = 0; b < loader.batches_per_epoch(); ++b) {
    const std::size_t first = b * loader.batch_size();
    const std::size_t count = std::min(loader.batch_size(), n - first);
    try {
      loader.fill_batch(0, b, std::as_writable_bytes(std::span<float>(batch)), batch_labels);
    } catch (const Error& e) {
      if (!skip || !is_data_error(e)) throw;
      classify_one_by_one(predictor, dataset, to_model, first, count, scores);
      check_budget(dataset, scores);
      if (on_progress) on_progress(first + count, n);
      continue;
    }
    const auto preds = predictor.forward(
        std::span<const float>(batch).first(count * predictor.sample_size()), count);
    for (std::size_t i = 0; i < count; ++i) {
      scores.add(to_model[static_cast<std::size_t>(batch_labels[i])], dataset.path(first + i),
                 preds[i].probabilities);
    }
    if (on_progress) on_progress(first + count, n);
  }
  if (skip) check_budget(dataset, scores);
  Evaluation e =
      evaluate_scores(info.class_names, scores.labels, scores.probs, scores.files, options);
  e.skipped = std::move(scores.skipped);
  e.precision = predictor.self_check().precision;
  return e;
}

std::string Evaluation::to_json() const {
  std::ostringstream o;
  o << "{\n  \"samples\": " << samples << ",\n  \"compute_precision\": \"" << to_string(precision)
    << "\",\n  \"accuracy\": " << json_number(accuracy)
    << ",\n  \"macro_f1\": " << json_number(macro_f1) << ",\n  \"classes\": [";
  for (std::size_t c = 0; c < class_names.size(); ++c) {
    const auto& m = per_class[c];
    o << (c ? "," : "") << "\n    {\"name\": " << json_string(class_names[c])
      << ", \"support\": " << m.support << ", \"precision\": " << json_number(m.precision)
      << ", \"recall\": " << json_number(m.recall) << ", \"f1\": " << json_number(m.f1) << "}";
  }
  o << "\n  ],\n  \"confusion\": [";
  for (std::size_t r = 0; r < confusion.size(); ++r) {
    o << (r ? ", " : "") << "[";
    for (std::size_t c = 0; c < confusion[r].size(); ++c) o << (c ? ", " : "") << confusion[r][c];
    o << "]";
  }
  o << "]";
  if (good_label >= 0) {
    o << ",\n  \"good_class\": " << json_string(class_names[static_cast<std::size_t>(good_label)])
      << ",\n  \"auc\": " << json_number(auc)
      << ",\n  \"target_escape_rate\": " << json_number(target_escape_rate)
      << ",\n  \"threshold\": " << json_number(threshold)
      << ",\n  \"escape_rate\": " << json_number(escape_rate)
      << ",\n  \"false_reject_rate\": " << json_number(false_reject_rate) << ",\n  \"roc\": [";
    for (std::size_t i = 0; i < roc.size(); ++i) {
      o << (i ? ", " : "") << "[" << json_number(roc[i].threshold) << ", "
        << json_number(roc[i].false_reject_rate) << ", " << json_number(roc[i].detection_rate)
        << "]";
    }
    o << "]";
  }
  o << ",\n  \"misclassified\": [";
  for (std::size_t i = 0; i < misclassified.size(); ++i) {
    const auto& m = misclassified[i];
    o << (i ? "," : "") << "\n    {\"file\": " << json_string(m.file)
      << ", \"label\": " << json_string(class_names[static_cast<std::size_t>(m.label)])
      << ", \"predicted\": " << json_string(class_names[static_cast<std::size_t>(m.predicted)])
      << ", \"confidence\": " << json_number(m.confidence) << "}";
  }
  o << "\n  ],\n  \"skipped\": [";
  for (std::size_t i = 0; i < skipped.size(); ++i) {
    o << (i ? "," : "") << "\n    {\"file\": " << json_string(skipped[i].path)
      << ", \"reason\": " << json_string(skipped[i].reason) << "}";
  }
  o << "\n  ]\n}\n";
  return o.str();
}

}  // namespace stoke
