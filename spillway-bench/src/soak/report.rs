//! The soak's output: a markdown report (app counts, fault log, per-server resource table with
//! slopes), the raw samples as CSV, and one SVG plot per resource with every server's line and
//! its restarts marked. Plots are hand-written SVG so the soak depends on nothing of the
//! coordinator's dashboard.

use std::fmt::Write;

use super::faults::{Logged, Restart};
use super::sampler::{Resource, Sample, Series, COUNT};

/// The least-squares slope per hour that `segments` share, each with its own intercept (the
/// within-segment estimator): a leak shows as growth inside every process's life, while the
/// level a restarted process starts from says nothing about it. `None` without two points in
/// some segment.
pub fn pooled_slope_per_hour(segments: &[Vec<(f64, f64)>]) -> Option<f64> {
    let (mut sxx, mut sxy) = (0.0, 0.0);
    for seg in segments.iter().filter(|s| s.len() >= 2) {
        let n = seg.len() as f64;
        let mx = seg.iter().map(|p| p.0).sum::<f64>() / n;
        let my = seg.iter().map(|p| p.1).sum::<f64>() / n;
        sxx += seg.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
        sxy += seg.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>();
    }
    (sxx > 0.0).then(|| sxy / sxx * 3600.0)
}

/// A bound on a resource's slope (per hour).
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// The resource.
    pub resource: Resource,
    /// Largest growth per hour accepted.
    pub per_hour: f64,
}

/// One row of a server's table.
#[derive(Debug)]
pub struct Row {
    /// The resource.
    pub resource: Resource,
    /// First, last and largest measured value.
    pub start: Option<f64>,
    /// Last.
    pub end: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// Slope per hour over the window.
    pub slope: Option<f64>,
    /// The window: seconds covered (summed over processes), samples, and processes.
    pub window: (f64, usize, usize),
    /// The bound, if any, and whether the slope broke it.
    pub bound: Option<(f64, bool)>,
    /// Whether the window was long enough for its slope to be judged.
    pub judged: bool,
}

/// Samples needed in a slope window before its slope is judged.
pub const MIN_WINDOW_SAMPLES: usize = 30;

/// How a slope window is cut (see [`rows`]).
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// Seconds the segments must cover in all for the slope to be judged.
    pub min_span: f64,
    /// Seconds left out after every (re)start.
    pub warmup: f64,
    /// Processes that lived less than this (seconds, from their start to the next restart or
    /// the end of the samples) are left out.
    pub min_life: f64,
}

/// Builds every server's rows. The slope window is the last half of the run and ends when the
/// last app starts (`duration`): after that the load drains and falling values would hide a
/// leak. Restarts cut it into one segment per process, each without its first `warmup`
/// seconds (a new process opens its connections, threads and allocator arenas then, and that
/// ramp would read as a growth per hour), and the slope is the one the segments share
/// ([`pooled_slope_per_hour`]). Processes that lived less than `min_life` are left out: a fresh
/// process's RSS climbs to its working set for minutes, so a process restarted after three
/// minutes contributes nothing but that climb. It is judged only with at least
/// [`MIN_WINDOW_SAMPLES`] samples covering `min_span` seconds in all: the blocking pool's
/// threads come and go by tens within seconds, so a window of a few minutes extrapolated to an
/// hour measures noise.
pub fn rows(
    series: &Series,
    restarts: &[Restart],
    duration: f64,
    window: Window,
    bounds: &[Bound],
) -> Vec<Vec<Row>> {
    let Window {
        min_span,
        warmup,
        min_life,
    } = window;
    series
        .per_node
        .iter()
        .enumerate()
        .map(|(node, samples)| {
            let mut starts: Vec<f64> = restarts
                .iter()
                .filter(|r| r.node == node)
                .map(|r| r.at)
                .collect();
            starts.sort_by(f64::total_cmp);
            let half = duration / 2.0;
            let last_sample = samples.last().map_or(0.0, |s| s.t);
            // How long process `n` lived (the first one from 0).
            let life = |n: usize| -> f64 {
                let from = n.checked_sub(1).map_or(0.0, |i| starts[i]);
                let to = starts.get(n).copied().unwrap_or(last_sample);
                to - from
            };
            // The process a sample belongs to (restarts before it), or None inside a warm-up
            // or in a process too short-lived.
            let segment = |t: f64| -> Option<usize> {
                let n = starts.iter().filter(|r| **r <= t).count();
                match n.checked_sub(1).map(|i| starts[i]) {
                    Some(r) if t - r < warmup => None,
                    _ if life(n) < min_life => None,
                    _ => Some(n),
                }
            };
            Resource::ALL
                .iter()
                .enumerate()
                .map(|(k, &resource)| {
                    let known: Vec<(f64, f64)> = samples
                        .iter()
                        .filter_map(|s| s.values[k].map(|v| (s.t, v)))
                        .collect();
                    let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new(); starts.len() + 1];
                    for p in known.iter().filter(|p| p.0 >= half && p.0 <= duration) {
                        if let Some(i) = segment(p.0) {
                            segments[i].push(*p);
                        }
                    }
                    segments.retain(|s| !s.is_empty());
                    let slope = pooled_slope_per_hour(&segments);
                    let samples: usize = segments.iter().map(Vec::len).sum();
                    let span: f64 = segments
                        .iter()
                        .map(|s| s.last().map_or(0.0, |l| l.0) - s[0].0)
                        .sum();
                    let judged = samples >= MIN_WINDOW_SAMPLES && span >= min_span;
                    let bound = bounds
                        .iter()
                        .find(|b| b.resource == resource)
                        .map(|b| (b.per_hour, judged && slope.is_some_and(|s| s > b.per_hour)));
                    Row {
                        resource,
                        start: known.first().map(|p| p.1),
                        end: known.last().map(|p| p.1),
                        max: known.iter().map(|p| p.1).reduce(f64::max),
                        slope,
                        window: (span, samples, segments.len()),
                        bound,
                        judged,
                    }
                })
                .collect()
        })
        .collect()
}

