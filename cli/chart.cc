#include "cli/chart.h"


#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace stepcast::html {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Tableau 10 (Tableau's default categorical palette since 2016; chosen for colour-blind
// separation): blue, orange, red, teal, green, yellow, purple, pink, brown, grey.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

// A unique id prefix per chart in this process (clip paths, gradients).
std::string NextId(const char* kind) {
  static std::atomic<int> n{0};
  return absl::StrCat(kind, ++n);
}

// Relative luminance (WCAG 2.x) of "#rrggbb", to pick black or white text on a fill.
double Luminance(const std::string& hex) {
  if (hex.size() != 7 || hex[0] != '#') return 1;
  auto channel = [&](int i) {
    const double c = std::stoi(hex.substr(1 + 2 * i, 2), nullptr, 16) / 255.0;
    return c <= 0.03928 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2);
}
const char* TextOn(const std::string& fill) { return Luminance(fill) > 0.3 ? "#111" : "#fff"; }

std::string F(double v) { return absl::StrFormat("%.1f", v); }

// Viridis (matplotlib's default sequential map, perceptually uniform) at 5 stops, interpolated.
std::string Viridis(double t) {
  static constexpr double kStops[5][3] = {
      {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = std::clamp(t, 0.0, 1.0) * 4;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  int rgb[3];
  for (int c = 0; c < 3; ++c) rgb[c] = static_cast<int>(std::lround(kStops[i][c] + f * (kStops[i + 1][c] - kStops[i][c])));
  return absl::StrFormat("#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

// Text that fits in about `chars` characters, with an ellipsis.
std::string Clip(const std::string& s, size_t chars) {
  if (s.size() <= chars) return s;
  size_t cut = chars - 1;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
  return s.substr(0, cut) + "\xE2\x80\xA6";
}

// Approximate width of a label in px at 12 px sans-serif (DejaVu Sans / Liberation Sans metrics:
// capitals about 8.5 px, other characters about 6.8 px).
double TextWidth(const std::string& s) {
  double w = 0;
  for (char c : s) w += (c >= 'A' && c <= 'Z') ? 8.5 : 6.8;
  return w;
}

// One axis mapped onto pixels.
struct Scale {
  double lo = 0, hi = 1;
  bool log = false;
  double px0 = 0, px1 = 1;
  double T(double v) const {
    return log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
  }
  double operator()(double v) const { return px0 + T(v) * (px1 - px0); }
  bool Drawable(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

struct Tick {
  double v;
  bool major;  // gridline + label
};

// Linear ticks: 1, 2 or 5 x 10^k steps, about six of them.
double NiceStep(double span) {
  const double raw = span / 6;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

// Fills in an axis range from the data: log, whole decades; linear, step multiples (from 0 when
// every value is >= 0).
void AutoRange(const Axis& axis, const std::vector<double>& data, double* lo, double* hi) {
  if (axis.min < axis.max && (!axis.log || axis.min > 0)) {
    *lo = axis.min;
    *hi = axis.max;
    return;
  }
  double dmin = std::numeric_limits<double>::infinity(), dmax = -dmin;
  for (double v : data) {
    if (!std::isfinite(v) || (axis.log && v <= 0)) continue;
    dmin = std::min(dmin, v);
    dmax = std::max(dmax, v);
  }
  if (axis.log) {
    if (!(dmin <= dmax)) dmin = 1, dmax = 10;
    *lo = std::pow(10, std::floor(std::log10(dmin) + 1e-9));
    *hi = std::pow(10, std::ceil(std::log10(dmax) - 1e-9));
    if (*hi <= *lo) *hi = *lo * 10;
    return;
  }
  if (!(dmin <= dmax)) dmin = 0, dmax = 1;
  if (dmin >= 0) dmin = 0;
  if (dmax <= dmin) dmax = dmin + 1;
  const double step = NiceStep(dmax - dmin);
  *lo = std::floor(dmin / step) * step;
  *hi = std::ceil(dmax / step - 1e-9) * step;
}

// A tick label: Number() on linear axes; on log axes outside [1e-3, 1e4) the short exponent form
// ("1e6", "2e-5"), which stays narrow at one label per decade.
std::string TickLabel(const Scale& s, double v) {
  const double a = std::abs(v);
  if (!s.log || a == 0 || (a >= 1e-3 && a < 1e4)) return Number(v);
  return absl::StrReplaceAll(absl::StrFormat("%g", v), {{"e+0", "e"}, {"e+", "e"}, {"e-0", "e-"}});
}

std::vector<Tick> Ticks(const Scale& s) {
  std::vector<Tick> out;
  if (s.log) {
    const int k0 = static_cast<int>(std::floor(std::log10(s.lo) + 1e-9));
    const int k1 = static_cast<int>(std::ceil(std::log10(s.hi) - 1e-9));
    const bool few = k1 - k0 <= 2;
    for (int k = k0; k <= k1; ++k) {
      for (int m = 1; m <= 9; ++m) {
        const double v = m * std::pow(10, k);
        if (v < s.lo * (1 - 1e-9) || v > s.hi * (1 + 1e-9)) continue;
        out.push_back({v, m == 1 || (few && (m == 2 || m == 5))});
      }
    }
    return out;
  }
  const double step = NiceStep(s.hi - s.lo);
  for (double v = std::ceil(s.lo / step - 1e-9) * step; v <= s.hi + step * 1e-9; v += step) {
    out.push_back({std::abs(v) < step * 1e-9 ? 0 : v, true});
  }
  return out;
}

// Marker of a series: circle, square, triangle, diamond (the shape changes after each full
// round of the palette, so 40 series stay distinguishable).
std::string Marker(size_t shape, double x, double y, const std::string& colour, bool hollow, const std::string& title) {
  const std::string paint = hollow ? absl::StrFormat(R"(fill="#fff" stroke="%s" stroke-width="1.8")", colour)
                                   : absl::StrFormat(R"(fill="%s" fill-opacity="0.85" stroke="#fff" stroke-width="0.8")", colour);
  const std::string cls = hollow ? "pt hollow" : "pt";
  const std::string t = absl::StrCat("<title>", Escape(title), "</title>");
  const double r = 4.5;
  switch (shape % 4) {
    case 0:
      return absl::StrFormat(R"(<circle class="%s" cx="%s" cy="%s" r="%s" %s>%s</circle>)", cls, F(x), F(y), F(r), paint, t);
    case 1:
      return absl::StrFormat(R"(<rect class="%s" x="%s" y="%s" width="%s" height="%s" %s>%s</rect>)", cls, F(x - r),
                             F(y - r), F(2 * r), F(2 * r), paint, t);
    case 2:
      return absl::StrFormat(R"(<path class="%s" d="M%s %sL%s %sL%s %sZ" %s>%s</path>)", cls, F(x), F(y - 1.2 * r),
                             F(x + 1.1 * r), F(y + 0.8 * r), F(x - 1.1 * r), F(y + 0.8 * r), paint, t);
    default:
      return absl::StrFormat(R"(<path class="%s" d="M%s %sL%s %sL%s %sL%s %sZ" %s>%s</path>)", cls, F(x), F(y - 1.3 * r),
                             F(x + 1.3 * r), F(y), F(x), F(y + 1.3 * r), F(x - 1.3 * r), F(y), paint, t);
  }
}

// Fill opacity of one identity band; where bands overlap the shading adds up.
constexpr double kBandOpacity = 0.12;

std::string LegendSwatch(double x, double y, const std::string& colour, const std::string& kind, double opacity) {
  if (kind == "band") {
    return absl::StrFormat(R"(<rect x="%s" y="%s" width="18" height="10" fill="%s" fill-opacity="%.3f"/>)", F(x),
                           F(y - 5), colour, opacity);
  }
  if (kind == "line" || kind == "dashed") {
    return absl::StrFormat(R"(<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/>)", F(x), F(y),
                           F(x + 18), F(y), colour, kind == "dashed" ? R"( stroke-dasharray="5 3")" : "");
  }
  return absl::StrFormat(R"(<circle cx="%s" cy="%s" r="4.5" fill="%s"/>)", F(x + 9), F(y), colour);
}

std::string SvgOpen(int width, int height, const std::string& title) {
  return absl::StrFormat(
      R"(<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" font-family="sans-serif" font-size="12">)"
      "\n"
      R"(<text x="8" y="20" font-size="15" font-weight="600">%s</text>)"
      "\n",
      width, height, width, height, Escape(title), Escape(title));
}

// The value axis of a horizontal chart (stacked bars, the step timeline): a grid line per tick from
// just above `top` to `bottom`, its label under it, and the axis label centred below.
void DrawHorizontalAxis(const Scale& sx, double top, double bottom, const std::string& label, std::string& o) {
  for (const Tick& t : Ticks(sx)) {
    const double x = sx(t.v);
    absl::StrAppendFormat(&o, R"(<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e4e4e4"/><text x="%s" y="%s" text-anchor="middle" fill="#333">%s</text>)""\n",
                          F(x), F(top - 4), F(x), F(bottom), F(x), F(bottom + 16), Escape(Number(t.v)));
  }
  absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="middle" fill="#111">%s</text>)""\n",
                        F((sx.px0 + sx.px1) / 2), F(bottom + 33), Escape(label));
}

const std::string& SegmentColour(std::map<std::string, std::string>& by_name, const Segment& s) {
  auto it = by_name.find(s.name);
  if (it != by_name.end()) return it->second;
  return by_name.emplace(s.name, s.colour.empty() ? PaletteColour(by_name.size()) : s.colour).first->second;
}

}  // namespace

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // Control characters other than tab and newline are not allowed in HTML text.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

const char* PaletteColour(size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

std::string Number(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "n/a" : (v > 0 ? "inf" : "-inf");
  const double a = std::abs(v);
  if (a == 0) return "0";
  if (a >= 1e6 || a < 1e-3) return absl::StrFormat("%.3e", v);
  if (a >= 1000) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.4g", v);
}

namespace {

struct LegendItem {
  std::string text, colour, kind;
  double opacity = 1;
};

// The legend of an XY chart: bands (narrowest darkest), the identity line, named series,
// reference lines.
std::vector<LegendItem> XYLegend(const XYChart& c) {
  std::vector<LegendItem> legend;
  {
    std::vector<double> narrow_first = c.identity_bands;
    std::sort(narrow_first.begin(), narrow_first.end());
    for (size_t i = 0; i < narrow_first.size(); ++i) {
      // A band's own area is covered by it and every wider band.
      const double opacity = 1 - std::pow(1 - kBandOpacity, static_cast<double>(narrow_first.size() - i));
      legend.push_back({absl::StrFormat("within %.0f%%", 100 * narrow_first[i]), "#4e79a7", "band", opacity});
    }
  }
  if (c.identity_line) legend.push_back({"predicted = measured", "#333333", "line"});
  {
    // Bands nest (+-10% inside +-25%): the narrowest is covered by all of them.
    std::vector<XYChart::YBand> by_width = c.y_bands;
    std::sort(by_width.begin(), by_width.end(), [](auto& a, auto& b) { return a.hi - a.lo < b.hi - b.lo; });
    for (size_t i = 0; i < by_width.size(); ++i) {
      legend.push_back({by_width[i].label, "#4e79a7", "band",
                        1 - std::pow(1 - kBandOpacity, static_cast<double>(by_width.size() - i))});
    }
  }
  for (size_t i = 0; i < c.series.size(); ++i) {
    const auto& s = c.series[i];
    if (s.name.empty() || !s.legend) continue;
    legend.push_back({s.name, s.colour.empty() ? PaletteColour(i) : s.colour,
                      s.line ? (s.dashed ? "dashed" : "line") : "point"});
  }
  for (const auto& r : c.reference_lines) legend.push_back({r.label, r.colour, "dashed"});
  return legend;
}

// The plot area of an XY chart in pixels.
struct PlotArea {
  double left, top, right, bottom;
};

// Frame, grid lines, tick labels and axis labels.
void DrawXYAxes(const XYChart& c, const Scale& sx, const Scale& sy, const PlotArea& a, std::string& o) {
  absl::StrAppendFormat(&o, R"(<rect x="%s" y="%s" width="%s" height="%s" fill="#fcfcfc" stroke="#999"/>)""\n", F(a.left),
                        F(a.top), F(a.right - a.left), F(a.bottom - a.top));
  for (const Tick& t : Ticks(sx)) {
    const double x = sx(t.v);
    absl::StrAppendFormat(&o, R"(<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>)", F(x), F(a.top), F(x), F(a.bottom),
                          t.major ? "#dddddd" : "#f0f0f0");
    if (t.major) {
      absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="middle" fill="#333">%s</text>)", F(x), F(a.bottom + 16),
                            Escape(TickLabel(sx, t.v)));
    }
    o += "\n";
  }
  for (const Tick& t : Ticks(sy)) {
    const double y = sy(t.v);
    absl::StrAppendFormat(&o, R"(<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>)", F(a.left), F(y), F(a.right), F(y),
                          t.major ? "#dddddd" : "#f0f0f0");
    if (t.major) {
      absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="end" fill="#333">%s</text>)", F(a.left - 6), F(y + 4),
                            Escape(TickLabel(sy, t.v)));
    }
    o += "\n";
  }
  absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="middle" fill="#111">%s</text>)""\n", F((a.left + a.right) / 2),
                        F(a.bottom + 38), Escape(c.x.label));
  absl::StrAppendFormat(&o, R"~(<text transform="translate(%s %s) rotate(-90)" text-anchor="middle" fill="#111">%s</text>)~""\n",
                        F(18), F((a.top + a.bottom) / 2), Escape(c.y.label));
}

