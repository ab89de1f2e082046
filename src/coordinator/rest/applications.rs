//! `POST /api/server/applications`: Java's `ApplicationManager.getApplications` filters and
//! pages, and the request body as Jackson reads it.

use std::collections::{HashMap, HashSet};

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};

use super::envelope::{fail, json_body, success, Ctx};
use crate::coordinator::apps::AppSnapshot;

/// Java's `ApplicationRequest`, with its defaults (page 1 of 10). The admin CLI
/// (`UniffleRestClient`/`AdminRestApi`) sends the heartbeat bounds as JSON numbers although the
/// fields are strings; Jackson coerces between the two, so this reader does as well.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ApplicationRequest {
    applications: Option<HashSet<String>>,
    #[serde(deserialize_with = "lenient_int")]
    page_size: i64,
    #[serde(deserialize_with = "lenient_int")]
    current_page: i64,
    #[serde(deserialize_with = "lenient_string")]
    heart_beat_start_time: Option<String>,
    #[serde(deserialize_with = "lenient_string")]
    heart_beat_end_time: Option<String>,
    app_id_regex: Option<String>,
}

/// A string field given as a string, a number or null.
fn lenient_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        Value::Number(n) => Ok(Some(n.to_string())),
        other => Err(serde::de::Error::custom(format!(
            "expected a string or a number, got {other}"
        ))),
    }
}

/// An int field given as a number or a numeric string.
fn lenient_int<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    match Value::deserialize(d)? {
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| serde::de::Error::custom(format!("not an integer: {n}"))),
        Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("not an integer: {s}"))),
        other => Err(serde::de::Error::custom(format!(
            "expected an integer, got {other}"
        ))),
    }
}

impl Default for ApplicationRequest {
    fn default() -> Self {
        ApplicationRequest {
            applications: None,
            page_size: 10,
            current_page: 1,
            heart_beat_start_time: None,
            heart_beat_end_time: None,
            app_id_regex: None,
        }
    }
}

/// `POST /api/server/applications`: live apps as Java's `Application` (`applicationId`,
/// `user`, `lastHeartBeatTime` as `yyyy-MM-dd HH:mm:ss` local time, `remoteStoragePath`,
/// `registerTime`), filtered by id list, full-match regex and heartbeat range (ms, inclusive),
/// sorted by id, one page of it.
pub(super) async fn applications(State(ctx): Ctx, body: Bytes) -> Response {
    let req = match json_body::<ApplicationRequest>(&body) {
        Ok(Some(req)) => req,
        Ok(None) => return fail("ApplicationRequest Is not null"),
        Err(refused) => return refused.into_response(),
    };
    let paths = ctx.coordinator.remote_storage_paths();
    match select_apps(ctx.coordinator.apps(), &paths, &req) {
        Ok(page) => success(Value::Array(page)),
        Err(msg) => fail(msg),
    }
}

fn select_apps(
    apps: Vec<AppSnapshot>,
    paths: &HashMap<String, String>,
    req: &ApplicationRequest,
) -> Result<Vec<Value>, String> {
    let regex = match req.app_id_regex.as_deref().filter(|r| !r.trim().is_empty()) {
        // Java's `matches()` is a whole-string match.
        Some(r) => Some(regex::Regex::new(&format!("^(?:{r})$")).map_err(|e| e.to_string())?),
        None => None,
    };
    let bound = |v: &Option<String>, name: &str, default: i64| match v.as_deref() {
        Some(s) if !s.trim().is_empty() => s
            .trim()
            .parse::<i64>()
            .map_err(|_| format!("{name} value must be a number!")),
        _ => Ok(default),
    };
    let start = bound(&req.heart_beat_start_time, "heartBeatStartTime", 0)?;
    let end = bound(&req.heart_beat_end_time, "heartBeatEndTime", i64::MAX)?;
    let wanted = req.applications.as_ref().filter(|s| !s.is_empty());
    // All criteria must hold, as Java's doc comment promises (its code lets the time range
    // overwrite the id and regex results; we follow the documented rule).
    let mut selected: Vec<AppSnapshot> = apps
        .into_iter()
        .filter(|a| wanted.is_none_or(|w| w.contains(&a.app_id)))
        .filter(|a| regex.as_ref().is_none_or(|r| r.is_match(&a.app_id)))
        .filter(|a| (start..=end).contains(&a.update_ms))
        .collect();
    selected.sort_by(|a, b| a.app_id.cmp(&b.app_id));
    // Java's `subList` bounds, with its exception texts.
    let from = (req.current_page - 1).saturating_mul(req.page_size);
    let to = from
        .saturating_add(req.page_size)
        .min(selected.len() as i64);
    if from < 0 {
        return Err(format!("fromIndex = {from}"));
    }
    if from > to {
        return Err(format!("fromIndex({from}) > toIndex({to})"));
    }
    Ok(selected[from as usize..to as usize]
        .iter()
        .map(|a| {
            json!({
                "applicationId": a.app_id,
                "user": a.user,
                "lastHeartBeatTime": local_time(a.update_ms),
                // The path fetchRemoteStorage gave the app; null when it never asked, as Java.
                "remoteStoragePath": paths.get(&a.app_id),
                // Java's listing never sets it.
                "registerTime": null,
            })
        })
        .collect())
}

