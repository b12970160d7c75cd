//! Where release records live, chosen the way Helm chooses (`HELM_DRIVER`): `secret` (the
//! default), `configmap`, or `sql` (PostgreSQL at `HELM_DRIVER_SQL_CONNECTION_STRING`, the table
//! `releases_v1` Helm's SQL driver keeps). Both kinds of records are read from the same place —
//! Helm's (`sh.helm.release.v1.*`, owner `helm`) and fieldguard's (`fieldguard.release.v1.*`,
//! owner `fieldguard`) — and fieldguard writes only its own.

use super::release::{self, History, ReleaseError, Revision};
use super::run::RunError;
use crate::live::api::{Api, ClusterError, percent_encode, resource_path};
use crate::value::{Value, json};
use std::time::Duration;

/// How long connecting to PostgreSQL, or one statement, may take.
const SQL_TIMEOUT: Duration = Duration::from_secs(30);

/// A storage driver (`HELM_DRIVER`).
#[derive(Clone, PartialEq, Eq)]
pub enum Driver {
    Secret,
    ConfigMap,
    /// PostgreSQL; the connection string (libpq key=value or URL form) holds credentials and is
    /// never printed.
    Sql(String),
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Driver {
    /// The driver `HELM_DRIVER` names (`secret`/`secrets`/unset, `configmap`/`configmaps`,
    /// `sql`), with `HELM_DRIVER_SQL_CONNECTION_STRING` for `sql`.
    pub fn choose(driver: Option<&str>, connection: Option<&str>) -> Result<Driver, ReleaseError> {
        match driver.map(str::trim).unwrap_or("") {
            "" | "secret" | "secrets" => Ok(Driver::Secret),
            "configmap" | "configmaps" => Ok(Driver::ConfigMap),
            "sql" => match connection.map(str::trim) {
                Some(c) if !c.is_empty() => Ok(Driver::Sql(c.to_string())),
                _ => Err(ReleaseError(
                    "HELM_DRIVER=sql needs HELM_DRIVER_SQL_CONNECTION_STRING (a PostgreSQL connection string, e.g. \"host=db port=5432 user=helm dbname=helm sslmode=disable\")".into(),
                )),
            },
            "memory" => Err(ReleaseError(
                "HELM_DRIVER=memory keeps records in the process that writes them; fieldguard cannot share them with Helm: use secret, configmap or sql".into(),
            )),
            other => Err(ReleaseError(format!(
                "HELM_DRIVER={other:?} is not a storage driver Helm has: use secret (the default), configmap or sql"
            ))),
        }
    }

    /// From the process environment.
    pub fn from_env() -> Result<Driver, ReleaseError> {
        Driver::choose(
            std::env::var("HELM_DRIVER").ok().as_deref(),
            std::env::var("HELM_DRIVER_SQL_CONNECTION_STRING")
                .ok()
                .as_deref(),
        )
    }

    pub fn name(&self) -> &'static str {
        match self {
            Driver::Secret => "secret",
            Driver::ConfigMap => "configmap",
            Driver::Sql(_) => "sql",
        }
    }
}

/// An open store of release records.
pub struct Store {
    driver: Driver,
    sql: Option<tokio_postgres::Client>,
}

fn sql_error(what: &str, e: impl std::fmt::Display) -> RunError {
    RunError::Refused(format!("HELM_DRIVER=sql: {what}: {e}"))
}