fn fmt_value(resource: Resource, v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(v) if resource.bytes() => format!("{:.1} MiB", v / (1u64 << 20) as f64),
        Some(v) => format!("{v:.0}"),
    }
}

/// The markdown table of one server.
pub fn table(out: &mut String, node: usize, restarts: usize, rows: &[Row]) {
    let _ = writeln!(out, "\n#### server{node} ({restarts} restarts)\n");
    let _ = writeln!(
        out,
        "| resource | start | end | max | slope / h (window s, samples, processes) | bound / h | |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for r in rows {
        let slope = r
            .slope
            .map_or("—".into(), |s| fmt_value(r.resource, Some(s)));
        let (bound, verdict) = match r.bound {
            None => ("—".to_string(), ""),
            Some((b, broke)) => (
                fmt_value(r.resource, Some(b)),
                if broke {
                    "**OVER**"
                } else if !r.judged {
                    "not judged: window too short"
                } else {
                    "ok"
                },
            ),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {slope} ({:.0} s, {}, {}) | {bound} | {verdict} |",
            r.resource.name(),
            fmt_value(r.resource, r.start),
            fmt_value(r.resource, r.end),
            fmt_value(r.resource, r.max),
            r.window.0,
            r.window.1,
            r.window.2,
        );
    }
}

/// The fault log as a markdown table.
pub fn fault_log(out: &mut String, log: &[Logged]) {
    let _ = writeln!(out, "\n### Faults ({})\n", log.len());
    let _ = writeln!(out, "| t (s) | server | fault | took (s) |");
    let _ = writeln!(out, "|---|---|---|---|");
    for l in log {
        let _ = writeln!(
            out,
            "| {:.1} | server{} | {} | {:.2} |",
            l.at, l.node, l.what, l.took
        );
    }
}

/// The samples as CSV (`t,server,<resource>…`; empty cells are gaps).
pub fn csv(series: &Series) -> String {
    let mut out = String::from("t,server");
    for r in Resource::ALL {
        out.push(',');
        out.push_str(r.name());
    }
    out.push('\n');
    for (node, samples) in series.per_node.iter().enumerate() {
        for s in samples {
            let _ = write!(out, "{:.3},{node}", s.t);
            for v in s.values {
                out.push(',');
                if let Some(v) = v {
                    let _ = write!(out, "{v}");
                }
            }
            out.push('\n');
        }
    }
    out
}