// Identity bands (widest first, so the narrower one shades darker on top), y bands, y = x and
// the reference lines.
void DrawXYGuides(const XYChart& c, const Scale& sx, const Scale& sy, const PlotArea& a, std::string& o) {
  std::vector<double> bands = c.identity_bands;
  std::sort(bands.rbegin(), bands.rend());
  const double x0 = sx.lo, x1 = sx.hi;
  for (double f : bands) {
    absl::StrAppendFormat(&o, R"(<path class="band" d="M%s %sL%s %sL%s %sL%s %sZ" fill="#4e79a7" fill-opacity="%.3f"><title>%s</title></path>)""\n",
                          F(sx(x0)), F(sy(x0 * (1 - f))), F(sx(x1)), F(sy(x1 * (1 - f))), F(sx(x1)), F(sy(x1 * (1 + f))),
                          F(sx(x0)), F(sy(x0 * (1 + f))), kBandOpacity, Escape(absl::StrFormat("predicted within %.0f%% of measured", 100 * f)));
  }
  for (const auto& b : c.y_bands) {
    if (!sy.Drawable(b.lo) || !sy.Drawable(b.hi)) continue;
    absl::StrAppendFormat(&o, R"(<rect class="band" x="%s" y="%s" width="%s" height="%s" fill="#4e79a7" fill-opacity="%.3f"><title>%s</title></rect>)""\n",
                          F(a.left), F(sy(b.hi)), F(a.right - a.left), F(sy(b.lo) - sy(b.hi)), kBandOpacity, Escape(b.label));
  }
  if (c.identity_line) {
    absl::StrAppendFormat(&o, R"(<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333" stroke-width="1"/>)""\n", F(sx(x0)),
                          F(sy(x0)), F(sx(x1)), F(sy(x1)));
  }
  for (const auto& r : c.reference_lines) {
    if (!sy.Drawable(r.y)) continue;
    absl::StrAppendFormat(&o, R"(<line class="ref" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="6 4"><title>%s</title></line>)""\n",
                          F(a.left), F(sy(r.y)), F(a.right), F(sy(r.y)), r.colour,
                          Escape(absl::StrCat(r.label, ": ", Number(r.y))));
  }
}