async fn bounded<T, E: std::fmt::Display>(
    what: &str,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, RunError> {
    match tokio::time::timeout(SQL_TIMEOUT, f).await {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(sql_error(what, e)),
        Err(_) => Err(sql_error(
            what,
            format!("no answer within {}s", SQL_TIMEOUT.as_secs()),
        )),
    }
}

/// Helm's schema (its SQL driver's migrations `init` and `custom_labels`, recorded in
/// `gorp_migrations` so Helm does not run them again).
const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS releases_v1 (
    key VARCHAR(90), type VARCHAR(64) NOT NULL, body TEXT NOT NULL, name VARCHAR(64) NOT NULL,
    namespace VARCHAR(64) NOT NULL, version INTEGER NOT NULL, status TEXT NOT NULL,
    owner TEXT NOT NULL, createdAt INTEGER NOT NULL, modifiedAt INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY(key, namespace));
CREATE INDEX IF NOT EXISTS releases_v1_key_namespace_idx ON releases_v1 (key, namespace);
CREATE INDEX IF NOT EXISTS releases_v1_version_idx ON releases_v1 (version);
CREATE INDEX IF NOT EXISTS releases_v1_status_idx ON releases_v1 (status);
CREATE INDEX IF NOT EXISTS releases_v1_owner_idx ON releases_v1 (owner);
CREATE INDEX IF NOT EXISTS releases_v1_createdAt_idx ON releases_v1 (createdAt);
CREATE INDEX IF NOT EXISTS releases_v1_modifiedAt_idx ON releases_v1 (modifiedAt);
GRANT ALL ON releases_v1 TO PUBLIC;
ALTER TABLE releases_v1 ENABLE ROW LEVEL SECURITY;
CREATE TABLE IF NOT EXISTS custom_labels_v1 (
    releaseKey VARCHAR(64), releaseNamespace VARCHAR(67), key VARCHAR(317), value VARCHAR(63));
CREATE INDEX IF NOT EXISTS custom_labels_v1_releaseKey_releaseNamespace_idx
    ON custom_labels_v1 (releaseKey, releaseNamespace);
GRANT ALL ON custom_labels_v1 TO PUBLIC;
ALTER TABLE custom_labels_v1 ENABLE ROW LEVEL SECURITY;
CREATE TABLE IF NOT EXISTS gorp_migrations (id TEXT PRIMARY KEY, applied_at TIMESTAMPTZ);
INSERT INTO gorp_migrations (id, applied_at) VALUES ('init', now()), ('custom_labels', now())
    ON CONFLICT (id) DO NOTHING;
"#;

impl Store {
    /// Opens the store; `writes`: the run records revisions (for `sql`, Helm's tables are
    /// created when the database has none yet, as Helm itself does on first use).
    pub async fn open(driver: Driver, writes: bool) -> Result<Store, RunError> {
        let sql = match &driver {
            Driver::Sql(conn) => {
                let mut config: tokio_postgres::Config = conn.parse().map_err(|e| {
                    sql_error("HELM_DRIVER_SQL_CONNECTION_STRING cannot be read", e)
                })?;
                if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
                    return Err(RunError::Refused(
                        "HELM_DRIVER=sql: sslmode=require is not supported yet; connect with sslmode=disable (or prefer) through a TLS tunnel".into(),
                    ));
                }
                if config.get_connect_timeout().is_none() {
                    config.connect_timeout(SQL_TIMEOUT);
                }
                let (client, connection) = bounded(
                    "cannot connect to PostgreSQL",
                    config.connect(tokio_postgres::NoTls),
                )
                .await?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::warn!("PostgreSQL connection closed: {e}");
                    }
                });
                let exists: Option<String> = bounded(
                    "cannot read the schema",
                    client.query_one("SELECT to_regclass('releases_v1')::text", &[]),
                )
                .await?
                .get(0);
                if exists.is_none() && writes {
                    bounded("cannot create Helm's tables", client.batch_execute(SCHEMA)).await?;
                }
                Some(client)
            }
            _ => None,
        };
        Ok(Store { driver, sql })
    }

    pub fn driver(&self) -> &Driver {
        &self.driver
    }

    /// Where the records are, for messages.
    pub fn describe(&self, ns: &str) -> String {
        match self.driver {
            Driver::Secret => format!("Secrets in namespace {ns:?}"),
            Driver::ConfigMap => format!("ConfigMaps in namespace {ns:?}"),
            Driver::Sql(_) => "PostgreSQL table releases_v1".into(),
        }
    }

    /// Both kinds of records of `release` in `ns`.
    pub async fn history(&self, api: &Api, release: &str, ns: &str) -> Result<History, RunError> {
        match (&self.driver, &self.sql) {
            (Driver::Sql(_), Some(client)) => {
                let exists: Option<String> = bounded(
                    "cannot read the schema",
                    client.query_one("SELECT to_regclass('releases_v1')::text", &[]),
                )
                .await?
                .get(0);
                let mut h = History::default();
                if exists.is_none() {
                    return Ok(h);
                }
                let rows = bounded(
                    "cannot read release records",
                    client.query(
                        "SELECT key, body, owner FROM releases_v1 WHERE name = $1 AND namespace = $2 AND owner IN ('helm', 'fieldguard') ORDER BY owner DESC, version",
                        &[&release, &ns],
                    ),
                )
                .await?;
                for row in rows {
                    let key: String = row.get(0);
                    let body: String = row.get(1);
                    let owner: String = row.get(2);
                    let decoded = if owner == "helm" {
                        release::decode_helm_body(body.as_bytes())
                    } else {
                        use base64::Engine;
                        base64::engine::general_purpose::STANDARD
                            .decode(body.trim())
                            .map_err(|e| format!("body is not base64: {e}"))
                            .and_then(release::decode_own_body)
                    };
                    h.add(release, &key, decoded);
                }
                Ok(h)
            }
            (Driver::ConfigMap, _) => {
                let helm = self
                    .list(api, "configmaps", ns, &release::helm_selector(release))
                    .await?;
                let own = self
                    .list(api, "configmaps", ns, &release::own_selector(release))
                    .await?;
                Ok(History::from_objects(
                    release,
                    &helm,
                    release::decode_helm_configmap,
                    &own,
                    release::decode_own_configmap,
                ))
            }
            _ => {
                let helm = self
                    .list(api, "secrets", ns, &release::helm_selector(release))
                    .await?;
                let own = self
                    .list(api, "secrets", ns, &release::own_selector(release))
                    .await?;
                Ok(History::from_secrets(release, &helm, &own))
            }
        }
    }

    /// Lists record objects; a cluster that does not serve them, or does not let the caller
    /// read them, is an error naming the driver and what to set.
    async fn list(
        &self,
        api: &Api,
        plural: &str,
        ns: &str,
        selector: &str,
    ) -> Result<Vec<Value>, RunError> {
        let path = format!(
            "{}?labelSelector={}",
            resource_path("v1", plural, ns, None),
            percent_encode(selector)
        );
        let hint = || {
            format!(
                "HELM_DRIVER={} keeps release records in {plural}",
                self.driver.name()
            )
        };
        match api.get_json(&path).await {
            Ok(Some(l)) => Ok(l
                .get_path(&["items"])
                .and_then(Value::as_list)
                .map(<[Value]>::to_vec)
                .unwrap_or_default()),
            // A 404 (some fronts answer it with a body that is no Status: code 0).
            Ok(None)
            | Err(ClusterError {
                code: Some(0 | 404),
                ..
            }) => Err(RunError::Refused(format!(
                "{}, but cluster {} does not serve {plural} (404 on {path}); choose a driver it can keep: HELM_DRIVER=sql with HELM_DRIVER_SQL_CONNECTION_STRING (PostgreSQL){}",
                hint(),
                api.url(),
                if plural == "secrets" {
                    ", or HELM_DRIVER=configmap"
                } else {
                    ""
                }
            ))),
            Err(e) if e.code == Some(403) => Err(RunError::Refused(format!(
                "{}, and the caller may not list {plural} in namespace {ns:?}: {}",
                hint(),
                e.message
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the record of `rev` (Helm's or fieldguard's, as `rev.source` says): an uninstall
    /// that keeps no history.
    pub async fn delete(&self, api: &Api, rev: &Revision) -> Result<(), RunError> {
        let key = match rev.source {
            release::Source::Helm => format!("sh.helm.release.v1.{}.v{}", rev.name, rev.revision),
            release::Source::Fieldguard => release::record_name(&rev.name, rev.revision),
        };
        if let (Driver::Sql(_), Some(client)) = (&self.driver, &self.sql) {
            bounded(
                "cannot delete the release record",
                client.execute(
                    "DELETE FROM releases_v1 WHERE key = $1 AND namespace = $2",
                    &[&key, &rev.namespace],
                ),
            )
            .await?;
            if rev.source == release::Source::Helm {
                bounded(
                    "cannot delete the release record's labels",
                    client.execute(
                        "DELETE FROM custom_labels_v1 WHERE releaseKey = $1 AND releaseNamespace = $2",
                        &[&key, &rev.namespace],
                    ),
                )
                .await?;
            }
            return Ok(());
        }
        let plural = match self.driver {
            Driver::ConfigMap => "configmaps",
            _ => "secrets",
        };
        let url = resource_path("v1", plural, &rev.namespace, Some(&key));
        match api
            .write(http::Method::DELETE, &url, "application/json", Vec::new())
            .await
        {
            Ok(_) => Ok(()),
            Err(Ok(s)) if s.code == 404 => Ok(()),
            Err(Ok(s)) => Err(RunError::Refused(format!(
                "cannot delete the record {key} (HELM_DRIVER={}): {} ({})",
                self.driver.name(),
                s.message,
                s.code
            ))),
            Err(Err(c)) => Err(RunError::Cluster(c.message)),
        }
    }

    /// Writes fieldguard's record of `rev` (`create`: a new revision; otherwise an update).
    pub async fn write(&self, api: &Api, rev: &Revision, create: bool) -> Result<(), RunError> {
        if let (Driver::Sql(_), Some(client)) = (&self.driver, &self.sql) {
            use base64::Engine;
            let key = release::record_name(&rev.name, rev.revision);
            let body = base64::engine::general_purpose::STANDARD.encode(release::own_body(rev));
            let now = time::OffsetDateTime::now_utc().unix_timestamp() as i32;
            let version = rev.revision as i32;
            let n = if create {
                bounded(
                    "cannot record the revision",
                    client.execute(
                        "INSERT INTO releases_v1 (key, type, body, name, namespace, version, status, owner, createdAt, modifiedAt) VALUES ($1, $2, $3, $4, $5, $6, $7, 'fieldguard', $8, $8)",
                        &[&key, &release::RECORD_TYPE, &body, &rev.name, &rev.namespace, &version, &rev.status, &now],
                    ),
                )
                .await?
            } else {
                bounded(
                    "cannot record the revision",
                    client.execute(
                        "UPDATE releases_v1 SET body = $3, status = $4, modifiedAt = $5 WHERE key = $1 AND namespace = $2 AND owner = 'fieldguard'",
                        &[&key, &rev.namespace, &body, &rev.status, &now],
                    ),
                )
                .await?
            };
            if n != 1 {
                return Err(sql_error(
                    "cannot record the revision",
                    format!("{key}: {n} rows written"),
                ));
            }
            return Ok(());
        }
        let (plural, object) = match self.driver {
            Driver::ConfigMap => ("configmaps", release::encode_own_configmap(rev)),
            _ => ("secrets", release::encode_own(rev)),
        };
        let records = resource_path("v1", plural, &rev.namespace, None);
        let body = json::to_string(&object, json::Style::PLAIN).into_bytes();
        let res = if create {
            api.write(http::Method::POST, &records, "application/json", body)
                .await
        } else {
            let url = format!(
                "{records}/{}",
                release::record_name(&rev.name, rev.revision)
            );
            api.write(http::Method::PUT, &url, "application/json", body)
                .await
        };
        res.map(|_| ()).map_err(|e| match e {
            // The apiserver answered: a refusal (no permission, a quota, the kind not
            // served), not an unreachable cluster.
            Ok(s) if s.code < 500 => RunError::Refused(format!(
                "cannot record revision {} of {} in {} (HELM_DRIVER={}): {} ({})",
                rev.revision,
                rev.name,
                self.describe(&rev.namespace),
                self.driver.name(),
                s.message,
                s.code
            )),
            Ok(s) => RunError::Cluster(format!(
                "cannot record revision {} of {}: {} ({})",
                rev.revision, rev.name, s.message, s.code
            )),
            Err(c) => RunError::Cluster(c.message),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Driver;

    #[test]
    fn drivers_are_chosen_as_helm_chooses() {
        assert_eq!(Driver::choose(None, None).unwrap(), Driver::Secret);
        assert_eq!(
            Driver::choose(Some("secrets"), None).unwrap(),
            Driver::Secret
        );
        assert_eq!(
            Driver::choose(Some("configmap"), None).unwrap(),
            Driver::ConfigMap
        );
        assert_eq!(
            Driver::choose(Some("sql"), Some("host=db user=helm")).unwrap(),
            Driver::Sql("host=db user=helm".into())
        );
        let e = Driver::choose(Some("sql"), None).unwrap_err();
        assert!(e.0.contains("HELM_DRIVER_SQL_CONNECTION_STRING"), "{e}");
        let e = Driver::choose(Some("etcd"), None).unwrap_err();
        assert!(
            e.0.contains("secret (the default), configmap or sql"),
            "{e}"
        );
        assert!(Driver::choose(Some("memory"), None).is_err());
        // The connection string holds a password: never printed.
        assert_eq!(
            format!("{:?}", Driver::Sql("password=hunter2".into())),
            "sql"
        );
    }
}
