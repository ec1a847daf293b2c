// ReportToHtml: one self-contained page (inline CSS and SVG; no script, no
// external fonts, images or links), readable top-down: verdict, section
// scores, per-column distributions, association heatmaps, PCA projection,
// privacy figures, method notes.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "evaluate/evaluate.h"

namespace ds {

namespace {

constexpr const char* kReal = "#3b6fb6";     // real data
constexpr const char* kSynth = "#f28e2b";    // synthetic data
constexpr const char* kHoldout = "#59a14f";  // holdout data

std::string Esc(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o.push_back(c);
    }
  }
  return o;
}

// Shortens a label to at most n characters (UTF-8 aware), with an ellipsis.
std::string Short(const std::string& s, size_t n) {
  size_t chars = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (chars == n) break;
      ++chars;
    }
  }
  if (i >= s.size()) return s;
  // Cut one more character to make room for the ellipsis.
  size_t j = i;
  do --j;
  while (j > 0 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80);
  return s.substr(0, j) + "\u2026";
}

std::string GradeColor(double score) {
  if (score >= 80) return "#2e7d32";
  if (score >= 60) return "#689f38";
  if (score >= 40) return "#f9a825";
  if (score >= 20) return "#ef6c00";
  return "#c62828";
}

std::string Gauge(double score, int size) {
  const double r = size * 0.4, c = size / 2.0, circ = 2 * M_PI * r;
  const double f = std::clamp(score / 100.0, 0.0, 1.0);
  return fmt::format(
      "<svg width=\"{0}\" height=\"{0}\" viewBox=\"0 0 {0} {0}\" role=\"img\" "
      "aria-label=\"score {4:.0f} of 100\">"
      "<circle cx=\"{1}\" cy=\"{1}\" r=\"{2}\" fill=\"none\" stroke=\"#e6e6e6\" "
      "stroke-width=\"{3}\"/>"
      "<circle cx=\"{1}\" cy=\"{1}\" r=\"{2}\" fill=\"none\" stroke=\"{5}\" stroke-width=\"{3}\" "
      "stroke-dasharray=\"{6:.2f} {7:.2f}\" transform=\"rotate(-90 {1} {1})\"/>"
      "<text x=\"{1}\" y=\"{1}\" text-anchor=\"middle\" dominant-baseline=\"central\" "
      "font-size=\"{8}\" font-weight=\"700\" fill=\"#222\">{4:.0f}</text></svg>",
      size, c, r, size * 0.1, score, GradeColor(score), circ * f, circ, size * 0.28);
}

std::string ScoreBar(double score) {
  return fmt::format(
      "<svg width=\"160\" height=\"12\"><rect width=\"160\" height=\"12\" rx=\"3\" "
      "fill=\"#eee\"/><rect width=\"{:.1f}\" height=\"12\" rx=\"3\" fill=\"{}\"/></svg>",
      1.6 * std::clamp(score, 0.0, 100.0), GradeColor(score));
}

