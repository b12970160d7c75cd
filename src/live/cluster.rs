//! A live cluster read on demand (the command line's source): discovery and schemas asked once,
//! objects GET when a check or a query needs them, lists of metadata for inventories. Never a
//! write, never a dry-run: writes go through [`Api`] by the applier.

use super::ObjectRef;
use super::api::{Api, ClusterError, ClusterOptions, resource_path};
use super::discovery::{ServedResource, Types};
use super::state::{LiveError, LiveState, Stored};
use crate::catalog::Catalog;
use crate::schema::Gvk;
use futures::{StreamExt, TryStreamExt};
use std::collections::BTreeSet;
use std::sync::Arc;

/// How many GETs run at once.
const CONCURRENCY: usize = 16;

/// A connected cluster.
pub struct Cluster {
    api: Api,
    namespace: String,
    version: String,
    types: Types,
    /// Every served resource (discovery), read when first needed.
    resources: tokio::sync::OnceCell<Vec<ServedResource>>,
}

impl Cluster {
    /// Resolves the kubeconfig and checks that the apiserver answers (`GET /version`).
    pub async fn connect(opts: &ClusterOptions) -> Result<Cluster, ClusterError> {
        let (api, namespace) = Api::connect(opts).await?;
        let v = api.get_json("/version").await?.ok_or_else(|| {
            ClusterError::new(format!("cluster {}: /version not found", api.url()))
        })?;
        Ok(Cluster {
            version: v.str_at(&["gitVersion"]).unwrap_or("").to_string(),
            api,
            namespace,
            types: Types::default(),
            resources: tokio::sync::OnceCell::new(),
        })
    }

    /// The async API underneath (for writes).
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// Every resource type served, in each group's preferred version.
    pub async fn resources(&self) -> Result<&[ServedResource], ClusterError> {
        self.resources
            .get_or_try_init(|| self.api.resources())
            .await
            .map(Vec::as_slice)
    }

    /// The served resource of a reference's kind (its group's preferred version).
    async fn resource(&self, r: &ObjectRef) -> Result<Option<ServedResource>, ClusterError> {
        Ok(self
            .resources()
            .await?
            .iter()
            .find(|s| s.serves(r))
            .cloned())
    }

    /// One object read in `api_version`; `None` if it does not exist or its type is not
    /// served (yet: its CRD may be in the manifests).
    async fn read_in(
        &self,
        r: &ObjectRef,
        api_version: &str,
    ) -> Result<Option<Stored>, ClusterError> {
        if self.types.served(&self.api, api_version).await?.is_none() {
            return Ok(None);
        }
        let Some(d) = self
            .types
            .discovered(&Gvk::from_api_version(api_version, &r.kind))
        else {
            return Ok(None);
        };
        let ns = if d.namespaced {
            r.namespace.as_str()
        } else {
            ""
        };
        let path = resource_path(api_version, &d.plural, ns, Some(&r.name));
        Ok(self.api.get_json(&path).await?.map(Arc::new))
    }

    async fn get_in(
        &self,
        res: &ServedResource,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Stored>, ClusterError> {
        let ns = if res.namespaced { namespace } else { "" };
        let path = resource_path(&res.api_version, &res.plural, ns, Some(name));
        Ok(self.api.get_json(&path).await?.map(Arc::new))
    }
}

#[async_trait::async_trait]
impl LiveState for Cluster {
    fn describe(&self) -> String {
        format!("cluster {} ({})", self.api.url(), self.version)
    }

    async fn catalog(&self, api_versions: &BTreeSet<String>) -> Result<Catalog, LiveError> {
        Ok(self.types.catalog(&self.api, api_versions).await?)
    }

    async fn get(&self, r: &ObjectRef) -> Result<Option<Stored>, LiveError> {
        match self.resource(r).await? {
            Some(res) => Ok(self.get_in(&res, &r.namespace, &r.name).await?),
            None => Ok(None),
        }
    }

    async fn fetch_fresh(
        &self,
        refs: &[(ObjectRef, String)],
    ) -> Result<Vec<Option<Stored>>, LiveError> {
        let reads: Vec<_> = refs.iter().map(|(r, av)| self.read_in(r, av)).collect();
        let got: Vec<Option<Stored>> = futures::stream::iter(reads)
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        Ok(got)
    }

    async fn list(&self, namespace: Option<&str>) -> Result<Vec<(ObjectRef, Stored)>, LiveError> {
        let mut out = Vec::new();
        for r in self.resources().await?.iter().filter(|r| r.listable) {
            for (k, v) in self.api.list_metadata(r, namespace).await? {
                out.push((k, Arc::new(v)));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    async fn find(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<(ObjectRef, Stored)>, LiveError> {
        let resources = self.resources().await?;
        let Some(res) = resources.iter().find(|r| r.matches(kind)) else {
            return Err(LiveError::UnknownKind(kind.to_string()));
        };
        let ns = if namespace.is_empty() {
            self.namespace.as_str()
        } else {
            namespace
        };
        Ok(self
            .get_in(res, ns, name)
            .await?
            .map(|o| (ObjectRef::of(&o), o))
            .into_iter()
            .collect())
    }

    fn resource_of(&self, r: &ObjectRef) -> Option<String> {
        self.resources
            .get()?
            .iter()
            .find(|s| s.serves(r))
            .map(|s| s.plural.clone())
    }

    fn default_namespace(&self) -> Option<String> {
        Some(self.namespace.clone())
    }

    fn api(&self) -> Option<Api> {
        Some(self.api.clone())
    }
}