// Curves under the points, then the points.
void DrawXYSeries(const XYChart& c, const Scale& sx, const Scale& sy, std::string& o) {
  for (size_t i = 0; i < c.series.size(); ++i) {
    const auto& s = c.series[i];
    if (!s.line) continue;
    const std::string colour = s.colour.empty() ? PaletteColour(i) : s.colour;
    std::string d;
    for (const auto& p : s.points) {
      if (!sx.Drawable(p.x) || !sy.Drawable(p.y)) continue;
      absl::StrAppend(&d, d.empty() ? "M" : "L", F(sx(p.x)), " ", F(sy(p.y)));
    }
    if (d.empty()) continue;
    absl::StrAppendFormat(&o, R"(<path class="curve" d="%s" fill="none" stroke="%s" stroke-width="2"%s><title>%s</title></path>)""\n",
                          d, colour, s.dashed ? R"( stroke-dasharray="6 4")" : "", Escape(s.name));
  }
  for (size_t i = 0; i < c.series.size(); ++i) {
    const auto& s = c.series[i];
    if (s.line) continue;
    const std::string colour = s.colour.empty() ? PaletteColour(i) : s.colour;
    for (const auto& p : s.points) {
      if (!sx.Drawable(p.x) || !sy.Drawable(p.y)) continue;
      o += Marker(i / 10, sx(p.x), sy(p.y), colour, p.hollow, p.title);
      o += "\n";
    }
  }
}

}  // namespace