/// `yyyy-MM-dd HH:mm:ss` in the local zone, as Java's `DateFormatUtils.format` writes it.
fn local_time(ms: i64) -> String {
    use chrono::TimeZone;
    match chrono::Local.timestamp_millis_opt(ms) {
        chrono::LocalResult::Single(t) | chrono::LocalResult::Ambiguous(t, _) => {
            t.format("%Y-%m-%d %H:%M:%S").to_string()
        }
        chrono::LocalResult::None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(id: &str, update_ms: i64) -> AppSnapshot {
        AppSnapshot {
            app_id: id.into(),
            user: "u".into(),
            registration_ms: update_ms,
            update_ms,
            version: String::new(),
            git_commit_id: String::new(),
        }
    }

    fn ids(page: &[Value]) -> Vec<&str> {
        page.iter()
            .map(|v| v["applicationId"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn application_filters_and_pages_as_java() {
        let apps: Vec<AppSnapshot> = (0..25)
            .map(|i| app(&format!("app_{i:02}"), 1000 + i))
            .collect();
        let none = HashMap::new();
        let page = select_apps(apps.clone(), &none, &ApplicationRequest::default()).unwrap();
        assert_eq!(page.len(), 10);
        assert_eq!(ids(&page)[0], "app_00");
        assert_eq!(page[0]["remoteStoragePath"], Value::Null);
        let given = HashMap::from([("app_01".to_owned(), "hdfs://ns1/rss".to_owned())]);
        let page = select_apps(apps.clone(), &given, &ApplicationRequest::default()).unwrap();
        assert_eq!(page[1]["remoteStoragePath"], "hdfs://ns1/rss");
        assert_eq!(page[0]["remoteStoragePath"], Value::Null);
        let req = ApplicationRequest {
            current_page: 3,
            ..Default::default()
        };
        assert_eq!(
            ids(&select_apps(apps.clone(), &none, &req).unwrap()),
            ["app_20", "app_21", "app_22", "app_23", "app_24"]
        );
        let req = ApplicationRequest {
            current_page: 4,
            ..Default::default()
        };
        assert_eq!(
            select_apps(apps.clone(), &none, &req).unwrap_err(),
            "fromIndex(30) > toIndex(25)"
        );
        // Regex is a whole-id match, combined with the time range.
        let req = ApplicationRequest {
            app_id_regex: Some("app_1.".into()),
            heart_beat_start_time: Some("1012".into()),
            heart_beat_end_time: Some("1014".into()),
            ..Default::default()
        };
        assert_eq!(
            ids(&select_apps(apps.clone(), &none, &req).unwrap()),
            ["app_12", "app_13", "app_14"]
        );
        let req = ApplicationRequest {
            app_id_regex: Some("app_1".into()),
            ..Default::default()
        };
        assert!(select_apps(apps.clone(), &none, &req).unwrap().is_empty());
        let req = ApplicationRequest {
            heart_beat_start_time: Some("soon".into()),
            ..Default::default()
        };
        assert_eq!(
            select_apps(apps.clone(), &none, &req).unwrap_err(),
            "heartBeatStartTime value must be a number!"
        );
        // The admin CLI's body: bounds as numbers, sizes as numbers or strings.
        let req: ApplicationRequest = serde_json::from_str(
            r#"{"heartBeatStartTime": 1020, "heartBeatEndTime": "1021", "pageSize": "1",
                "currentPage": 2}"#,
        )
        .unwrap();
        assert_eq!(
            ids(&select_apps(apps.clone(), &none, &req).unwrap()),
            ["app_21"]
        );
        assert!(serde_json::from_str::<ApplicationRequest>(r#"{"pageSize": []}"#).is_err());
        let req = ApplicationRequest {
            applications: Some(["app_03".to_owned(), "nope".to_owned()].into()),
            ..Default::default()
        };
        assert_eq!(ids(&select_apps(apps, &none, &req).unwrap()), ["app_03"]);
    }
}
