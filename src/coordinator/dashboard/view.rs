//! Rendering: the page templates and the formatting of figures. Templates are minijinja with
//! HTML auto-escaping (every template name ends in `.html`), so an app id, user or tag is text
//! on the page whatever it contains; only the SVG charts, built from numbers in `chart.rs`, are
//! passed through as markup.

use minijinja::{Environment, Value};
use serde::Serialize;

/// Seconds between the page's own reloads (`<meta http-equiv="refresh">`): no script needed.
pub const REFRESH_SECS: u64 = 10;

const BASE: &str = r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{{ refresh_secs }}">
<title>{{ title }} · Spillway</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#f6f7f9}
header{background:#1f3a5f;color:#fff;padding:10px 20px}header a{color:#fff;text-decoration:none;font-weight:600}
header span{opacity:.75;margin-left:12px;font-size:12px}
main{padding:16px 20px}h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:20px 0 8px}
table{border-collapse:collapse;background:#fff;width:100%}th,td{border:1px solid #e2e4e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.cards{display:flex;gap:10px;flex-wrap:wrap}.card{background:#fff;border:1px solid #e2e4e8;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:22px}.ACTIVE{color:#17813a}.UNHEALTHY{color:#c46a00}.LOST{color:#c0262d}
.DECOMMISSIONING,.DECOMMISSIONED{color:#2458b3}.tag{background:#e8edf5;border-radius:3px;padding:0 5px;margin-right:3px;font-size:12px}
.na{color:#888}.charts{display:flex;gap:12px;flex-wrap:wrap}.chart{background:#fff;border:1px solid #e2e4e8}
.chart-title{font-weight:600;font-size:12px}.axis{font-size:11px;fill:#555}.legend{font-size:11px}.note{color:#666;font-size:12px}
</style></head><body>
<header><a href="/dashboard">Spillway dashboard</a><span>coordinator {{ coordinator }} · {{ generated }} · refreshes every {{ refresh_secs }} s</span></header>
<main>{{ body }}</main></body></html>
"#;

const CLUSTER: &str = r#"{% macro pager(p, id) %}{% if p.pages > 1 %}<p class="pager" id="{{ id }}">Rows {{ p.first_row }}–{{ p.last_row }} of {{ p.total }} · page {{ p.page }} of {{ p.pages }}{% if p.first %} · <a href="{{ p.first }}" rel="first">first</a>{% endif %}{% if p.prev %} · <a href="{{ p.prev }}" rel="prev">previous</a>{% endif %}{% if p.next %} · <a href="{{ p.next }}" rel="next">next</a>{% endif %}{% if p.last %} · <a href="{{ p.last }}" rel="last">last</a>{% endif %}</p>{% endif %}{% endmacro %}<h1>Cluster</h1>
<div class="cards">
{% for c in cards %}<div class="card {{ c.class }}" data-card="{{ c.label }}">{{ c.label }}<b>{{ c.value }}</b></div>{% endfor %}
</div>
<h2>Last hour</h2>
<div class="charts">{{ memory_chart }}{{ throughput_chart }}</div>
<p class="note">Memory from heartbeats; throughput from each server's total_received_data / total_read_data counters on its HTTP port, sampled every {{ interval }}. Gaps are unknown values.</p>
<h2>Servers ({{ server_pager.total }})</h2>
{{ pager(server_pager, "server-pager") }}
{% if servers %}<table id="servers"><tr><th>Server</th><th>Status</th><th>Tags</th><th>Memory used / capacity</th><th>Pre-allocated</th><th>Disks</th><th>Write</th><th>Read</th><th>Version</th><th>Last heartbeat</th></tr>
{% for s in servers %}<tr data-server="{{ s.id }}">
<td><a href="{{ s.href }}">{{ s.id }}</a></td><td class="{{ s.status }}">{{ s.status }}</td>
<td>{% for t in s.tags %}<span class="tag">{{ t }}</span>{% endfor %}</td>
<td class="num" data-used="{{ s.used_bytes }}" data-capacity="{{ s.capacity_bytes }}">{{ s.used }} / {{ s.capacity }}</td>
<td class="num">{{ s.pre_allocated }}</td><td>{{ s.disks }}</td>
<td class="num">{{ s.write_rate }}</td><td class="num">{{ s.read_rate }}</td>
<td>{{ s.version }}</td><td>{{ s.heartbeat }}</td></tr>{% endfor %}
</table>{% else %}<p class="na">No server has sent a heartbeat.</p>{% endif %}
<h2>Applications ({{ app_pager.total }})</h2>
{{ pager(app_pager, "app-pager") }}
{% if apps %}<table id="apps"><tr><th>Application</th><th>User</th><th>Servers holding data</th><th>Partitions</th><th>Size</th><th>Registered</th><th>Last heartbeat</th></tr>
{% for a in apps %}<tr data-app="{{ a.id }}">
<td><a href="{{ a.href }}">{{ a.id }}</a></td><td>{{ a.user }}</td><td class="num">{{ a.servers }}</td>
<td class="num">{{ a.partitions }}</td><td class="num" data-bytes="{{ a.size_bytes }}">{{ a.size }}</td>
<td>{{ a.registered }}</td><td>{{ a.updated }}</td></tr>{% endfor %}
</table>{% else %}<p class="na">No live application.</p>{% endif %}
"#;

const SERVER: &str = r#"<h1>Server <span id="server-id">{{ s.id }}</span> <span class="{{ s.status }}" id="server-status">{{ s.status }}</span></h1>
<table id="server"><tr><th>Address</th><td>{{ s.ip }} · gRPC {{ s.grpc_port }} · Netty {{ s.netty_port }} · HTTP {{ s.jetty_port }}</td></tr>
<tr><th>Tags</th><td>{% for t in s.tags %}<span class="tag">{{ t }}</span>{% endfor %}</td></tr>
<tr><th>Memory used / capacity</th><td data-used="{{ s.used_bytes }}" data-capacity="{{ s.capacity_bytes }}">{{ s.used }} / {{ s.capacity }}</td></tr>
<tr><th>Available</th><td>{{ s.available }}</td></tr>
<tr><th>Pre-allocated</th><td>{{ s.pre_allocated }}</td></tr>
<tr><th>Flush events in progress</th><td>{{ s.flush_events }}</td></tr>
<tr><th>Version</th><td>{{ s.version }} {{ s.git_commit }}</td></tr>
<tr><th>Started</th><td>{{ s.started }}</td></tr>
<tr><th>Registered</th><td>{{ s.registered }}</td></tr>
<tr><th>Last heartbeat</th><td>{{ s.heartbeat }}</td></tr></table>
<h2>Last hour</h2>
<div class="charts">{{ memory_chart }}{{ throughput_chart }}</div>
<h2>Disks</h2>
{% if disks %}<table id="disks"><tr><th>Mount</th><th>Media</th><th>Status</th><th>Used / capacity</th></tr>
{% for d in disks %}<tr><td>{{ d.mount }}</td><td>{{ d.media }}</td><td>{{ d.status }}</td><td class="num">{{ d.used }} / {{ d.capacity }}</td></tr>{% endfor %}
</table>{% else %}<p class="na">n/a: the server's heartbeat reports no disk.</p>{% endif %}
<h2>Applications on this server</h2>
{% if apps %}<table id="server-apps"><tr><th>Application</th><th>Partitions</th><th>Memory</th><th>Local files</th><th>Remote</th><th>Total</th></tr>
{% for a in apps %}<tr><td><a href="{{ a.href }}">{{ a.id }}</a></td><td class="num">{{ a.partitions }}</td><td class="num">{{ a.memory }}</td><td class="num">{{ a.local }}</td><td class="num">{{ a.hadoop }}</td><td class="num">{{ a.total }}</td></tr>{% endfor %}
</table>{% else %}<p class="na">None reported (servers older than 0.10 do not report their apps).</p>{% endif %}
{% if s.metrics %}<h2>Display metrics</h2><table>{% for m in s.metrics %}<tr><th>{{ m.0 }}</th><td>{{ m.1 }}</td></tr>{% endfor %}</table>{% endif %}
"#;

const APP: &str = r#"<h1>Application <span id="app-id">{{ a.id }}</span></h1>
<table id="app"><tr><th>User</th><td id="app-user">{{ a.user }}</td></tr>
<tr><th>Client version</th><td>{{ a.version }} {{ a.git_commit }}</td></tr>
<tr><th>Registered</th><td>{{ a.registered }}</td></tr>
<tr><th>Last heartbeat</th><td>{{ a.updated }}</td></tr></table>
<h2>Storage, summed over {{ storage.servers }} server{% if storage.servers != 1 %}s{% endif %}</h2>
<table id="app-storage"><tr><th>Partitions</th><td id="app-partitions" class="num">{{ storage.partitions }}</td></tr>
<tr><th>Memory</th><td id="app-memory" class="num" data-bytes="{{ storage.memory_bytes }}">{{ storage.memory }}</td></tr>
<tr><th>Local files</th><td id="app-local" class="num" data-bytes="{{ storage.local_bytes }}">{{ storage.local }}</td></tr>
<tr><th>Local file count</th><td id="app-local-files" class="num">{{ storage.local_files }}</td></tr>
<tr><th>Remote (HDFS, object storage)</th><td id="app-remote" class="num" data-bytes="{{ storage.remote_bytes }}">{{ storage.remote }}</td></tr>
<tr><th>Remote file count</th><td id="app-remote-files" class="num">{{ storage.remote_files }}</td></tr>
<tr><th>Total received</th><td id="app-size" class="num" data-bytes="{{ storage.size_bytes }}">{{ storage.size }}</td></tr></table>
<h2>Shuffles assigned by this coordinator</h2>
{% if shuffles %}<table id="shuffles"><tr><th>Shuffle</th><th>Partitions</th><th>Servers</th></tr>
{% for sh in shuffles %}<tr data-shuffle="{{ sh.id }}"><td class="num">{{ sh.id }}</td><td class="num">{{ sh.partitions }}</td><td>{% for s in sh.servers %}<a href="{{ s.href }}">{{ s.id }}</a> {% endfor %}</td></tr>{% endfor %}
</table>{% else %}<p class="na">None.</p>{% endif %}
<h2>Per server</h2>
{% if servers %}<table id="app-servers"><tr><th>Server</th><th>Partitions assigned</th><th>Partitions held</th><th>Memory</th><th>Local files</th><th>Remote</th><th>Total</th></tr>
{% for s in servers %}<tr><td><a href="{{ s.href }}">{{ s.id }}</a></td><td class="num">{{ s.assigned }}</td><td class="num">{{ s.partitions }}</td><td class="num">{{ s.memory }}</td><td class="num">{{ s.local }}</td><td class="num">{{ s.hadoop }}</td><td class="num" data-bytes="{{ s.total_bytes }}">{{ s.total }}</td></tr>{% endfor %}
</table>{% else %}<p class="na">No server reports data of this application.</p>{% endif %}
"#;

const NOT_FOUND: &str = r#"<h1 id="not-found">{{ what }} not found</h1>
<p>No live {{ what|lower }} has the id <code>{{ id }}</code>. It may have expired after its last heartbeat.</p>
<p><a href="/dashboard">Back to the cluster</a></p>
"#;

/// The compiled templates. Built once per router.
pub struct Views {
    env: Environment<'static>,
}

impl Views {
    /// Compiles the templates; they are constants, so failing here is a bug in this file and
    /// the unit tests catch it.
    pub fn new() -> Result<Self, minijinja::Error> {
        let mut env = Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.add_template("base.html", BASE)?;
        env.add_template("cluster.html", CLUSTER)?;
        env.add_template("server.html", SERVER)?;
        env.add_template("app.html", APP)?;
        env.add_template("not_found.html", NOT_FOUND)?;
        Ok(Views { env })
    }

    /// Renders the body template `name` with `page`, then the page frame around it with
    /// `frame`.
    pub fn render(
        &self,
        name: &str,
        frame: impl Serialize,
        page: impl Serialize,
    ) -> Result<String, minijinja::Error> {
        let body = self
            .env
            .get_template(name)?
            .render(minijinja::value::Serde(&page))?;
        self.env
            .get_template("base.html")?
            .render(minijinja::context! {
                body => Value::from_safe_string(body),
                ..Value::from(minijinja::value::Serde(&frame))
            })
    }
}

/// A chart's markup for a template: built by `chart.rs` from numbers and fixed labels only.
pub fn svg(markup: String) -> Value {
    Value::from_safe_string(markup)
}

/// HTML-escapes `s` (for markup built outside the templates).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `1.5 GiB`-style, in binary units as Uniffle's capacities are configured.
pub fn human_bytes(n: i64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n.unsigned_abs() as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    let sign = if n < 0 { "-" } else { "" };
    if unit == 0 {
        format!("{sign}{v} B")
    } else {
        format!("{sign}{v:.1} {}", UNITS[unit])
    }
}

/// A wall-clock time (ms since the epoch) as UTC, `n/a` for Java's "not sent" (≤ 0).
pub fn time(ms: i64) -> String {
    if ms <= 0 {
        return "n/a".into();
    }
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "n/a".into())
}

/// How long ago `ms` was, from `now_ms`.
pub fn ago(ms: i64, now_ms: i64) -> String {
    if ms <= 0 {
        return "n/a".into();
    }
    let secs = (now_ms - ms).max(0) / 1000;
    match secs {
        0..=119 => format!("{secs} s ago"),
        120..=7199 => format!("{} min ago", secs / 60),
        _ => format!("{} h ago", secs / 3600),
    }
}

/// `s`, or `n/a` when empty (a field the sender did not fill).
pub fn or_na(s: &str) -> String {
    if s.is_empty() {
        "n/a".into()
    } else {
        s.to_owned()
    }
}

/// The path of a page for `id`: the id percent-encoded as one path segment (the template
/// escapes it again for HTML).
pub fn href(kind: &str, id: &str) -> String {
    let segment = percent_encoding::utf8_percent_encode(id, percent_encoding::NON_ALPHANUMERIC);
    format!("/dashboard/{kind}/{segment}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_compile_and_escape_what_they_show() {
        let views = Views::new().unwrap();
        let html = views
            .render(
                "not_found.html",
                minijinja::context! {
                    title => "x", refresh_secs => 10, coordinator => "c", generated => "g",
                },
                minijinja::context! { what => "Application", id => "<script>alert(1)</script>" },
            )
            .unwrap();
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"),
            "{html}"
        );
        assert!(!html.contains("<script>"));
    }

    #[test]
    fn figures_read_as_people_read_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 * 1024 * 1024 / 2), "1.5 MiB");
        assert_eq!(time(-1), "n/a");
        assert_eq!(ago(1_000, 61_000), "60 s ago");
        assert_eq!(or_na(""), "n/a");
        assert_eq!(href("app", "a/b <c>"), "/dashboard/app/a%2Fb%20%3Cc%3E");
    }
}