std::string RenderXY(const XYChart& c) {
  // Ranges from everything drawn.
  std::vector<double> xs, ys;
  for (const auto& s : c.series) {
    for (const auto& p : s.points) {
      xs.push_back(p.x);
      ys.push_back(p.y);
    }
  }
  for (const auto& r : c.reference_lines) ys.push_back(r.y);
  for (const auto& b : c.y_bands) ys.insert(ys.end(), {b.lo, b.hi});
  Scale sx, sy;
  sx.log = c.x.log;
  sy.log = c.y.log;
  AutoRange(c.x, xs, &sx.lo, &sx.hi);
  AutoRange(c.y, ys, &sy.lo, &sy.hi);
  std::vector<LegendItem> legend = XYLegend(c);
  // The legend is as wide as its longest entry (within 150..320 px).
  double legend_w = 0;
  for (auto& item : legend) {
    item.text = Clip(item.text, 42);
    legend_w = std::max(legend_w, std::clamp(TextWidth(item.text) + 34, 150.0, 320.0));
  }
  PlotArea area{74, 36, c.width - legend_w - 18, 0};
  area.bottom = std::max(area.top + 80.0, c.height - 56.0 - 0.0);
  const double height = std::max<double>(c.height, area.top + 18 * legend.size() + 20);
  sx.px0 = area.left, sx.px1 = area.right;
  sy.px0 = area.bottom, sy.px1 = area.top;
  const std::string clip = NextId("clip");

  std::string o = SvgOpen(c.width, static_cast<int>(height), c.title);
  absl::StrAppendFormat(&o, R"(<defs><clipPath id="%s"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath></defs>)""\n",
                        clip, F(area.left), F(area.top), F(area.right - area.left), F(area.bottom - area.top));
  DrawXYAxes(c, sx, sy, area, o);
  absl::StrAppendFormat(&o, R"~(<g clip-path="url(#%s)">)~""\n", clip);
  DrawXYGuides(c, sx, sy, area, o);
  DrawXYSeries(c, sx, sy, o);
  o += "</g>\n";
  double ly = area.top + 8;
  for (const auto& item : legend) {
    const double lx = c.width - legend_w;
    o += LegendSwatch(lx, ly, item.colour, item.kind, item.opacity);
    absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" fill="#222">%s</text>)""\n", F(lx + 24), F(ly + 4), Escape(item.text));
    ly += 18;
  }
  o += "</svg>\n";
  return o;
}

std::string RenderStackedBars(const StackedBarChart& c) {
  double max_total = c.limit;
  std::map<std::string, std::string> colours;
  std::vector<std::string> names;  // legend order
  for (const auto& b : c.bars) {
    double total = 0;
    for (const auto& s : b.segments) {
      if (!(s.value > 0) || !std::isfinite(s.value)) continue;
      total += s.value;
      if (!colours.count(s.name)) names.push_back(s.name);
      SegmentColour(colours, s);
    }
    max_total = std::max(max_total, total);
  }
  Axis axis;
  Scale sx;
  AutoRange(axis, {0.0, max_total > 0 ? max_total : 1.0}, &sx.lo, &sx.hi);
  // A limit line's label sits between the title and the first bar.
  const double label_w = 240, top = c.limit > 0 ? 52 : 34, bar_h = 26, gap = 12;
  sx.px0 = label_w;
  sx.px1 = c.width - 24;
  const double bars_bottom = top + c.bars.size() * (bar_h + gap);
  // Legend rows, flowing.
  std::vector<std::pair<double, double>> legend_xy;
  double lx = 8, lrow = 0;
  for (const auto& n : names) {
    const double w = 26 + TextWidth(Clip(n, 40)) + 14;
    if (lx + w > c.width - 8 && lx > 8) lx = 8, ++lrow;
    legend_xy.emplace_back(lx, lrow);
    lx += w;
  }
  const double legend_top = bars_bottom + 56;
  const double height = legend_top + (names.empty() ? 0 : (lrow + 1) * 20) + 8;

  std::string o = SvgOpen(c.width, static_cast<int>(height), c.title);
  DrawHorizontalAxis(sx, top, bars_bottom, c.unit, o);
  for (size_t i = 0; i < c.bars.size(); ++i) {
    const Bar& b = c.bars[i];
    const double y = top + i * (bar_h + gap);
    absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="end" fill="#111">%s<title>%s</title></text>)""\n",
                          F(label_w - 8), F(y + bar_h / 2 + 4), Escape(Clip(b.label, 30)), Escape(b.label));
    double x = 0, total = 0;
    for (const auto& s : b.segments) {
      if (s.value > 0 && std::isfinite(s.value)) total += s.value;
    }
    for (const auto& s : b.segments) {
      if (!(s.value > 0) || !std::isfinite(s.value)) continue;
      const std::string& colour = SegmentColour(colours, s);
      const double px = sx(x), w = sx(x + s.value) - sx(x);
      const std::string title =
          s.title.empty() ? absl::StrFormat("%s: %s %s (%.1f%% of %s)", s.name, Number(s.value), c.unit,
                                            100 * s.value / total, Number(total))
                          : s.title;
      absl::StrAppendFormat(&o, R"(<rect class="bar" x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="#fff" stroke-width="0.6"><title>%s</title></rect>)",
                            F(px), F(y), F(std::max(w, 0.5)), F(bar_h), colour, Escape(title));
      const std::string text = Number(s.value);
      if (w > TextWidth(text) + 8) {
        absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="middle" fill="%s" pointer-events="none">%s</text>)",
                              F(px + w / 2), F(y + bar_h / 2 + 4), TextOn(colour), Escape(text));
      }
      o += "\n";
      x += s.value;
    }
    if (total > 0) {
      const double end = sx(total);
      const std::string text = Number(total);
      // Total after the bar, or inside its end when the bar reaches the right edge.
      if (end + 8 + TextWidth(text) < c.width) {
        absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" fill="#111" font-weight="600">%s</text>)""\n", F(end + 6),
                              F(y + bar_h / 2 + 4), Escape(text));
      }
    }
  }
  if (c.limit > 0) {
    const double x = sx(c.limit);
    absl::StrAppendFormat(&o, R"(<line class="limit" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#c00" stroke-width="2" stroke-dasharray="6 4"><title>%s</title></line>)""\n",
                          F(x), F(top - 8), F(x), F(bars_bottom - gap + 4),
                          Escape(absl::StrCat(c.limit_label, ": ", Number(c.limit), " ", c.unit)));
    absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="end" fill="#c00">%s</text>)""\n", F(x - 4), F(top - 10),
                          Escape(c.limit_label));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const auto [x, row] = legend_xy[i];
    const double y = legend_top + row * 20;
    absl::StrAppendFormat(&o, R"(<rect x="%s" y="%s" width="18" height="12" fill="%s"/><text x="%s" y="%s" fill="#222">%s</text>)""\n",
                          F(x), F(y - 6), colours[names[i]], F(x + 24), F(y + 4), Escape(Clip(names[i], 40)));
  }
  o += "</svg>\n";
  return o;
}

