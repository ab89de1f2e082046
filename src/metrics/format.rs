//! The two formats of Uniffle's metric endpoints: Prometheus text 0.0.4 and the JSON sample
//! list (`{"metrics":[{name,labelNames,labelValues,value,timestampMs}],"timeStamp":ms}`) that
//! simpleclient's samples turn into under Jackson, which the Uniffle Kubernetes operator reads.

use prometheus::proto::{Metric, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};
use serde_json::{json, Value};

/// Content type of the text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Prometheus text format of `families`. A family without samples is written as its HELP
/// and TYPE lines only, as simpleclient writes a labelled family with no children (the
/// `prometheus` encoder refuses such a family, so those two lines are written here).
pub fn text(families: &[MetricFamily]) -> String {
    let mut out = Vec::new();
    let encoder = TextEncoder::new();
    for f in families {
        if f.get_metric().is_empty() {
            let ty = match f.get_field_type() {
                MetricType::COUNTER => "counter",
                MetricType::GAUGE => "gauge",
                MetricType::SUMMARY => "summary",
                MetricType::HISTOGRAM => "histogram",
                MetricType::UNTYPED => "untyped",
            };
            let help = f.help().replace('\\', "\\\\").replace('\n', "\\n");
            out.extend_from_slice(
                format!("# HELP {} {help}\n# TYPE {} {ty}\n", f.name(), f.name()).as_bytes(),
            );
        } else if let Err(e) = encoder.encode(std::slice::from_ref(f), &mut out) {
            // Encoding into a Vec fails only on a family without metrics, handled above.
            tracing::warn!(family = f.name(), error = %e, "metrics text encoding failed");
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A number as Jackson writes a double: NaN and infinities as strings.
fn number(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else if v.is_nan() {
        json!("NaN")
    } else if v > 0.0 {
        json!("Infinity")
    } else {
        json!("-Infinity")
    }
}

fn sample(name: &str, metric: &Metric, extra: Option<(&str, String)>, value: f64) -> Value {
    let mut names: Vec<String> = metric
        .get_label()
        .iter()
        .map(|l| l.name().to_owned())
        .collect();
    let mut values: Vec<String> = metric
        .get_label()
        .iter()
        .map(|l| l.value().to_owned())
        .collect();
    if let Some((k, v)) = extra {
        names.push(k.to_owned());
        values.push(v);
    }
    json!({
        "name": name,
        "labelNames": names,
        "labelValues": values,
        "value": number(value),
        "timestampMs": null,
    })
}

/// The JSON sample list of `families`, stamped `now_ms`. Summaries list their quantiles, then
/// `_count` and `_sum`; histograms their buckets, `_count` and `_sum` (simpleclient's order).
pub fn json(families: &[MetricFamily], now_ms: i64) -> Value {
    let mut samples = Vec::new();
    for f in families {
        let name = f.name();
        for m in f.get_metric() {
            match f.get_field_type() {
                MetricType::COUNTER => {
                    samples.push(sample(name, m, None, m.get_counter().get_value()))
                }
                MetricType::GAUGE => samples.push(sample(name, m, None, m.get_gauge().get_value())),
                // Nothing here registers untyped metrics.
                MetricType::UNTYPED => {}
                MetricType::SUMMARY => {
                    let s = m.get_summary();
                    for q in s.get_quantile() {
                        samples.push(sample(
                            name,
                            m,
                            Some(("quantile", q.quantile().to_string())),
                            q.value(),
                        ));
                    }
                    samples.push(sample(
                        &format!("{name}_count"),
                        m,
                        None,
                        s.sample_count() as f64,
                    ));
                    samples.push(sample(&format!("{name}_sum"), m, None, s.sample_sum()));
                }
                MetricType::HISTOGRAM => {
                    let h = m.get_histogram();
                    for b in h.get_bucket() {
                        samples.push(sample(
                            &format!("{name}_bucket"),
                            m,
                            Some(("le", b.upper_bound().to_string())),
                            b.cumulative_count() as f64,
                        ));
                    }
                    // simpleclient always ends with the `+Inf` bucket (the text encoder adds
                    // it too when the family's buckets stop short of it).
                    if h.get_bucket()
                        .last()
                        .is_none_or(|b| b.upper_bound().is_finite())
                    {
                        samples.push(sample(
                            &format!("{name}_bucket"),
                            m,
                            Some(("le", "+Inf".to_owned())),
                            h.get_sample_count() as f64,
                        ));
                    }
                    samples.push(sample(
                        &format!("{name}_count"),
                        m,
                        None,
                        h.get_sample_count() as f64,
                    ));
                    samples.push(sample(&format!("{name}_sum"), m, None, h.get_sample_sum()));
                }
            }
        }
    }
    json!({ "metrics": samples, "timeStamp": now_ms })
}