// Grouped bars: real vs synthetic share per bin.
std::string BarChart(const std::vector<HistogramBin>& bins) {
  const int w = 340, h = 180, left = 34, bottom = 58, top = 8;
  const int pw = w - left - 6, ph = h - bottom - top;
  double vmax = 1e-12;
  for (const HistogramBin& b : bins) vmax = std::max({vmax, b.real, b.synthetic});
  vmax = std::min(1.0, vmax * 1.08);
  std::string s = fmt::format(
      "<svg width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" class=\"chart\">", w, h, w, h);
  for (int t = 0; t <= 2; ++t) {  // grid lines at 0, 1/2, 1 of vmax
    double y = top + ph - ph * t / 2.0;
    s += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" class=\"ax\" text-anchor=\"end\">{:.0f}%</text>",
        left, left + pw, y, y, left - 3, y + 3, 100 * vmax * t / 2.0);
  }
  const size_t n = std::max<size_t>(1, bins.size());
  const double slot = double(pw) / double(n), bw = std::max(0.8, slot * 0.4);
  size_t longest = 0;  // in characters, roughly 5.5 px each at 10 px
  for (const HistogramBin& b : bins) longest = std::max(longest, b.label.size());
  const bool horizontal = double(longest) * 5.8 < slot - 4;
  for (size_t i = 0; i < bins.size(); ++i) {
    const HistogramBin& b = bins[i];
    double x0 = left + slot * double(i) + slot * 0.1;
    double hr = ph * b.real / vmax, hs = ph * b.synthetic / vmax;
    std::string tip = fmt::format("{}: real {:.1f}%, synthetic {:.1f}%", Esc(b.label), 100 * b.real,
                                  100 * b.synthetic);
    s += fmt::format(
        "<g><title>{}</title><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
        "fill=\"{}\"/><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
        "fill=\"{}\"/></g>",
        tip, x0, top + ph - hr, bw, hr, kReal, x0 + bw, top + ph - hs, bw, hs, kSynth);
    // Labels: all when few bins, else every k-th; horizontal when they fit.
    size_t every = bins.size() <= 12 ? 1 : (bins.size() + 11) / 12;
    if (i % every == 0) {
      double cx = left + slot * (double(i) + 0.5);
      if (horizontal)
        s += fmt::format(
            "<text x=\"{:.1f}\" y=\"{}\" class=\"ax\" text-anchor=\"middle\">{}"
            "</text>",
            cx, top + ph + 13, Esc(b.label));
      else
        s += fmt::format(
            "<text x=\"{:.1f}\" y=\"{}\" class=\"ax\" text-anchor=\"end\" "
            "transform=\"rotate(-35 {:.1f} {})\">{}</text>",
            cx + 3, top + ph + 10, cx + 3, top + ph + 10, Esc(Short(b.label, 11)));
    }
  }
  s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#888\"/>", left,
                   left + pw, top + ph, top + ph);
  s += "</svg>";
  return s;
}

// Diverging colour for an association in [-1, 1] (blue negative, red positive).
std::string DivergingColor(double v) {
  v = std::clamp(v, -1.0, 1.0);
  int r, g, b;
  if (v >= 0) {
    r = int(255 - v * (255 - 178));
    g = int(255 - v * (255 - 24));
    b = int(255 - v * (255 - 43));
  } else {
    double a = -v;
    r = int(255 - a * (255 - 33));
    g = int(255 - a * (255 - 102));
    b = int(255 - a * (255 - 172));
  }
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
}

// Sequential colour for an absolute difference in [0, 1] (white to purple).
std::string SequentialColor(double v) {
  v = std::clamp(v, 0.0, 1.0);
  v = std::sqrt(v);  // small differences stay visible
  int r = int(255 - v * (255 - 84)), g = int(255 - v * (255 - 39)), b = int(255 - v * (255 - 143));
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
}

std::string Heatmap(const std::string& title, const std::vector<std::string>& names,
                    const std::vector<double>& m, bool diff) {
  const size_t k = names.size();
  const bool labels = k <= 40;
  const double cell = std::clamp(220.0 / double(std::max<size_t>(k, 1)), 3.0, 22.0);
  const int lab = labels ? 88 : 4;
  const int w = int(lab + cell * double(k) + (labels ? 36 : 6)),
            h = int(lab + cell * double(k) + 24);
  std::string s = fmt::format(
      "<figure class=\"heat\"><svg width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">", w, h, w, h);
  for (size_t i = 0; i < k; ++i) {
    if (labels) {
      double y = lab + cell * (double(i) + 0.5) + 3;
      s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"ax\" text-anchor=\"end\">{}</text>",
                       lab - 3, y, Esc(Short(names[i], 12)));
      double x = lab + cell * (double(i) + 0.5) + 3;
      s += fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" class=\"ax\" transform=\"rotate(-60 {:.1f} {})\">{}</text>",
          x, lab - 3, x, lab - 3, Esc(Short(names[i], 12)));
    }
    for (size_t j = 0; j < k; ++j) {
      double v = m[i * k + j];
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\">"
          "<title>{} / {}: {:.3f}</title></rect>",
          lab + cell * double(j), lab + cell * double(i), cell, cell,
          diff ? SequentialColor(v) : DivergingColor(v), Esc(names[i]), Esc(names[j]), v);
    }
  }
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
      "stroke=\"#999\"/>",
      lab, lab, cell * double(k), cell * double(k));
  s += "</svg><figcaption>" + Esc(title) + "</figcaption></figure>";
  return s;
}