std::string RenderHeatMap(const HeatMap& h) {
  double vmin = std::numeric_limits<double>::infinity(), vmax = -vmin;
  for (const auto& row : h.values) {
    for (double v : row) {
      if (std::isfinite(v)) vmin = std::min(vmin, v), vmax = std::max(vmax, v);
    }
  }
  const double left = 110, top = 58;
  const double cell_w = h.columns.empty() ? 80 : std::min(110.0, (h.width - left - 20) / h.columns.size());
  const double cell_h = 34;
  const double grid_bottom = top + cell_h * h.rows.size();
  const double height = grid_bottom + 76;
  std::string o = SvgOpen(h.width, static_cast<int>(height), h.title);
  absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="middle" fill="#111">%s</text>)""\n",
                        F(left + cell_w * h.columns.size() / 2), F(top - 26), Escape(h.x_label));
  absl::StrAppendFormat(&o, R"~(<text transform="translate(%s %s) rotate(-90)" text-anchor="middle" fill="#111">%s</text>)~""\n",
                        F(16), F((top + grid_bottom) / 2), Escape(h.y_label));
  for (size_t j = 0; j < h.columns.size(); ++j) {
    absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="middle" fill="#333">%s</text>)""\n",
                          F(left + (j + 0.5) * cell_w), F(top - 8), Escape(Clip(h.columns[j], 14)));
  }
  std::string chosen;
  for (size_t i = 0; i < h.rows.size(); ++i) {
    const double y = top + i * cell_h;
    absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="end" fill="#333">%s</text>)""\n", F(left - 8),
                          F(y + cell_h / 2 + 4), Escape(Clip(h.rows[i], 14)));
    for (size_t j = 0; j < h.columns.size(); ++j) {
      const double x = left + j * cell_w;
      const double v = i < h.values.size() && j < h.values[i].size() ? h.values[i][j] : kNaN;
      const std::string title = i < h.titles.size() && j < h.titles[i].size() ? h.titles[i][j] : "";
      if (!std::isfinite(v)) {
        absl::StrAppendFormat(&o, R"(<rect class="empty" x="%s" y="%s" width="%s" height="%s" fill="#eeeeee" stroke="#fff" stroke-width="2"><title>%s</title></rect>)""\n",
                              F(x), F(y), F(cell_w), F(cell_h), Escape(title.empty() ? "no layout" : title));
        continue;
      }
      double t = vmax > vmin ? (v - vmin) / (vmax - vmin) : 1;
      if (!h.higher_is_better) t = 1 - t;
      const std::string fill = Viridis(t);
      const bool is_chosen = static_cast<int>(i) == h.chosen_row && static_cast<int>(j) == h.chosen_column;
      absl::StrAppendFormat(&o, R"(<rect class="%s" x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="#fff" stroke-width="2"><title>%s</title></rect>)",
                            is_chosen ? "cell chosen" : "cell", F(x), F(y), F(cell_w), F(cell_h), fill,
                            Escape(title.empty() ? Number(v) : title));
      absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="middle" fill="%s" pointer-events="none">%s</text>)""\n",
                            F(x + cell_w / 2), F(y + cell_h / 2 + 4), TextOn(fill), Escape(Number(v)));
      if (is_chosen) {
        chosen = absl::StrFormat(R"(<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#d62728" stroke-width="3.5" pointer-events="none"/>)""\n",
                                 F(x + 1.5), F(y + 1.5), F(cell_w - 3), F(cell_h - 3));
      }
    }
  }
  o += chosen;
  // Colour scale.
  const std::string grad = NextId("grad");
  const double sy = grid_bottom + 22, sw = 220;
  absl::StrAppendFormat(&o, R"(<defs><linearGradient id="%s">)", grad);
  for (int k = 0; k <= 4; ++k) {
    const double t = k / 4.0;
    absl::StrAppendFormat(&o, R"(<stop offset="%s" stop-color="%s"/>)", F(100 * t) + "%",
                          Viridis(h.higher_is_better ? t : 1 - t));
  }
  o += "</linearGradient></defs>\n";
  if (vmin <= vmax) {
    absl::StrAppendFormat(&o, R"~(<rect x="%s" y="%s" width="%s" height="12" fill="url(#%s)"/>)~""\n", F(left), F(sy), F(sw), grad);
    absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" fill="#333">%s</text><text x="%s" y="%s" text-anchor="end" fill="#333">%s</text>)""\n",
                          F(left), F(sy + 26), Escape(Number(vmin)), F(left + sw), F(sy + 26), Escape(Number(vmax)));
    absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" fill="#111">%s%s</text>)""\n", F(left + sw + 12), F(sy + 10),
                          Escape(h.value_label), h.chosen_row >= 0 ? "; red outline: the chosen layout" : "");
  }
  o += "</svg>\n";
  return o;
}

std::string RenderTable(const Table& t) {
  std::string o = "<table>";
  if (!t.caption.empty()) absl::StrAppend(&o, "<caption>", Escape(t.caption), "</caption>");
  auto cls = [&](size_t j) { return j < t.numeric.size() && t.numeric[j] ? R"( class="num")" : ""; };
  o += "<thead><tr>";
  for (size_t j = 0; j < t.header.size(); ++j) absl::StrAppend(&o, "<th", cls(j), ">", Escape(t.header[j]), "</th>");
  o += "</tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < t.rows.size(); ++i) {
    o += i < t.flagged.size() && t.flagged[i] ? R"(<tr class="flag">)" : "<tr>";
    for (size_t j = 0; j < t.rows[i].size(); ++j) absl::StrAppend(&o, "<td", cls(j), ">", Escape(t.rows[i][j]), "</td>");
    o += "</tr>\n";
  }
  o += "</tbody></table>\n";
  return o;
}

// ---- the step timeline of a pipeline ----

