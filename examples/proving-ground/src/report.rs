//! What users read: a table per scenario (stdout), the JSON, and a self-contained HTML page
//! with one goodput chart per scenario (inline SVG, no script). Every number is taken from the
//! measurements; nothing here computes a verdict.

use std::fmt::Write as _;

use crate::model::Phases;
use crate::run::{RunReport, ScenarioRun};

fn num(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn pct(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

/// The header line of a scenario's table.
pub fn heading(run: &ScenarioRun, phases: &Phases) -> String {
    let limit = run
        .fault_capacity_rps
        .map_or_else(|| "nothing".to_owned(), |c| format!("{c:.0} req/s"));
    format!(
        "== {}: {} (critical {:.0} req/s; sheddable {:.0} req/s in the fault; phases {}s / {}s / {}s; the dependency serves {} in the fault)",
        run.scenario.name,
        run.scenario.what,
        run.scenario.critical_rps,
        run.scenario.fault.sheddable_rps,
        phases.baseline_s,
        phases.fault_s,
        phases.after_s,
        limit,
    )
}

/// The columns of a row, as text.
fn row(run: &crate::run::ContenderRun) -> Vec<String> {
    let m = &run.measurement;
    vec![
        run.name.to_owned(),
        format!("{:.0}/{:.0}", m.overall.sent_rps, m.overall.target_rps),
        format!("{:.0}", m.baseline.goodput_rps),
        format!("{:.0}", m.fault.goodput_rps),
        format!("{:.0}", m.after.goodput_rps),
        format!(
            "{}/{}",
            num(m.baseline.p50_ms, 0),
            num(m.baseline.p99_ms, 0)
        ),
        format!("{}/{}", num(m.fault.p50_ms, 0), num(m.fault.p99_ms, 0)),
        num(m.fault.amplification, 2),
        num(m.overall.amplification, 2),
        format!("{}/{}", m.fault.wasted, m.overall.wasted),
        format!("{}", m.overall.dropped_expired),
        pct((m.overall.dependency_received > 0).then(|| {
            m.overall.dependency_propagated as f64 / m.overall.dependency_received as f64
        })),
        m.recovery_s
            .map_or_else(|| "never".to_owned(), |r| format!("{r:.1}")),
        match m.stuck {
            Some(true) => "STUCK".to_owned(),
            Some(false) => "no".to_owned(),
            None => "-".to_owned(),
        },
        pct(m.fault.critical_availability),
        pct(m.fault.sheddable_availability),
        format!("{:.0}/{:.0}", run.mean_lag_ms, run.max_lag_ms),
        top_failures(&m.fault.failures, 3),
    ]
}

/// The `n` most frequent failure codes, `code count` each.
pub fn top_failures(failures: &std::collections::BTreeMap<String, u64>, n: usize) -> String {
    let mut sorted: Vec<(&String, &u64)> = failures.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let top: Vec<String> = sorted
        .iter()
        .take(n)
        .map(|(why, count)| format!("{why} {count}"))
        .collect();
    if top.is_empty() {
        "-".to_owned()
    } else {
        top.join(", ")
    }
}

const COLUMNS: [&str; 18] = [
    "contender",
    "sent/target",
    "good base",
    "good fault",
    "good after",
    "p50/p99 base",
    "p50/p99 fault",
    "amp fault",
    "amp all",
    "wasted f/all",
    "dropped",
    "deadline sent",
    "recover s",
    "stuck",
    "crit avail",
    "shed avail",
    "lag ms",
    "fault failures (top 3)",
];

/// A scenario's table, aligned for a terminal.
pub fn table(run: &ScenarioRun, phases: &Phases) -> String {
    let rows: Vec<Vec<String>> = run.runs.iter().map(row).collect();
    let widths: Vec<usize> = (0..COLUMNS.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([COLUMNS[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = heading(run, phases);
    out.push('\n');
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect::<Vec<_>>()
            .join("  ")
    };
    out.push_str(&line(COLUMNS.to_vec()));
    out.push('\n');
    for r in &rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    let stuck_at = run.runs.first().map_or(0.0, |r| r.measurement.stuck_at_s);
    let window = run.runs.first().map_or(0.0, |r| r.measurement.window_s);
    let _ = write!(
        out,
        "goodput in successful answers/s; latency ms; amp = dependency requests per client request; \
         wasted = served after the caller stopped waiting (fault/all); dropped = expired in the dependency's queue; deadline sent = dependency requests carrying a propagated deadline; \
         recover = s from the fault's end until the {window:.1} s rolling goodput is 95% of the baseline; \
         stuck = under half the baseline {stuck_at:.0} s after; avail = answered in the fault; lag = generator behind schedule (mean/max); fault failures = what ended the failed requests sent in the fault (the refusing mechanism, the dependency's answer, or the client's timeout)"
    );
    out
}

const COLOURS: [&str; 6] = [
    "#888888", "#d62728", "#1f77b4", "#9467bd", "#2ca02c", "#ff7f0e",
];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One scenario's chart: goodput per half second per contender, the fault shaded.
fn chart(run: &ScenarioRun, phases: &Phases) -> String {
    let (width, height, left, bottom, top, right) = (1200.0, 320.0, 60.0, 40.0, 20.0, 190.0);
    let plot_w = width - left - right;
    let plot_h = height - top - bottom;
    let end_s = phases.end();
    let peak = run
        .runs
        .iter()
        .flat_map(|r| r.measurement.series.iter().copied())
        .fold(0.0f64, f64::max)
        .max(run.scenario.critical_rps + run.scenario.fault.sheddable_rps)
        * 1.05;
    let x = |s: f64| left + s / end_s * plot_w;
    let y = |v: f64| top + plot_h - v / peak * plot_h;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="goodput over time, {}">"#,
        escape(run.scenario.name)
    );
    let _ = write!(
        svg,
        r##"<rect x="{:.1}" y="{top}" width="{:.1}" height="{plot_h}" fill="#f3d9d9"/>"##,
        x(phases.fault_start()),
        x(phases.fault_end()) - x(phases.fault_start())
    );
    let _ = write!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" font-size="12" fill="#a33">fault</text>"##,
        x(phases.fault_start()) + 4.0,
        top + 14.0
    );
    // Axes and grid.
    for i in 0..=5 {
        let v = peak / 5.0 * f64::from(i);
        let _ = write!(
            svg,
            r##"<line x1="{left}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{v:.0}</text>"##,
            left + plot_w,
            y(v),
            y(v),
            left - 6.0,
            y(v) + 4.0
        );
    }
    let step = if end_s > 20.0 { 5.0 } else { 1.0 };
    let mut s = 0.0;
    while s <= end_s + 1e-9 {
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{s:.0}</text>"#,
            x(s),
            top + plot_h + 16.0
        );
        s += step;
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">seconds (0.5 s buckets)</text><text x="14" y="{:.1}" font-size="12" transform="rotate(-90 14 {:.1})" text-anchor="middle">successful answers/s</text>"#,
        left + plot_w / 2.0,
        height - 6.0,
        top + plot_h / 2.0,
        top + plot_h / 2.0
    );
    for (i, r) in run.runs.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let points: Vec<String> = r
            .measurement
            .series
            .iter()
            .enumerate()
            .map(|(k, v)| format!("{:.1},{:.1}", x((k as f64 + 0.5) * 0.5), y(*v)))
            .collect();
        let dash = if r.contender.is_ours() {
            ""
        } else {
            r#" stroke-dasharray="6 3""#
        };
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{}"/>"#,
            points.join(" ")
        );
        let ly = top + 16.0 + 20.0 * i as f64;
        let _ = write!(
            svg,
            r#"<line x1="{:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="3"{dash}/><text x="{:.1}" y="{:.1}" font-size="12">{}</text>"#,
            width - right + 12.0,
            width - right + 40.0,
            width - right + 46.0,
            ly + 4.0,
            escape(r.name)
        );
    }
    svg.push_str("</svg>");
    svg
}