std::string Legend(bool diff) {
  std::string s = "<svg width=\"236\" height=\"34\">";
  for (int i = 0; i < 44; ++i) {
    double v = diff ? i / 43.0 : -1 + 2 * i / 43.0;
    s += fmt::format("<rect x=\"{}\" y=\"4\" width=\"5\" height=\"12\" fill=\"{}\"/>", 4 + 5 * i,
                     diff ? SequentialColor(v) : DivergingColor(v));
  }
  if (diff)
    s += "<text x=\"4\" y=\"30\" class=\"ax\">0</text><text x=\"224\" y=\"30\" class=\"ax\" "
         "text-anchor=\"end\">1</text>";
  else
    s += "<text x=\"4\" y=\"30\" class=\"ax\">-1</text><text x=\"114\" y=\"30\" class=\"ax\" "
         "text-anchor=\"middle\">0</text><text x=\"224\" y=\"30\" class=\"ax\" "
         "text-anchor=\"end\">1</text>";
  return s + "</svg>";
}

struct Box {
  double x0, x1, y0, y1;
};

Box PointsBox(const std::vector<float>& a, const std::vector<float>& b) {
  // Robust extent: 0.5% / 99.5% quantiles of both sets, so that a few outliers
  // do not squash the cloud.
  std::vector<float> xs, ys;
  for (const auto* v : {&a, &b})
    for (size_t i = 0; i + 1 < v->size(); i += 2) {
      xs.push_back((*v)[i]);
      ys.push_back((*v)[i + 1]);
    }
  if (xs.empty()) return {-1, 1, -1, 1};
  std::sort(xs.begin(), xs.end());
  std::sort(ys.begin(), ys.end());
  auto q = [](const std::vector<float>& v, double p) {
    return double(v[size_t(p * double(v.size() - 1))]);
  };
  Box bx{q(xs, 0.005), q(xs, 0.995), q(ys, 0.005), q(ys, 0.995)};
  double px = (bx.x1 - bx.x0) * 0.06 + 1e-9, py = (bx.y1 - bx.y0) * 0.06 + 1e-9;
  return {bx.x0 - px, bx.x1 + px, bx.y0 - py, bx.y1 + py};
}

std::string Scatter(const std::string& title, const std::vector<float>& pts, const char* color,
                    const Box& bx) {
  const int w = 300, h = 260, l = 30, t = 8, pw = w - l - 8, ph = h - t - 30;
  std::string s = fmt::format(
      "<figure><svg width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">"
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#ccc\"/>",
      w, h, w, h, l, t, pw, ph);
  auto X = [&](double x) { return l + (x - bx.x0) / (bx.x1 - bx.x0) * pw; };
  auto Y = [&](double y) { return t + ph - (y - bx.y0) / (bx.y1 - bx.y0) * ph; };
  if (bx.x0 < 0 && bx.x1 > 0)
    s += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{}\" y2=\"{}\" stroke=\"#ddd\"/>",
                     X(0), X(0), t, t + ph);
  if (bx.y0 < 0 && bx.y1 > 0)
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>", l,
                     l + pw, Y(0), Y(0));
  s += fmt::format("<g fill=\"{}\" fill-opacity=\"0.45\">", color);
  for (size_t i = 0; i + 1 < pts.size(); i += 2) {
    double x = pts[i], y = pts[i + 1];
    if (x < bx.x0 || x > bx.x1 || y < bx.y0 || y > bx.y1) continue;
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"1.8\"/>", X(x), Y(y));
  }
  s += "</g>";
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"middle\">PC1</text>"
      "<text x=\"10\" y=\"{}\" class=\"ax\" transform=\"rotate(-90 10 {})\" "
      "text-anchor=\"middle\">PC2</text>",
      l + pw / 2, h - 10, t + ph / 2, t + ph / 2);
  s += "</svg><figcaption>" + Esc(title) + "</figcaption></figure>";
  return s;
}