namespace {

// One operation of a stage's list before timing.
struct OpRef {
  bool forward;
  int64_t micro_batch, chunk;
};

// get_schedule_table of Megatron-LM's schedules.py: (micro-batch, chunk) of each virtual
// micro-batch, groups of `group` micro-batches each through every chunk in turn.
std::vector<std::pair<int64_t, int64_t>> ScheduleTable(int64_t m, int64_t vpp, int64_t group) {
  std::vector<std::pair<int64_t, int64_t>> table;
  for (int64_t lo = 0; lo < m; lo += group) {
    const int64_t hi = lo + group >= m ? m : lo + group;
    for (int64_t c = 0; c < vpp; ++c) {
      for (int64_t mb = lo; mb < hi; ++mb) table.emplace_back(mb, c);
    }
  }
  return table;
}

// The ops of stage s in Megatron's order: warm-up forwards, (forward, backward) pairs, cool-down
// backwards (schedules.py; see LayOutPipeline).
std::vector<OpRef> StageOrder(const PipelineStep& p, int64_t group, int64_t s) {
  const bool interleaved = p.vpp > 1;
  const int64_t total = p.micro_batches * p.vpp;
  const int64_t warmup = std::min(total, interleaved ? (p.pp - s - 1) * 2 + (p.vpp - 1) * group : p.pp - s - 1);
  const auto table = interleaved ? ScheduleTable(p.micro_batches, p.vpp, group) : ScheduleTable(p.micro_batches, 1, 1);
  auto fwd = [&](int64_t k) { return OpRef{true, table[k].first, table[k].second}; };
  auto bwd = [&](int64_t k) { return OpRef{false, table[k].first, p.vpp - 1 - table[k].second}; };
  std::vector<OpRef> out;
  out.reserve(2 * total);
  for (int64_t k = 0; k < warmup; ++k) out.push_back(fwd(k));
  for (int64_t i = 0; i < total - warmup; ++i) {
    out.push_back(fwd(warmup + i));
    out.push_back(bwd(i));
  }
  for (int64_t k = total - warmup; k < total; ++k) out.push_back(bwd(k));
  return out;
}

absl::Status CheckPipelineStep(const PipelineStep& p, int64_t group) {
  for (const auto& [name, v] : {std::pair{"pp", p.pp}, std::pair{"vpp", p.vpp}, std::pair{"micro_batches", p.micro_batches}}) {
    if (v < 1) return absl::InvalidArgumentError(absl::StrCat("timeline: ", name, " = ", v, " must be >= 1"));
  }
  for (const auto& [name, v] :
       {std::pair{"forward_s", p.forward_s}, std::pair{"forward_comm_s", p.forward_comm_s},
        std::pair{"recompute_s", p.recompute_s}, std::pair{"backward_s", p.backward_s},
        std::pair{"weight_gradient_s", p.weight_gradient_s}, std::pair{"backward_comm_s", p.backward_comm_s},
        std::pair{"dp_comm_s", p.dp_comm_s}, std::pair{"optimizer_s", p.optimizer_s}}) {
    if (!(v >= 0) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat("timeline: ", name, " = ", v, " must be finite and >= 0"));
    }
  }
  if (p.vpp > 1) {
    // Megatron-LM schedules.py forward_backward_pipelining_with_interleaving raises the same.
    if (group < p.pp || group > p.micro_batches) {
      return absl::InvalidArgumentError(absl::StrCat("timeline: micro-batches per VPP group ", group, " must be in [PP = ",
                                                     p.pp, ", micro-batches = ", p.micro_batches, "]"));
    }
    const int64_t last = p.micro_batches % group;
    if (last > 0 && last < p.pp) {
      return absl::InvalidArgumentError(absl::StrCat("timeline: micro-batches ", p.micro_batches, " leave a last group of ",
                                                     last, " < PP = ", p.pp, " (interleaved 1F1B refuses it)"));
    }
  }
  if (2 * p.micro_batches * p.vpp * p.pp > kMaxPipelineOps) {
    return absl::InvalidArgumentError(absl::StrCat("timeline: ", 2 * p.micro_batches * p.vpp * p.pp,
                                                   " operations, more than the ", kMaxPipelineOps, " drawn"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::vector<PipelineOp>>> LayOutPipeline(const PipelineStep& p) {
  const int64_t group = p.group > 0 ? p.group : p.pp;
  if (absl::Status s = CheckPipelineStep(p, group); !s.ok()) return s;
  const int64_t stages = p.pp * p.vpp;  // virtual stages
  const double fwd_s = p.forward_s + p.forward_comm_s;
  const double bwd_s = p.recompute_s + p.backward_s + p.weight_gradient_s + p.backward_comm_s;
  // End time of each (micro-batch, virtual stage) forward and backward; NaN: not yet run.
  std::vector<double> f_end(p.micro_batches * stages, kNaN), b_end(p.micro_batches * stages, kNaN);
  std::vector<std::vector<OpRef>> order(p.pp);
  for (int64_t s = 0; s < p.pp; ++s) order[s] = StageOrder(p, group, s);
  std::vector<std::vector<PipelineOp>> out(p.pp);
  std::vector<size_t> next(p.pp, 0);
  std::vector<double> free_at(p.pp, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < p.pp; ++s) {
      while (next[s] < order[s].size()) {
        const OpRef& op = order[s][next[s]];
        const int64_t vs = op.chunk * p.pp + s;
        const size_t at = op.micro_batch * stages + vs;
        // What the op waits for: the neighbouring virtual stage (and, for a backward, its own forward).
        double ready = 0;
        if (op.forward) {
          ready = vs > 0 ? f_end[at - 1] : 0;
        } else {
          const double next_b = vs + 1 < stages ? b_end[at + 1] : 0.0;
          ready = std::isnan(next_b) ? kNaN : std::max(f_end[at], next_b);  // std::max drops a NaN second
        }
        if (std::isnan(ready)) break;
        const double start = std::max(free_at[s], ready);
        const double end = start + (op.forward ? fwd_s : bwd_s);
        (op.forward ? f_end : b_end)[at] = end;
        free_at[s] = end;
        out[s].push_back({s, op.forward, op.micro_batch, op.chunk, start, end});
        ++next[s];
        progress = true;
      }
    }
  }
  for (int64_t s = 0; s < p.pp; ++s) {
    if (next[s] < order[s].size()) {
      return absl::InternalError(absl::StrCat("timeline: stage ", s, " waits forever at operation ", next[s]));
    }
  }
  return out;
}

namespace {

// Fixed colours of the timeline's kinds (the prediction page's term colours where one exists:
// GEMM blue, communication orange, bubble grey, optimizer green).
const char* TimelineColour(const std::string& kind) {
  if (kind == "forward") return "#a0cbe8";
  if (kind == "backward") return "#4e79a7";
  if (kind == "recompute") return "#d4a6c8";
  if (kind == "weight-gradient") return "#76b7b2";
  if (kind == "communication") return "#f28e2b";
  if (kind == "bubble") return "#e4e4e4";
  if (kind == "dp-sync") return "#b07aa1";
  if (kind == "optimizer") return "#59a14f";
  return "";
}

// A kind as one class token: letters and digits kept, anything else "-".
std::string ClassName(const std::string& kind) {
  std::string out = kind;
  for (char& ch : out) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(ch))) ch = '-';
  }
  return out;
}

std::string OpName(const PipelineOp& op) {
  return absl::StrCat(op.forward ? "F" : "B", op.micro_batch, ".", op.chunk);
}

}  // namespace

TimelineChart PipelineTimeline(const PipelineStep& p, const std::vector<std::vector<PipelineOp>>& ops) {
  TimelineChart chart;
  double drained = 0;
  for (const auto& row : ops) {
    if (!row.empty()) drained = std::max(drained, row.back().end_s);
  }
  for (size_t s = 0; s < ops.size(); ++s) {
    TimelineRow row{absl::StrCat("stage ", s), {}};
    double t = 0;
    auto add = [&](const char* kind, double dur, const std::string& op, const std::string& title) {
      if (dur > 0) row.segments.push_back({kind, t, t + dur, op, title, ""});
      t += dur;
    };
    for (const PipelineOp& op : ops[s]) {
      if (op.start_s > t) add("bubble", op.start_s - t, "", "");
      const std::string name = OpName(op);
      const std::string title = absl::StrFormat("stage %d: %s of micro-batch %d, chunk %d, %s-%s s", s,
                                                op.forward ? "forward" : "backward", op.micro_batch, op.chunk,
                                                Number(op.start_s), Number(op.end_s));
      if (op.forward) {
        add("forward", p.forward_s, name, title);
        add("communication", p.forward_comm_s, name, title);
      } else {
        add("recompute", p.recompute_s, name, title);
        add("backward", p.backward_s, name, title);
        add("weight-gradient", p.weight_gradient_s, name, title);
        add("communication", p.backward_comm_s, name, title);
      }
      t = op.end_s;
    }
    if (drained > t) add("bubble", drained - t, "", "");
    t = drained;
    add("dp-sync", p.dp_comm_s, "", "");
    add("optimizer", p.optimizer_s, "", "");
    chart.rows.push_back(std::move(row));
  }
  return chart;
}