fn html_table(run: &ScenarioRun) -> String {
    let mut out = String::from("<table><thead><tr>");
    for c in COLUMNS {
        let _ = write!(out, "<th>{}</th>", escape(c));
    }
    out.push_str("</tr></thead><tbody>");
    for r in &run.runs {
        out.push_str("<tr>");
        for cell in row(r) {
            let _ = write!(out, "<td>{}</td>", escape(&cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

/// The page: a chart and a table per scenario, where each contender's configuration comes
/// from, and the machine's load during the run.
pub fn html(report: &RunReport) -> String {
    let mut out = String::from(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>proving ground</title><style>
body{font-family:system-ui,sans-serif;margin:24px;max-width:1240px;color:#222}
table{border-collapse:collapse;font-size:12px;margin:8px 0 28px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th:first-child,td:first-child{text-align:left}
h2{margin-top:36px}
.note{font-size:13px;color:#555}
</style></head><body>"#,
    );
    let _ = write!(
        out,
        "<h1>proving ground{}</h1><p class=\"note\">A dependency of {} slots of {:.0} ms ({:.0} req/s), an open-loop Poisson load with a 1 s client timeout, each contender in its own process against a fresh dependency, one after another. Phases: {} s healthy, {} s of fault, {} s after ({} s warm-up not measured). {} CPUs; the run took {:.0} s. Solid lines: this engine; dashed: the others.</p>",
        if report.quick {
            " (--quick: a smoke run, not a result)"
        } else {
            ""
        },
        report.slots,
        report.service_time_ms,
        report.capacity_rps,
        report.phases.baseline_s,
        report.phases.fault_s,
        report.phases.after_s,
        report.phases.warmup_s,
        report.cpus,
        report.took_s
    );
    for run in &report.scenarios {
        let _ = write!(
            out,
            "<h2>{}</h2><p class=\"note\">{}</p>{}{}",
            escape(run.scenario.name),
            escape(&heading(run, &report.phases)),
            chart(run, &report.phases),
            html_table(run)
        );
    }
    out.push_str("<h2>Where each configuration comes from</h2><ul>");
    if let Some(first) = report.scenarios.first() {
        for r in &first.runs {
            let _ = write!(
                out,
                "<li><b>{}</b>: {}</li>",
                escape(r.name),
                escape(r.source)
            );
        }
    }
    out.push_str("</ul><h2>Machine load</h2><p class=\"note\">The 1-minute load average before and after each contender's run (<code>/proc/loadavg</code>); above the CPU count, other work shared the machine.</p><table><thead><tr><th>scenario</th><th>contender</th><th>before</th><th>after</th><th>generator lag mean/max ms</th></tr></thead><tbody>");
    for run in &report.scenarios {
        for r in &run.runs {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}/{:.0}</td></tr>",
                escape(run.scenario.name),
                escape(r.name),
                num(r.load_average.0, 2),
                num(r.load_average.1, 2),
                r.mean_lag_ms,
                r.max_lag_ms
            );
        }
    }
    out.push_str("</tbody></table></body></html>\n");
    out
}