// Histograms of distances to the closest training record.
std::string DcrChart(const PrivacyResult& p) {
  const int w = 420, h = 220, l = 40, t = 10, pw = w - l - 10, ph = h - t - 40, nb = 30;
  float vmax = 1e-6f;
  for (float d : p.dcr_synthetic) vmax = std::max(vmax, d);
  for (float d : p.dcr_holdout) vmax = std::max(vmax, d);
  auto hist = [&](const std::vector<float>& v) {
    std::vector<double> h(nb, 0.0);
    for (float d : v) h[size_t(std::min(nb - 1, int(d / vmax * nb)))] += 1;
    for (double& x : h) x /= std::max<double>(1, double(v.size()));
    return h;
  };
  std::vector<double> hs = hist(p.dcr_synthetic), hh = hist(p.dcr_holdout);
  double ymax = 1e-9;
  for (int i = 0; i < nb; ++i) ymax = std::max({ymax, hs[size_t(i)], hh[size_t(i)]});
  std::string s = fmt::format("<svg width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">", w, h, w, h);
  for (int k = 0; k <= 2; ++k) {
    double y = t + ph - ph * k / 2.0;
    s += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/><text x=\"{}\" "
        "y=\"{:.1f}\" class=\"ax\" text-anchor=\"end\">{:.0f}%</text>",
        l, l + pw, y, y, l - 3, y + 3, 100 * ymax * k / 2.0);
  }
  const double bw = double(pw) / nb;
  for (int i = 0; i < nb; ++i) {
    double x = l + bw * i;
    double a = ph * hs[size_t(i)] / ymax, b = ph * hh[size_t(i)] / ymax;
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
        "fill-opacity=\"0.75\"><title>synthetic {:.1f}%</title></rect>",
        x, t + ph - a, bw * 0.5, a, kSynth, 100 * hs[size_t(i)]);
    if (!p.dcr_holdout.empty())
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
          "fill-opacity=\"0.75\"><title>holdout {:.1f}%</title></rect>",
          x + bw * 0.5, t + ph - b, bw * 0.5, b, kHoldout, 100 * hh[size_t(i)]);
  }
  for (int k = 0; k <= 4; ++k)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"ax\" text-anchor=\"{}\">{:.3f}</text>",
                     l + pw * k / 4.0, t + ph + 14, k == 4 ? "end" : "middle", vmax * k / 4.0);
  s += fmt::format(
      "<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#888\"/><text x=\"{}\" y=\"{}\" "
      "class=\"ax\" text-anchor=\"middle\">distance to the closest training record</text></svg>",
      l, l + pw, t + ph, t + ph, l + pw / 2, h - 6);
  return s;
}

std::string RocChart(const PrivacyResult& p) {
  const int w = 240, h = 240, l = 34, t = 8, pw = w - l - 10, ph = h - t - 34;
  std::string s = fmt::format(
      "<svg width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\"><rect x=\"{}\" y=\"{}\" "
      "width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#ccc\"/><line x1=\"{}\" y1=\"{}\" "
      "x2=\"{}\" y2=\"{}\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>",
      w, h, w, h, l, t, pw, ph, l, t + ph, l + pw, t);
  std::string pts;
  for (size_t i = 0; i + 1 < p.mia_roc.size(); i += 2)
    pts += fmt::format("{:.1f},{:.1f} ", l + p.mia_roc[i] * pw, t + ph - p.mia_roc[i + 1] * ph);
  s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#c62828\" stroke-width=\"2\"/>",
                   pts);
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"middle\">false positive rate</text>"
      "<text x=\"10\" y=\"{}\" class=\"ax\" text-anchor=\"middle\" transform=\"rotate(-90 10 "
      "{})\">true positive rate</text><text x=\"{}\" y=\"{}\" class=\"ax\">AUC {:.3f}</text>"
      "</svg>",
      l + pw / 2, h - 8, t + ph / 2, t + ph / 2, l + pw - 70, t + ph - 8, p.mia_auc);
  return s;
}