namespace {

// The axis of a timeline (RenderTimeline, TimelineScaleOf) and the kinds' colours in legend order.
struct TimelineAxis {
  Scale sx;          // in display units (s, or ms with milliseconds)
  double unit = 1;   // seconds per display unit
  double label_w = 90;
  std::vector<std::string> kinds;
  std::map<std::string, std::string> colours;
  double X(double t_s) const { return sx(t_s / unit); }
};

TimelineAxis AxisOf(const TimelineChart& c) {
  TimelineAxis a;
  a.unit = c.milliseconds ? 1e-3 : 1.0;
  double end = std::max(c.marker_s, c.second_marker_s);
  for (const auto& row : c.rows) {
    for (const auto& seg : row.segments) {
      end = std::max(end, seg.end_s);
      if (a.colours.count(seg.kind)) continue;
      a.kinds.push_back(seg.kind);
      const char* fixed = TimelineColour(seg.kind);
      a.colours[seg.kind] = !seg.colour.empty() ? seg.colour : *fixed ? fixed : PaletteColour(a.colours.size());
    }
  }
  AutoRange(Axis{}, {0.0, end > 0 ? end / a.unit : 1.0}, &a.sx.lo, &a.sx.hi);
  for (const auto& row : c.rows) a.label_w = std::max(a.label_w, std::min(300.0, TextWidth(row.label) + 16));
  a.sx.px0 = a.label_w;
  a.sx.px1 = c.width - 20;
  return a;
}

}  // namespace

TimelineScale TimelineScaleOf(const TimelineChart& c) {
  const TimelineAxis a = AxisOf(c);
  return {a.sx.px0, (a.sx.px1 - a.sx.px0) / ((a.sx.hi - a.sx.lo) * a.unit), a.sx.hi * a.unit};
}

std::string RenderTimeline(const TimelineChart& c) {
  TimelineAxis axis = AxisOf(c);
  const auto X = [&axis](double t_s) { return axis.X(t_s); };
  const std::string unit = c.milliseconds ? "ms" : "s";
  const double label_w = axis.label_w;
  const double top = c.marker_s > 0 || c.second_marker_s > 0 ? 52 : 34, row_h = 22, gap = 6;
  const double rows_bottom = top + c.rows.size() * (row_h + gap);
  const double legend_top = rows_bottom + 54;
  const double height = legend_top + 20 * ((axis.kinds.size() + 5) / 6) + 8;
  std::string o = SvgOpen(c.width, static_cast<int>(height), c.title);
  DrawHorizontalAxis(axis.sx, top, rows_bottom, absl::StrCat("time in the step (", unit, ")"), o);
  for (size_t r = 0; r < c.rows.size(); ++r) {
    const TimelineRow& row = c.rows[r];
    const double y = top + r * (row_h + gap);
    absl::StrAppendFormat(&o, R"(<text class="tl-row" x="%s" y="%s" text-anchor="end" fill="#111">%s</text>)""\n",
                          F(label_w - 8), F(y + row_h / 2 + 4), Escape(Clip(row.label, 40)));
    // Ops under 3 px wide go into one path per kind (their parts would be under a pixel each, and
    // a rect per op makes a page of megabytes for thousands of micro-batches).
    std::map<std::string, std::pair<std::string, int>> narrow;  // kind -> (path, ops)
    for (size_t i = 0; i < row.segments.size(); ++i) {
      const TimelineSegment& seg = row.segments[i];
      if (!seg.op.empty() && X(seg.end_s) - X(seg.start_s) < 3) {
        double seg_end = seg.end_s;
        while (i + 1 < row.segments.size() && row.segments[i + 1].op == seg.op) seg_end = row.segments[++i].end_s;
        auto& [d, n] = narrow[seg.kind];
        absl::StrAppend(&d, "M", F(X(seg.start_s)), " ", F(y), "h", F(std::max(X(seg_end) - X(seg.start_s), 0.3)), "v",
                        F(row_h), "H", F(X(seg.start_s)), "Z");
        ++n;
        continue;
      }
      const std::string title =
          seg.title.empty() ? absl::StrFormat("%s: %s-%s %s", seg.kind, Number(seg.start_s / axis.unit),
                                              Number(seg.end_s / axis.unit), unit)
                            : absl::StrCat(seg.kind, ": ", seg.title);
      // A white outline separates operations; on a measured kernel under 2 px it would hide the fill.
      const double w = X(seg.end_s) - X(seg.start_s);
      absl::StrAppendFormat(&o, R"(<rect class="tl %s" data-kind="%s" data-row="%d" data-op="%s" data-start="%.6g" data-end="%.6g" x="%s" y="%s" width="%s" height="%s" fill="%s"%s><title>%s</title></rect>)""\n",
                            ClassName(seg.kind), Escape(seg.kind), r, Escape(seg.op), seg.start_s, seg.end_s, F(X(seg.start_s)), F(y),
                            F(std::max(w, 0.5)), F(row_h), axis.colours[seg.kind],
                            !seg.outline && w < 2 ? "" : R"( stroke="#fff" stroke-width="0.6")", Escape(title));
    }
    for (const auto& [kind, path] : narrow) {
      absl::StrAppendFormat(&o, R"(<path class="tl-narrow %s" data-kind="%s" data-row="%d" data-ops="%d" d="%s" fill="%s"><title>%s</title></path>)""\n",
                            ClassName(kind), Escape(kind), r, path.second, path.first, axis.colours[kind],
                            Escape(absl::StrFormat("%s: %d operations, each under 3 px here", row.label, path.second)));
    }
  }
  if (c.marker_s > 0) {
    const double x = X(c.marker_s);
    absl::StrAppendFormat(&o, R"(<line class="marker" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#c00" stroke-width="2" stroke-dasharray="6 4"><title>%s</title></line>)""\n",
                          F(x), F(top - 8), F(x), F(rows_bottom - gap + 4),
                          Escape(absl::StrCat(c.marker_label, ": ", Number(c.marker_s / axis.unit), " ", unit)));
    absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="end" fill="#c00">%s</text>)""\n", F(x - 4), F(top - 10),
                          Escape(c.marker_label));
  }
  if (c.second_marker_s > 0) {
    const double x = X(c.second_marker_s), y0 = top + c.second_marker_row * (row_h + gap) - 4;
    absl::StrAppendFormat(&o, R"(<line class="marker2" data-at="%.9g" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#222" stroke-width="2" stroke-dasharray="2 3"><title>%s</title></line>)""\n",
                          c.second_marker_s, F(x), F(y0), F(x), F(rows_bottom - gap + 4),
                          Escape(absl::StrCat(c.second_marker_label, ": ", Number(c.second_marker_s / axis.unit), " ", unit)));
    const bool left = x + 4 + TextWidth(c.second_marker_label) > c.width;
    absl::StrAppendFormat(&o, R"(<text x="%s" y="%s" text-anchor="%s" fill="#222">%s</text>)""\n", F(left ? x - 4 : x + 4),
                          F(top - 10), left ? "end" : "start", Escape(c.second_marker_label));
  }
  for (size_t i = 0; i < axis.kinds.size(); ++i) {
    const double x = 8 + (i % 6) * ((c.width - 16) / 6.0), y = legend_top + (i / 6) * 20;
    absl::StrAppendFormat(&o, R"(<rect x="%s" y="%s" width="18" height="12" fill="%s" stroke="#999" stroke-width="0.5"/><text x="%s" y="%s" fill="#222">%s</text>)""\n",
                          F(x), F(y - 6), axis.colours[axis.kinds[i]], F(x + 24), F(y + 4), Escape(Clip(axis.kinds[i], 24)));
  }
  o += "</svg>\n";
  return o;
}

