//! What a hook leaves for diagnosis. Its pods' container logs when
//! `helm.sh/hook-output-log-policy` asks for them (`hook-succeeded`, `hook-failed`; Helm 4
//! `outputLogsByPolicy`: a Job's pods by the `job-name` label, a Pod itself, every other kind
//! nothing), read before any delete policy removes the hook. The events about a failed hook
//! and its pods, always. Everything is bounded: a few pods, the tail of each log, the last
//! events.

use crate::live::api::{Api, percent_encode};
use crate::value::Value;

/// The annotation naming when a hook's logs are kept.
pub const LOG_POLICY: &str = "helm.sh/hook-output-log-policy";
/// The last this many lines of each container's log …
const TAIL_LINES: usize = 500;
/// … and at most this many bytes of them.
const MAX_LOG_BYTES: usize = 64 * 1024;
/// At most this many pods of a Job.
const MAX_PODS: usize = 10;
/// At most this many events, the latest.
const MAX_EVENTS: usize = 20;

/// One container's log.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerLog {
    pub pod: String,
    pub container: String,
    /// The log: its last 500 lines, at most 64 KiB.
    pub text: String,
}

/// True when `hook` asks for its logs after it ended with `policy` (`hook-succeeded` or
/// `hook-failed`).
pub fn wants(hook: &Value, policy: &str) -> bool {
    hook.str_at(&["metadata", "annotations", LOG_POLICY])
        .is_some_and(|s| s.split(',').any(|p| p.trim().eq_ignore_ascii_case(policy)))
}

/// The pods a hook of `kind` named `name` ran in (none for kinds that run no pods).
async fn pods(
    api: &Api,
    group: &str,
    kind: &str,
    ns: &str,
    name: &str,
) -> Result<Vec<Value>, String> {
    let base = format!("/api/v1/namespaces/{}/pods", percent_encode(ns));
    match (group, kind) {
        ("batch", "Job") => {
            let url = format!(
                "{base}?labelSelector={}&limit={MAX_PODS}",
                percent_encode(&format!("job-name={name}"))
            );
            let list = api.get_json(&url).await.map_err(|e| e.message)?;
            let items = list
                .as_ref()
                .and_then(|l| l.get_path(&["items"]))
                .and_then(Value::as_list)
                .map(|a| a.iter().take(MAX_PODS).cloned().collect())
                .unwrap_or_default();
            Ok(items)
        }
        ("", "Pod") => {
            let url = format!("{base}/{}", percent_encode(name));
            Ok(api
                .get_json(&url)
                .await
                .map_err(|e| e.message)?
                .into_iter()
                .collect())
        }
        _ => Ok(vec![]),
    }
}

fn pod_name(pod: &Value) -> &str {
    pod.str_at(&["metadata", "name"]).unwrap_or("")
}

/// The container logs of the hook's pods: each container's last 500 lines, at most 64 KiB.
pub async fn logs(
    api: &Api,
    group: &str,
    kind: &str,
    ns: &str,
    name: &str,
) -> Result<Vec<ContainerLog>, String> {
    let mut out = Vec::new();
    for pod in pods(api, group, kind, ns, name).await? {
        let pod_name = pod_name(&pod);
        let containers = pod
            .get_path(&["spec", "containers"])
            .and_then(Value::as_list)
            .unwrap_or_default();
        for c in containers {
            let Some(container) = c.str_at(&["name"]) else {
                continue;
            };
            let url = format!(
                "/api/v1/namespaces/{}/pods/{}/log?container={}&tailLines={TAIL_LINES}&limitBytes={MAX_LOG_BYTES}",
                percent_encode(ns),
                percent_encode(pod_name),
                percent_encode(container)
            );
            let text = api
                .get_text(&url, "text/plain")
                .await
                .map_err(|e| e.message)?
                .unwrap_or_default();
            out.push(ContainerLog {
                pod: pod_name.to_string(),
                container: container.to_string(),
                // A server that ignored the limits: the end is what tells why.
                text: tail(&text, MAX_LOG_BYTES).to_string(),
            });
        }
    }
    Ok(out)
}

/// The end of `s`, at most `max` bytes, cut at a character boundary.
fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut at = s.len() - max;
    while !s.is_char_boundary(at) {
        at += 1;
    }
    &s[at..]
}

/// The latest events about the hook and its pods, oldest first:
/// `Warning BackoffLimitExceeded Job/migrate: Job has reached the specified backoff limit`.
pub async fn events(api: &Api, group: &str, kind: &str, ns: &str, name: &str) -> Vec<String> {
    let mut about: Vec<(String, String)> = vec![(kind.to_string(), name.to_string())];
    if let Ok(pods) = pods(api, group, kind, ns, name).await {
        for p in &pods {
            if kind != "Pod" {
                about.push(("Pod".into(), pod_name(p).to_string()));
            }
        }
    }
    let mut seen: Vec<(String, String)> = Vec::new();
    for (k, n) in &about {
        let url = format!(
            "/api/v1/namespaces/{}/events?fieldSelector={}&limit=100",
            percent_encode(ns),
            percent_encode(&format!("involvedObject.name={n}"))
        );
        let Ok(Some(list)) = api.get_json(&url).await else {
            continue;
        };
        let items = list.get_path(&["items"]).and_then(Value::as_list);
        for e in items.unwrap_or_default() {
            // Filtered here too: the selector is the server's courtesy, not a promise.
            if e.str_at(&["involvedObject", "name"]) != Some(n)
                || e.str_at(&["involvedObject", "kind"]) != Some(k)
            {
                continue;
            }
            let when = e
                .str_at(&["lastTimestamp"])
                .or_else(|| e.str_at(&["eventTime"]))
                .or_else(|| e.str_at(&["metadata", "creationTimestamp"]))
                .unwrap_or("")
                .to_string();
            let line = format!(
                "{} {} {k}/{n}: {}",
                e.str_at(&["type"]).unwrap_or("Normal"),
                e.str_at(&["reason"]).unwrap_or(""),
                e.str_at(&["message"]).unwrap_or("").trim()
            );
            seen.push((when, line));
        }
    }
    seen.sort();
    let skip = seen.len().saturating_sub(MAX_EVENTS);
    seen.into_iter().skip(skip).map(|(_, l)| l).collect()
}

#[cfg(test)]
mod tests {
    use super::{tail, wants};
    use crate::value::yaml::parse_one;

    #[test]
    fn the_policy_is_a_comma_list_read_as_helm_reads_it() {
        let hook = |p: &str| {
            parse_one(&format!(
                "{{metadata: {{annotations: {{helm.sh/hook-output-log-policy: '{p}'}}}}}}"
            ))
            .unwrap()
        };
        assert!(wants(&hook("hook-failed"), "hook-failed"));
        assert!(!wants(&hook("hook-failed"), "hook-succeeded"));
        assert!(wants(
            &hook(" hook-succeeded , hook-failed"),
            "hook-succeeded"
        ));
        assert!(!wants(
            &parse_one("{metadata: {name: x}}").unwrap(),
            "hook-failed"
        ));
    }

    #[test]
    fn a_long_log_keeps_its_end_on_a_character_boundary() {
        assert_eq!(tail("abc", 5), "abc");
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(tail("aé", 1), "");
        assert_eq!(tail("xaé", 2), "é");
    }
}