std::string SectionRow(const char* name, const SectionScore& s, const SectionScore* base,
                       const char* what) {
  if (!s.available)
    return fmt::format(
        "<tr><td>{}</td><td colspan=\"4\" class=\"muted\">not available ({})"
        "</td></tr>",
        name, what);
  std::string b = base && base->available ? fmt::format("{:.1f}", base->score) : "";
  return fmt::format(
      "<tr><td>{}</td><td class=\"num\"><b>{:.1f}</b></td><td>{}</td><td class=\"num\">{:.4f}"
      "</td><td class=\"num\">{}</td></tr>",
      name, s.score, ScoreBar(s.score), s.distance, b);
}

const char* kStyle = R"(
body{font-family:-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;margin:0;
 background:#f5f6f8;color:#222;line-height:1.4}
main{max-width:1180px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:24px;margin:8px 0 2px}h2{font-size:19px;margin:28px 0 8px;border-bottom:2px solid #ddd;
 padding-bottom:4px}
.meta{color:#555;font-size:13px}.muted{color:#888}
.verdict{display:flex;gap:22px;align-items:center;background:#fff;border-radius:10px;padding:16px 20px;
 box-shadow:0 1px 3px rgba(0,0,0,.12);margin-top:12px}
.verdict .grade{font-size:22px;font-weight:700}
.verdict p{margin:6px 0 0;font-size:15px}
.pill{display:inline-block;padding:2px 10px;border-radius:12px;color:#fff;font-weight:600;font-size:13px}
.warn{background:#fff4e5;border-left:4px solid #ef6c00;padding:8px 12px;margin:12px 0;font-size:14px}
table{border-collapse:collapse;background:#fff;font-size:14px}
td,th{padding:5px 10px;border-bottom:1px solid #eee;text-align:left}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(350px,1fr));gap:12px}
.card{background:#fff;border-radius:8px;padding:8px 10px;box-shadow:0 1px 2px rgba(0,0,0,.1)}
.card h3{font-size:14px;margin:0 0 2px;display:flex;justify-content:space-between}
.card .sub{font-size:12px;color:#666}
.ax{font-size:10px;fill:#555}
figure{margin:0;display:inline-block;vertical-align:top;background:#fff;border-radius:8px;padding:8px;
 box-shadow:0 1px 2px rgba(0,0,0,.1);margin:0 10px 10px 0}
figcaption{font-size:13px;text-align:center;color:#444}
.key{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin:0 4px 0 10px}
.figs{display:flex;flex-wrap:wrap;align-items:flex-start}
.note{font-size:13px;color:#444}
)";

// The document head and the line of sources.
void AppendHead(const EvalReport& r, std::string* out) {
  *out +=
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>datasynth evaluation: " +
      Esc(r.synthetic_source) + "</title><style>" + kStyle + "</style></head><body><main>\n";
  *out += "<h1>Synthetic data quality and privacy report</h1>";
  *out += fmt::format(
      "<div class=\"meta\">real (training): <b>{}</b> ({} rows) &middot; synthetic: <b>{}</b> "
      "({} rows)",
      Esc(r.real_source), r.real_rows, Esc(r.synthetic_source), r.synthetic_rows);
  if (!r.holdout_source.empty())
    *out += fmt::format(" &middot; holdout: <b>{}</b> ({} rows)", Esc(r.holdout_source),
                        r.holdout_rows);
  *out +=
      fmt::format(" &middot; {} columns evaluated &middot; datasynth {} &middot; {:.2f} s</div>\n",
                  r.columns.size(), DS_VERSION, r.seconds);
}

// The verdict: gauge, grade, privacy pill, warnings.
void AppendVerdict(const EvalReport& r, std::string* out) {
  *out += "<section class=\"verdict\" id=\"verdict\">" + Gauge(r.quality.overall, 120) + "<div>";
  *out += fmt::format(
      "<div class=\"grade\" style=\"color:{}\">Synthetic quality score: {:.0f} / 100 "
      "&mdash; {}</div>",
      GradeColor(r.quality.overall), r.quality.overall, Esc(r.quality.grade));
  if (r.privacy.available) {
    const char* color = r.privacy.verdict == "low risk" ? "#2e7d32"
                        : r.privacy.verdict == "review" ? "#ef6c00"
                                                        : "#c62828";
    *out += fmt::format(
        "<div style=\"margin-top:4px\">Privacy: <span class=\"pill\" "
        "style=\"background:{}\">{}</span></div>",
        color, Esc(r.privacy.verdict));
  }
  *out += "<p>" + Esc(r.verdict) + "</p></div></section>\n";
  for (const std::string& w : r.warnings) *out += "<div class=\"warn\">" + Esc(w) + "</div>\n";
}

// The section scores table.
void AppendScores(const EvalReport& r, std::string* out) {
  *out +=
      "<h2>Quality scores</h2><table><tr><th>part</th><th class=\"num\">score</th><th></th>"
      "<th class=\"num\">distance</th><th class=\"num\">holdout (ceiling)</th></tr>";
  const QualitySummary* base = r.has_holdout_baseline ? &r.holdout_baseline : nullptr;
  *out += SectionRow("Field distribution stability", r.quality.distribution,
                     base ? &base->distribution : nullptr, "no columns");
  *out +=
      SectionRow("Field correlation stability", r.quality.correlation,
                 base ? &base->correlation : nullptr, "fewer than 2 numeric/categorical columns");
  *out += SectionRow("Deep structure stability", r.quality.deep_structure,
                     base ? &base->deep_structure : nullptr, "no numeric/categorical columns");
  *out += fmt::format(
      "<tr><td><b>Overall</b></td><td class=\"num\"><b>{:.1f}</b></td><td>{}</td><td></td>"
      "<td class=\"num\">{}</td></tr></table>\n",
      r.quality.overall, ScoreBar(r.quality.overall),
      base ? fmt::format("{:.1f}", base->overall) : "");
}

// The column distributions, worst first.
void AppendColumns(const EvalReport& r, std::string* out) {
  *out += fmt::format(
      "<h2>Column distributions</h2><p class=\"note\">Share of rows per value or bin, "
      "<span class=\"key\" style=\"background:{}\"></span>real <span class=\"key\" "
      "style=\"background:{}\"></span>synthetic. Columns sorted from the lowest score. "
      "Score = 100 &times; (1 &minus; Jensen-Shannon distance).</p><div class=\"grid\">",
      kReal, kSynth);
  std::vector<const ColumnScore*> cols;
  for (const ColumnScore& c : r.column_scores) cols.push_back(&c);
  std::stable_sort(cols.begin(), cols.end(),
                   [](const ColumnScore* a, const ColumnScore* b) { return a->score < b->score; });
  for (const ColumnScore* c : cols) {
    std::string extra;
    if (c->ks_complement >= 0)
      extra += fmt::format(" &middot; KSComplement {:.3f}", c->ks_complement);
    if (c->tv_complement >= 0)
      extra += fmt::format(" &middot; TVComplement {:.3f}", c->tv_complement);
    if (c->missing_real || c->missing_synthetic)
      extra += fmt::format(" &middot; missing {} / {}", c->missing_real, c->missing_synthetic);
    if (c->invalid_synthetic)
      extra += fmt::format(" &middot; <b>invalid {}</b>", c->invalid_synthetic);
    if (c->unseen_synthetic)
      extra += fmt::format(" &middot; unseen values {}", c->unseen_synthetic);
    *out += fmt::format(
        "<div class=\"card\"><h3><span title=\"{0}\">{1} <span class=\"muted\">({2})</span></span>"
        "<span style=\"color:{3}\">{4:.1f}</span></h3><div class=\"sub\">JS distance {5:.4f}{6}"
        "</div>{7}</div>\n",
        Esc(c->name), Esc(Short(c->name, 30)), ColumnKindName(c->type), GradeColor(c->score),
        c->score, c->js_distance, extra, BarChart(c->bins));
  }
  *out += "</div>\n";
}

// The association matrices and the largest differences.
void AppendCorrelations(const EvalReport& r, std::string* out) {
  *out += "<h2>Correlations</h2>";
  const size_t k = r.matrix_columns.size();
  if (k >= 2) {
    *out +=
        "<p class=\"note\">Mixed association matrix: Pearson r between numeric columns, "
        "Theil's U (row given column) between categorical columns, correlation ratio between "
        "numeric and categorical columns. Text columns are left out.</p><div class=\"figs\">";
    *out += Heatmap("real", r.matrix_columns, r.corr_real, false);
    *out += Heatmap("synthetic", r.matrix_columns, r.corr_synthetic, false);
    std::vector<double> d(k * k);
    for (size_t i = 0; i < k * k; ++i) d[i] = std::fabs(r.corr_real[i] - r.corr_synthetic[i]);
    *out += Heatmap("|real - synthetic|", r.matrix_columns, d, true);
    *out +=
        "</div><div>association " + Legend(false) + " &nbsp; difference " + Legend(true) + "</div>";
    std::vector<const PairScore*> pairs;
    for (const PairScore& p : r.pair_scores) pairs.push_back(&p);
    std::stable_sort(pairs.begin(), pairs.end(), [](const PairScore* a, const PairScore* b) {
      return a->abs_diff > b->abs_diff;
    });
    *out +=
        "<h3 style=\"font-size:15px\">Largest differences</h3><table><tr><th>column a</th>"
        "<th>column b</th><th>measure</th><th class=\"num\">real</th><th class=\"num\">"
        "synthetic</th><th class=\"num\">|diff|</th></tr>";
    for (size_t i = 0; i < pairs.size() && i < 12; ++i)
      *out += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{:.3f}</td><td class=\"num\">"
          "{:.3f}</td><td class=\"num\">{:.3f}</td></tr>",
          Esc(pairs[i]->a), Esc(pairs[i]->b), pairs[i]->kind, pairs[i]->real, pairs[i]->synthetic,
          pairs[i]->abs_diff);
    *out += "</table>\n";
  } else {
    *out += "<p class=\"muted\">Fewer than two numeric or categorical columns.</p>";
  }
}

// The PCA projections.
void AppendPca(const EvalReport& r, std::string* out) {
  *out += "<h2>Deep structure (PCA)</h2>";
  if (r.quality.deep_structure.available) {
    *out += fmt::format(
        "<p class=\"note\">Both tables projected on the first two principal components of the "
        "real data ({} features: numeric columns z-scored, frequent categories one-hot). "
        "PC1 explains {:.1f}% and PC2 {:.1f}% of the real variance. Jensen-Shannon distance of "
        "the projections: PC1 {:.4f}, PC2 {:.4f}.</p><div class=\"figs\">",
        r.pca.features, 100 * r.pca.explained_variance_ratio[0],
        100 * r.pca.explained_variance_ratio[1], r.pca.js_distance[0], r.pca.js_distance[1]);
    Box bx = PointsBox(r.pca.real_points, r.pca.synthetic_points);
    *out += Scatter("real", r.pca.real_points, kReal, bx);
    *out += Scatter("synthetic", r.pca.synthetic_points, kSynth, bx);
    *out += "</div>\n";
  } else {
    *out += "<p class=\"muted\">No numeric or categorical columns.</p>";
  }
}

// The privacy checks and charts.
void AppendPrivacy(const EvalReport& r, std::string* out) {
  *out += "<h2>Privacy</h2>";
  const PrivacyResult& p = r.privacy;
  if (p.available) {
    *out +=
        "<table><tr><th>check</th><th class=\"num\">synthetic</th><th class=\"num\">holdout "
        "(baseline)</th></tr>";
    *out += fmt::format(
        "<tr><td>rows identical to a training row</td><td class=\"num\">{} ({:.2f}%)</td>"
        "<td class=\"num\">{}</td></tr>",
        p.exact_copies, 100 * p.exact_copy_share,
        p.has_holdout
            ? fmt::format("{} ({:.2f}%)", p.holdout_exact_copies, 100 * p.holdout_exact_copy_share)
            : "");
    *out += fmt::format(
        "<tr><td>median distance to the closest training row</td><td class=\"num\">{:.4f}</td>"
        "<td class=\"num\">{}</td></tr>",
        p.dcr_synthetic_median, p.has_holdout ? fmt::format("{:.4f}", p.dcr_holdout_median) : "");
    *out += fmt::format(
        "<tr><td>5th percentile of that distance</td><td class=\"num\">{:.4f}</td>"
        "<td class=\"num\">{}</td></tr>",
        p.dcr_synthetic_p05, p.has_holdout ? fmt::format("{:.4f}", p.dcr_holdout_p05) : "");
    if (p.has_holdout)
      *out += fmt::format(
          "<tr><td>synthetic rows closer than the holdout's 5th percentile</td>"
          "<td class=\"num\">{:.1f}%</td><td class=\"num\">5% by definition</td></tr>",
          100 * p.share_closer_than_holdout_p05);
    *out += fmt::format(
        "<tr><td>synthetic rows repeating another synthetic row</td><td class=\"num\">{}</td>"
        "<td></td></tr>",
        p.synthetic_duplicates);
    if (p.mia_available)
      *out += fmt::format(
          "<tr><td>membership inference AUC (0.5 = no leak) / advantage</td><td class=\"num\">"
          "{:.3f} / {:.3f}</td><td></td></tr>",
          p.mia_auc, p.mia_advantage);
    *out += "</table>";
    *out += fmt::format(
        "<div class=\"figs\" style=\"margin-top:10px\"><figure>{}<figcaption><span class=\"key\" "
        "style=\"background:{}\"></span>synthetic ({} rows sampled){}</figcaption></figure>",
        DcrChart(p), kSynth, p.dcr_sample_synthetic,
        p.has_holdout ? fmt::format(" <span class=\"key\" style=\"background:{}\"></span>holdout "
                                    "({} rows)",
                                    kHoldout, p.dcr_sample_holdout)
                      : "");
    if (p.mia_available)
      *out += fmt::format(
          "<figure>{}<figcaption>Membership inference ROC<br>{} training vs {} holdout rows,<br>"
          "score = closeness to the nearest synthetic row</figcaption></figure>",
          RocChart(p), p.mia_members, p.mia_non_members);
    *out += "</div>";
    *out +=
        "<p class=\"note\">Distance: Gower, the mean over columns of |a &minus; b| / range "
        "(numeric, capped at 1) or 0/1 mismatch (other columns). Synthetic rows that sit much "
        "closer to training rows than fresh real (holdout) rows do are likely memorised.";
    if (!p.has_holdout) *out += " Pass a holdout to compare against fresh real rows.";
    *out += "</p>\n";
  } else {
    *out += "<p class=\"muted\">Privacy checks were not run.</p>";
  }
}

// How the scores are computed.
void AppendMethod(const EvalReport& r, std::string* out) {
  *out += fmt::format(
      "<h2>Method</h2><ul class=\"note\"><li>Field distribution stability: mean over columns of "
      "the Jensen-Shannon distance d (base 2) of real vs synthetic histograms ({} quantile bins "
      "or one per value); score = 100 (1 &minus; mean d).</li><li>Field correlation stability: "
      "d = mean absolute difference of the association matrices; score = 100 max(0, 1 &minus; "
      "d / {:.2f}).</li><li>Deep structure stability: 2-component PCA fitted on the real data; "
      "d = mean Jensen-Shannon distance of the two projected components; score = 100 (1 &minus; "
      "d).</li><li>Overall = mean of the available parts. Grades: Excellent &ge; 80, Good &ge; "
      "60, Moderate &ge; 40, Poor &ge; 20, else Very poor.</li></ul>\n",
      r.bins_used, r.options.corr_full_scale);
}

}  // namespace

std::string ReportToHtml(const EvalReport& r) {
  std::string h;
  h.reserve(1 << 20);
  AppendHead(r, &h);
  AppendVerdict(r, &h);
  AppendScores(r, &h);
  AppendColumns(r, &h);
  AppendCorrelations(r, &h);
  AppendPca(r, &h);
  AppendPrivacy(r, &h);
  AppendMethod(r, &h);
  h += "</main></body></html>\n";
  return h;
}

}  // namespace ds