/// Reads back what [`csv`] wrote, by the header's names: a file from before a resource was
/// sampled reads with that resource as gaps.
pub fn parse_csv(text: &str) -> anyhow::Result<Series> {
    let mut lines = text.lines().enumerate();
    let header: Vec<&str> = lines
        .next()
        .map(|(_, h)| h.split(',').collect())
        .unwrap_or_default();
    if header.get(..2) != Some(&["t", "server"][..]) {
        anyhow::bail!("samples.csv: the header does not start with t,server");
    }
    // Column of each resource, or None when the file has none.
    let columns: Vec<Option<usize>> = Resource::ALL
        .iter()
        .map(|r| header.iter().position(|h| *h == r.name()))
        .collect();
    let mut per_node: Vec<Vec<Sample>> = Vec::new();
    for (n, line) in lines {
        let bad = || anyhow::anyhow!("samples.csv line {}: {line:?}", n + 1);
        let cells: Vec<&str> = line.split(',').collect();
        if cells.len() != header.len() {
            return Err(bad());
        }
        let t: f64 = cells[0].parse().map_err(|_| bad())?;
        let node: usize = cells[1].parse().map_err(|_| bad())?;
        let mut values = [None; COUNT];
        for (v, column) in values.iter_mut().zip(&columns) {
            match column.map(|c| cells[c]) {
                None | Some("") => {}
                Some(cell) => *v = Some(cell.parse().map_err(|_| bad())?),
            }
        }
        if per_node.len() <= node {
            per_node.resize_with(node + 1, Vec::new);
        }
        per_node[node].push(Sample { t, values });
    }
    Ok(Series { per_node })
}

/// The restarts as CSV (`t,server`), so a run's slopes can be judged again later.
pub fn restarts_csv(restarts: &[Restart]) -> String {
    let mut out = String::from("t,server\n");
    for r in restarts {
        let _ = writeln!(out, "{:.3},{}", r.at, r.node);
    }
    out
}

/// Reads back what [`restarts_csv`] wrote.
pub fn parse_restarts_csv(text: &str) -> anyhow::Result<Vec<Restart>> {
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (t, node) = line
                .split_once(',')
                .ok_or_else(|| anyhow::anyhow!("restarts.csv: {line:?}"))?;
            Ok(Restart {
                at: t.trim().parse()?,
                node: node.trim().parse()?,
            })
        })
        .collect()
}

const COLORS: [&str; 3] = ["#1f77b4", "#d62728", "#2ca02c"];