// cli/chart.h.
std::string CategoryColour(const std::string& category) {
  if (category == "gemm") return "#4e79a7";
  if (category == "attention") return "#76b7b2";
  if (category == "convolution") return "#a0cbe8";
  if (category == "elementwise") return "#edc948";
  if (category == "communication") return "#f28e2b";
  if (category == "memory_copy") return "#9c755f";
  return "#79706e";
}

namespace {

// A drawn piece of a lane: one kernel or several merged.
struct LaneSeg {
  double start_s = 0, end_s = 0;
  std::string category;
  size_t kernels = 1;
  std::map<std::string, double> busy_s;  // by category (merged segments)
  std::string name;                      // one kernel's name
};

size_t CountSegments(const std::vector<std::vector<LaneSeg>>& lanes) {
  size_t n = 0;
  for (const auto& l : lanes) n += l.size();
  return n;
}

// Rule 1 (same category, gap under a pixel) or rule 2 (any category, group spanning under a
// pixel) on one lane; see LayOutStreamLanes.
std::vector<LaneSeg> MergeLane(const std::vector<LaneSeg>& in, double pixel_s, int rule) {
  std::vector<LaneSeg> out;
  for (const LaneSeg& k : in) {
    if (!out.empty()) {
      LaneSeg& c = out.back();
      const bool join = rule == 1 ? k.category == c.category && k.start_s - c.end_s < pixel_s
                                  : std::max(c.end_s, k.end_s) - c.start_s < pixel_s;
      if (join) {
        c.end_s = std::max(c.end_s, k.end_s);
        c.kernels += k.kernels;
        for (const auto& [cat, b] : k.busy_s) c.busy_s[cat] += b;
        continue;
      }
    }
    out.push_back(k);
  }
  for (LaneSeg& c : out) {
    if (c.kernels == 1) continue;
    double best = -1;
    for (const auto& [cat, b] : c.busy_s) {
      if (b > best) best = b, c.category = cat;
    }
  }
  return out;
}

std::string LaneTitle(const LaneSeg& s) {
  const std::string span = absl::StrFormat("%s-%s ms", Number(s.start_s * 1e3), Number(s.end_s * 1e3));
  if (s.kernels == 1) return absl::StrCat(Clip(s.name, 120), "\n", span);
  std::string busy;
  for (const auto& [cat, b] : s.busy_s) absl::StrAppend(&busy, busy.empty() ? "" : ", ", cat, " ", Number(b * 1e3), " ms");
  return absl::StrFormat("%d kernels merged (under a pixel apart)\n%s; busy %s", s.kernels, span, busy);
}

}  // namespace

StreamLanes LayOutStreamLanes(const std::vector<StreamKernel>& kernels, double px_per_s, size_t max_rects,
                              bool allow_drop) {
  StreamLanes out;
  out.kernels = kernels.size();
  std::map<int32_t, std::vector<LaneSeg>> by_stream;
  for (const StreamKernel& k : kernels) {
    if (!(k.end_s > k.start_s)) continue;
    LaneSeg s{k.start_s, k.end_s, k.category, 1, {{k.category, k.end_s - k.start_s}}, k.name};
    by_stream[k.stream].push_back(std::move(s));
  }
  // Role by busy time: 0 compute, 1 communication, 2 copy.
  std::vector<std::pair<int, int32_t>> order;
  for (auto& [stream, segs] : by_stream) {
    std::stable_sort(segs.begin(), segs.end(), [](const LaneSeg& a, const LaneSeg& b) { return a.start_s < b.start_s; });
    double comm = 0, copy = 0, other = 0;
    for (const LaneSeg& s : segs) {
      (s.category == "communication" ? comm : s.category == "memory_copy" ? copy : other) += s.end_s - s.start_s;
    }
    order.push_back({comm > copy && comm > other ? 1 : copy > other ? 2 : 0, stream});
  }
  std::sort(order.begin(), order.end());
  std::vector<std::vector<LaneSeg>> lanes;
  for (const auto& [role, stream] : order) lanes.push_back(std::move(by_stream[stream]));
  const double pixel_s = px_per_s > 0 ? 1 / px_per_s : 0;
  for (int rule = 1; rule <= 2 && CountSegments(lanes) > max_rects; ++rule) {
    for (auto& l : lanes) l = MergeLane(l, pixel_s, rule);
    out.merge_rule = rule;
  }
  if (const size_t n = CountSegments(lanes); allow_drop && n > max_rects) {
    // Rule 3: keep the widest max_rects segments (ties: earlier lanes and starts first).
    std::vector<double> widths;
    for (const auto& l : lanes)
      for (const LaneSeg& s : l) widths.push_back(s.end_s - s.start_s);
    std::nth_element(widths.begin(), widths.begin() + (n - max_rects), widths.end());
    const double cut = widths[n - max_rects];
    size_t above = 0;
    for (double w : widths) above += w > cut;
    size_t ties_left = max_rects - above;
    for (auto& l : lanes) {
      std::vector<LaneSeg> kept;
      for (LaneSeg& s : l) {
        const double w = s.end_s - s.start_s;
        if (w > cut || (w == cut && ties_left > 0 && ties_left--)) kept.push_back(std::move(s));
      }
      l = std::move(kept);
    }
    out.merge_rule = 3;
    out.dropped = n - CountSegments(lanes);
  }
  for (size_t i = 0; i < lanes.size(); ++i) {
    const auto [role, stream] = order[i];
    TimelineRow row{absl::StrFormat("stream %d (%s)", stream, role == 1 ? "communication" : role == 2 ? "copy" : "compute"), {}};
    for (const LaneSeg& s : lanes[i]) {
      row.segments.push_back({s.category, s.start_s, s.end_s, "", LaneTitle(s), CategoryColour(s.category), false});
    }
    out.segments += row.segments.size();
    out.rows.push_back(std::move(row));
    out.streams.push_back(stream);
  }
  return out;
}

}  // namespace stepcast::html
