//! Line charts as inline SVG, drawn in Rust so the page needs no script and nothing from the
//! network. Unknown values (`None`) break the line: a gap says "not measured", where a dip
//! to zero would claim a value.

use std::fmt::Write;

use super::view::{escape, human_bytes};

const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 200.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 26.0;
const BOTTOM: f64 = 24.0;

/// What the y axis counts.
#[derive(Debug, Clone, Copy)]
pub enum Unit {
    /// Bytes.
    Bytes,
    /// Bytes per second.
    BytesPerSec,
}

impl Unit {
    fn label(self, v: f64) -> String {
        let bytes = human_bytes(v.max(0.0).round() as i64);
        match self {
            Unit::Bytes => bytes,
            Unit::BytesPerSec => format!("{bytes}/s"),
        }
    }
}

/// One line: `(ms since the epoch, value)` points, oldest first.
#[derive(Debug)]
pub struct Series {
    /// Legend text (fixed text chosen by the caller; escaped anyway).
    pub name: &'static str,
    /// Stroke colour.
    pub color: &'static str,
    /// Dashed, so a line that coincides with another (read after write of the same bytes)
    /// still shows.
    pub dashed: bool,
    /// The points; `None` is a gap.
    pub points: Vec<(i64, Option<f64>)>,
}

/// The chart as an `<svg>` element. Every series is a `<g class="series">` carrying
/// `data-name` and `data-points` (how many known points it drew), so a test can read what
/// the chart shows from the rendered page.
pub fn line_chart(title: &str, unit: Unit, series: &[Series]) -> String {
    let known = || {
        series
            .iter()
            .flat_map(|s| s.points.iter().filter_map(|(t, v)| v.map(|v| (*t, v))))
    };
    let times = || series.iter().flat_map(|s| s.points.iter().map(|(t, _)| *t));
    let has_times = times().next().is_some();
    let t_min = times().min().unwrap_or(0);
    let t_max = times().max().unwrap_or(0);
    let y_max = known().map(|(_, v)| v).fold(0.0_f64, f64::max);
    let y_top = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let span = t_max.saturating_sub(t_min).max(1) as f64;
    let x = |t: i64| LEFT + t.saturating_sub(t_min) as f64 / span * plot_w;
    let y = |v: f64| TOP + plot_h - v / y_top * plot_h;

    let mut svg = String::with_capacity(4096);
    let _ = write!(
        svg,
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{title}">"#,
        title = escape(title)
    );
    let _ = write!(
        svg,
        r##"<text x="{LEFT}" y="16" class="chart-title">{}</text>"##,
        escape(title)
    );
    // Grid: 0, half, top.
    for frac in [0.0, 0.5, 1.0] {
        let v = y_top * frac;
        let yy = y(v);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" class="axis">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            yy + 4.0,
            escape(&unit.label(v))
        );
    }
    if has_times {
        for (t, anchor, xx) in [(t_min, "start", LEFT), (t_max, "end", WIDTH - RIGHT)] {
            let _ = write!(
                svg,
                r#"<text x="{xx:.1}" y="{:.1}" text-anchor="{anchor}" class="axis">{}</text>"#,
                HEIGHT - 6.0,
                clock(t)
            );
        }
    }
    if known().next().is_none() {
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" class="axis">no data yet</text>"#,
            LEFT + plot_w / 2.0,
            TOP + plot_h / 2.0
        );
    }
    let mut legend_x = WIDTH - RIGHT;
    for s in series.iter().rev() {
        let _ = write!(
            svg,
            r#"<text x="{legend_x:.1}" y="16" text-anchor="end" fill="{}" class="legend">■ {}</text>"#,
            s.color,
            escape(s.name)
        );
        legend_x -= 9.0 * s.name.chars().count() as f64 + 24.0;
    }
    for s in series {
        let count = s.points.iter().filter(|(_, v)| v.is_some()).count();
        let _ = write!(
            svg,
            r#"<g class="series" data-name="{}" data-points="{count}">"#,
            escape(s.name)
        );
        // Runs of known points become one polyline each; a lone point becomes a dot.
        for run in s.points.split(|(_, v)| v.is_none()) {
            match run {
                [] => {}
                [(t, Some(v))] => {
                    let _ = write!(
                        svg,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="2" fill="{}"/>"#,
                        x(*t),
                        y(*v),
                        s.color
                    );
                }
                _ => {
                    svg.push_str(r#"<polyline fill="none" stroke-width="1.5" "#);
                    if s.dashed {
                        svg.push_str(r#"stroke-dasharray="5 3" "#);
                    }
                    svg.push_str(r#"stroke=""#);
                    svg.push_str(s.color);
                    svg.push_str(r#"" points=""#);
                    for (t, v) in run {
                        if let Some(v) = v {
                            let _ = write!(svg, "{:.1},{:.1} ", x(*t), y(*v));
                        }
                    }
                    svg.push_str(r#""/>"#);
                }
            }
        }
        svg.push_str("</g>");
    }
    svg.push_str("</svg>");
    svg
}

/// `HH:MM:SS` UTC of `ms` since the epoch.
fn clock(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "—".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_split_lines_and_points_are_counted() {
        let svg = line_chart(
            "Memory <used>",
            Unit::Bytes,
            &[Series {
                name: "used",
                color: "#36c",
                dashed: false,
                points: vec![
                    (0, Some(1.0)),
                    (1000, Some(2.0)),
                    (2000, None),
                    (3000, Some(4.0)),
                ],
            }],
        );
        assert!(svg.contains(r#"data-points="3""#), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("<circle").count(), 1);
        assert!(svg.contains("Memory &lt;used&gt;") && !svg.contains("<used>"));
    }

    #[test]
    fn no_points_says_so() {
        let svg = line_chart("t", Unit::BytesPerSec, &[]);
        assert!(svg.contains("no data yet"));
    }
}