/// One resource over time as an SVG: a line per server (gaps where no process answered) and
/// a dashed vertical line at each of its restarts, in its colour.
pub fn plot(resource: Resource, k: usize, series: &Series, restarts: &[Restart]) -> String {
    const W: f64 = 900.0;
    const H: f64 = 300.0;
    const L: f64 = 80.0;
    const R: f64 = 20.0;
    const T: f64 = 30.0;
    const B: f64 = 40.0;
    let t_max = series
        .per_node
        .iter()
        .flat_map(|s| s.iter().map(|x| x.t))
        .fold(1.0, f64::max);
    let v_max = series
        .per_node
        .iter()
        .flat_map(|s| s.iter().filter_map(|x| x.values[k]))
        .fold(0.0, f64::max);
    let v_top = if v_max > 0.0 { v_max * 1.1 } else { 1.0 };
    let x = |t: f64| L + t / t_max * (W - L - R);
    let y = |v: f64| H - B - v / v_top * (H - T - B);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{L}\" y=\"18\" font-size=\"14\">{}</text>\n\
         <line x1=\"{L}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#444\"/>\n\
         <line x1=\"{L}\" y1=\"{T}\" x2=\"{L}\" y2=\"{}\" stroke=\"#444\"/>\n",
        resource.name(),
        H - B,
        W - R,
        H - B,
        H - B
    );
    for i in 0..=4 {
        let v = v_top * f64::from(i) / 4.0;
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            L - 4.0,
            y(v) + 4.0,
            fmt_value(resource, Some(v))
        );
        let t = t_max * f64::from(i) / 4.0;
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{t:.0} s</text>",
            x(t),
            H - B + 16.0
        );
    }
    for r in restarts {
        let _ = writeln!(
            svg,
            "<line class=\"restart\" x1=\"{0:.1}\" y1=\"{T}\" x2=\"{0:.1}\" y2=\"{1}\" \
             stroke=\"{2}\" stroke-dasharray=\"4 3\" opacity=\"0.6\"/>",
            x(r.at),
            H - B,
            COLORS[r.node % COLORS.len()]
        );
    }
    for (node, samples) in series.per_node.iter().enumerate() {
        let color = COLORS[node % COLORS.len()];
        let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for s in samples {
            match s.values[k] {
                Some(v) => runs.last_mut().map_or((), |r| r.push((x(s.t), y(v)))),
                None if runs.last().is_some_and(|r| !r.is_empty()) => runs.push(Vec::new()),
                None => {}
            }
        }
        for run in runs.iter().filter(|r| !r.is_empty()) {
            let pts: Vec<String> = run.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
            let _ = writeln!(
                svg,
                "<polyline class=\"server{node}\" fill=\"none\" stroke=\"{color}\" \
                 stroke-width=\"1.5\" points=\"{}\"/>",
                pts.join(" ")
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"18\" fill=\"{color}\">server{node}</text>",
            W - R - 220.0 + 75.0 * node as f64
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::super::sampler::Sample;
    use super::*;

    fn window(min_span: f64, warmup: f64) -> Window {
        Window {
            min_span,
            warmup,
            min_life: 0.0,
        }
    }

    #[test]
    fn short_lived_processes_are_left_out() {
        // In the window (400-800 s) two processes of 100 s each climb by 1 per second (to a
        // working set), and the last one lives 300 s flat at 50: only that one is judged.
        let restarts: Vec<Restart> = [400.0, 500.0, 600.0]
            .map(|at| Restart { at, node: 0 })
            .to_vec();
        let series = Series {
            per_node: vec![(0..900)
                .map(|t| {
                    let t = t as f64;
                    let mut values = [None; COUNT];
                    let climbing = (400.0..600.0).contains(&t);
                    values[0] = Some(if climbing { t % 100.0 } else { 50.0 });
                    Sample { t, values }
                })
                .collect()],
        };
        let bounds = [Bound {
            resource: Resource::Rss,
            per_hour: 10.0,
        }];
        let all = &rows(&series, &restarts, 800.0, window(60.0, 10.0), &bounds)[0][0];
        assert_eq!(all.bound, Some((10.0, true)), "the ramps read as growth");
        let long = Window {
            min_life: 250.0,
            ..window(60.0, 10.0)
        };
        let r = &rows(&series, &restarts, 800.0, long, &bounds)[0][0];
        assert_eq!(r.window.2, 1, "one process judged: {:?}", r.window);
        assert_eq!(r.slope, Some(0.0));
        assert_eq!(r.bound, Some((10.0, false)));
    }

    #[test]
    fn slope_is_least_squares_per_hour() {
        let pts: Vec<(f64, f64)> = (0..100).map(|t| (t as f64, 5.0 + 2.0 * t as f64)).collect();
        let s = pooled_slope_per_hour(std::slice::from_ref(&pts)).unwrap();
        assert!((s - 7200.0).abs() < 1e-6, "{s}");
        assert!(pooled_slope_per_hour(&[pts[..1].to_vec()]).is_none());
        assert!(pooled_slope_per_hour(&[vec![(1.0, 1.0), (1.0, 2.0)]]).is_none());
    }

    #[test]
    fn window_starts_at_last_restart_and_bounds_judge_it() {
        // 250 s of fd counts growing 1 per second after a restart at 100 s; apps ran 200 s.
        let samples: Vec<Sample> = (0..250)
            .map(|t| {
                let mut values = [None; COUNT];
                values[1] = Some(if t < 100 { 500.0 } else { t as f64 });
                Sample {
                    t: t as f64,
                    values,
                }
            })
            .collect();
        let series = Series {
            per_node: vec![samples],
        };
        let restarts = [Restart { at: 100.0, node: 0 }];
        let bounds = [Bound {
            resource: Resource::Fds,
            per_hour: 100.0,
        }];
        let rows = rows(&series, &restarts, 200.0, window(60.0, 30.0), &bounds);
        let fds = &rows[0][1];
        // From 30 s after the restart to the end of the apps: 130..=200 s.
        assert_eq!(fds.window, (70.0, 71, 1));
        assert!((fds.slope.unwrap() - 3600.0).abs() < 1e-6);
        assert_eq!(fds.bound, Some((100.0, true)));
        // The same window is not judged when the run asks for a longer one.
        let short = super::rows(&series, &restarts, 200.0, window(600.0, 30.0), &bounds);
        assert_eq!(short[0][1].bound, Some((100.0, false)));
        assert!(!short[0][1].judged);
        // RSS was never measured: no slope, nothing judged.
        assert!(rows[0][0].slope.is_none());
        let svg = plot(Resource::Fds, 1, &series, &restarts);
        assert_eq!(svg.matches("class=\"restart\"").count(), 1);
        assert_eq!(svg.matches("<polyline").count(), 1);
    }

    #[test]
    fn restarts_cut_the_window_and_levels_between_processes_do_not_count() {
        // Each process grows 1 per second from 0 (a leak), and restarts at 50 s and 150 s drop
        // it back: one line over the sawtooth would understate it.
        let restarts = [
            Restart { at: 50.0, node: 0 },
            Restart { at: 150.0, node: 0 },
        ];
        let leak = |t: f64| {
            t - if t >= 150.0 {
                150.0
            } else if t >= 50.0 {
                50.0
            } else {
                0.0
            }
        };
        let samples = |f: &dyn Fn(f64) -> f64| -> Series {
            Series {
                per_node: vec![(0..300)
                    .map(|t| {
                        let mut values = [None; COUNT];
                        values[2] = Some(f(t as f64));
                        Sample {
                            t: t as f64,
                            values,
                        }
                    })
                    .collect()],
            }
        };
        let bounds = [Bound {
            resource: Resource::Threads,
            per_hour: 10.0,
        }];
        let r = &rows(
            &samples(&leak),
            &restarts,
            250.0,
            window(60.0, 30.0),
            &bounds,
        )[0][2];
        // Window 125..=250 s: 125..=149 (restart at 50) and 180..=250 (after warm-up).
        assert_eq!(r.window, (24.0 + 70.0, 25 + 71, 2));
        assert!((r.slope.unwrap() - 3600.0).abs() < 1e-6, "{:?}", r.slope);
        assert_eq!(r.bound, Some((10.0, true)));
        // Flat within each process at a different level per process: no growth.
        let levels = |t: f64| if t >= 150.0 { 40.0 } else { 12.0 };
        let r = &rows(
            &samples(&levels),
            &restarts,
            250.0,
            window(60.0, 30.0),
            &bounds,
        )[0][2];
        assert_eq!(r.slope, Some(0.0));
        assert_eq!(r.bound, Some((10.0, false)));
    }

    #[test]
    fn samples_and_restarts_read_back_as_written() {
        let mut values = [None; COUNT];
        values[0] = Some(18_481_152.0);
        values[2] = Some(23.0);
        let series = Series {
            per_node: vec![
                vec![Sample { t: 0.25, values }],
                vec![
                    Sample {
                        t: 1.5,
                        values: [None; COUNT],
                    },
                    Sample { t: 2.5, values },
                ],
            ],
        };
        let back = parse_csv(&csv(&series)).unwrap();
        assert_eq!(back.per_node.len(), 2);
        assert_eq!(back.per_node[1].len(), 2);
        assert_eq!(back.per_node[1][0].values, [None; COUNT]);
        assert_eq!(back.per_node[0][0].t, 0.25);
        assert_eq!(back.per_node[1][1].values, values);
        let restarts = [Restart {
            at: 80.125,
            node: 2,
        }];
        let r = parse_restarts_csv(&restarts_csv(&restarts)).unwrap();
        assert_eq!((r[0].at, r[0].node), (80.125, 2));
        assert!(parse_csv("t,server\n1.0,0,x,,,,,,,\n").is_err());
        // A file from before the runtime's threads were sampled: those read as gaps.
        let old = "t,server,rss,fds,threads,used_buffer_size,allocated_buffer_size,\
                   require_buffer_count,app_num_with_node,journal_bytes\n\
                   0.066,0,18862080,22,11,0,0,0,0,98\n";
        let back = parse_csv(old).unwrap();
        let v = back.per_node[0][0].values;
        assert_eq!(
            (v[0], v[2], v[3], v[4], v[5]),
            (Some(18862080.0), Some(11.0), None, None, None)
        );
        assert_eq!(v[COUNT - 1], Some(98.0));
    }
}
