//! What a cluster serves: discovery (`/api`, `/apis/<group>/<version>`) and published schemas
//! (`/openapi/v3` and its per-group-version documents, which include CRDs' schemas), turned
//! into a [`Catalog`] and the list of [`ServedResource`]s.

use super::api::{Api, ClusterError};
use crate::catalog::{Catalog, DEFAULT_KUBERNETES, Discovered};
use crate::schema::{Gvk, Schema, openapi_v3};
use crate::validation::Structural;
use crate::value::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The structural schemas of a published document's types that are not built-in kinds: the
/// custom resources, which the apiserver validates against them.
fn custom_resource_schemas(doc: &Value) -> Vec<(Gvk, Arc<Structural>)> {
    let Some(components) = doc
        .get_path(&["components", "schemas"])
        .and_then(Value::as_map)
    else {
        return Vec::new();
    };
    let builtin = crate::schema::builtin::kubernetes(DEFAULT_KUBERNETES).ok();
    let mut out = Vec::new();
    for (_, spec) in components.iter() {
        for gvk in crate::schema::openapi_v2::gvk_list(spec) {
            if builtin.is_some_and(|b| b.type_for(&gvk).is_some()) {
                continue;
            }
            let mut s = Structural::from_value(spec, Some(components));
            // A CRD's published schema is inline (its only reference is ObjectMeta); an
            // aggregated API's types refer to others, and carry openapi-gen's `default`s
            // (`{}`, `""`), which that server's own code applies, not structural defaulting.
            if refers_beyond_object_meta(spec, 0) {
                s.defaults_below = false;
            }
            out.push((gvk, Arc::new(s)));
        }
    }
    out
}

/// Whether a schema refers (`$ref`) to a component other than ObjectMeta.
fn refers_beyond_object_meta(v: &Value, depth: usize) -> bool {
    match v {
        _ if depth > 64 => true,
        Value::Map(m) => m.iter().any(|(k, c)| {
            if k == "$ref" {
                c.as_str().is_none_or(|r| {
                    r.trim_start_matches("#/components/schemas/") != crate::typed::OBJECT_META
                })
            } else {
                refers_beyond_object_meta(c, depth + 1)
            }
        }),
        Value::List(l) => l.iter().any(|c| refers_beyond_object_meta(c, depth + 1)),
        _ => false,
    }
}

/// What an `APIResourceList` says about each kind.
fn discovered(api_version: &str, list: &Value) -> Vec<(Gvk, Discovered)> {
    let empty = Vec::new();
    let resources = list
        .get_path(&["resources"])
        .and_then(Value::as_list)
        .unwrap_or(&empty);
    let subresources: BTreeSet<&str> = resources
        .iter()
        .filter_map(|r| r.str_at(&["name"]))
        .filter(|n| n.contains('/'))
        .collect();
    let mut out = BTreeMap::new();
    for r in resources {
        let (Some(name), Some(kind)) = (r.str_at(&["name"]), r.str_at(&["kind"])) else {
            continue;
        };
        if name.contains('/') {
            continue;
        }
        let namespaced = matches!(r.get_path(&["namespaced"]), Some(Value::Bool(true)));
        let gvk = Gvk::from_api_version(api_version, kind);
        out.insert(
            (gvk.group.clone(), gvk.version.clone(), gvk.kind.clone()),
            (
                gvk,
                Discovered {
                    namespaced,
                    plural: name.to_string(),
                    has_status: subresources.contains(format!("{name}/status").as_str()),
                },
            ),
        );
    }
    out.into_values().collect()
}

/// A served group-version's types: discovery and published schema.
#[derive(Clone, Debug)]
pub struct GvTypes {
    pub discovered: Vec<(Gvk, Discovered)>,
    pub schema: Option<Arc<Schema>>,
    /// Structural schemas of the custom resources among them (for validation).
    pub validations: Vec<(Gvk, Arc<Structural>)>,
}

impl GvTypes {
    pub fn add_to(&self, catalog: &mut Catalog) {
        for (gvk, d) in &self.discovered {
            catalog.add_discovered(gvk.clone(), d.clone());
        }
        if let Some(s) = &self.schema {
            catalog.add_served_shared(s.clone());
        }
        for (gvk, v) in &self.validations {
            catalog.add_validation(gvk.clone(), v.clone());
        }
    }
}

/// A resource type the cluster serves.
#[derive(Clone, Debug)]
pub struct ServedResource {
    pub api_version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    /// `list` among its verbs (what a snapshot reads).
    pub listable: bool,
    /// `list` and `watch` among its verbs (what the watch cache follows: kube-apiserver
    /// serves some resources, `componentstatuses`, that can be listed but not watched).
    pub watchable: bool,
}

impl ServedResource {
    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map_or("", |(g, _)| g)
    }

    /// True if this resource serves the reference's kind (its group and kind).
    pub fn serves(&self, r: &super::ObjectRef) -> bool {
        self.kind == r.kind && self.group() == r.group
    }

    /// True if `written` names this resource the way kubectl accepts it (see
    /// `live::resolve`): kind, plural, singular or short name, optionally qualified by group.
    pub fn matches(&self, written: &str) -> bool {
        super::resolve::names(
            written,
            &super::resolve::Names {
                group: self.group(),
                kind: &self.kind,
                plural: Some(&self.plural),
                singular: &self.singular,
                short_names: &self.short_names,
            },
        )
    }
}

impl Api {
    /// A catalog for these apiVersions, read now (see [`Types::catalog`]).
    pub async fn catalog_for(
        &self,
        api_versions: &BTreeSet<String>,
    ) -> Result<Catalog, ClusterError> {
        Types::default().catalog(self, api_versions).await
    }

    /// The `/openapi/v3` index (absent on clusters that do not publish v3).
    pub async fn openapi_index(&self) -> Result<Option<Value>, ClusterError> {
        self.get_json("/openapi/v3").await
    }

    /// What the cluster says about one group-version: discovery and its OpenAPI v3 schema.
    /// `None` if the group-version is not served.
    pub async fn gv_types(
        &self,
        index: &Option<Value>,
        api_version: &str,
    ) -> Result<Option<GvTypes>, ClusterError> {
        let base = if api_version.contains('/') {
            format!("apis/{api_version}")
        } else {
            format!("api/{api_version}")
        };
        let Some(resources) = self.get_json(&format!("/{base}")).await? else {
            return Ok(None);
        };
        let mut t = GvTypes {
            discovered: discovered(api_version, &resources),
            schema: None,
            validations: Vec::new(),
        };
        // The index names each document with its hash (`?hash=...`), and a hash URL answers
        // `301 Moved Permanently` (to the new hash, with no body) once the document changed:
        // a CRD of the group installed or changed since the index was read, as during a
        // release that installs CRDs. The path without the hash is the current document.
        let doc_url = index
            .as_ref()
            .and_then(|i| i.str_at(&["paths", &base, "serverRelativeURL"]))
            .map(|u| u.split_once('?').map_or(u, |(path, _)| path).to_string());
        if let Some(u) = doc_url
            && let Some(doc) = self.get_json(&u).await?
        {
            let schema = openapi_v3::from_value(&doc)
                .map_err(|e| ClusterError::new(format!("cluster {}: {u}: {e}", self.url())))?;
            t.validations = custom_resource_schemas(&doc);
            t.schema = Some(Arc::new(schema));
        }
        Ok(Some(t))
    }

    /// See [`Cluster::resources`]: by aggregated discovery (two requests) where the server
    /// aggregates, else per group-version ([`Api::resources_per_version`]).
    pub async fn resources(&self) -> Result<Vec<ServedResource>, ClusterError> {
        let mut out = Vec::new();
        for path in ["/api", "/apis"] {
            let answer = self
                .get_with_accept(path, super::aggregated::ACCEPT)
                .await?;
            match answer.as_ref().and_then(super::aggregated::resources) {
                Some(r) => out.extend(r),
                None => return self.resources_per_version().await,
            }
        }
        Ok(out)
    }

    /// The served resources read one group-version at a time (the preferred version of each
    /// group in `/apis`, and `v1`): discovery as servers without aggregation answer it.
    pub async fn resources_per_version(&self) -> Result<Vec<ServedResource>, ClusterError> {
        let mut versions = vec!["v1".to_string()];
        if let Some(groups) = self.get_json("/apis").await? {
            for g in groups
                .get_path(&["groups"])
                .and_then(Value::as_list)
                .unwrap_or(&[])
            {
                if let Some(gv) = g.str_at(&["preferredVersion", "groupVersion"]) {
                    versions.push(gv.to_string());
                }
            }
        }
        let mut out = Vec::new();
        for av in versions {
            let base = if av.contains('/') {
                format!("/apis/{av}")
            } else {
                format!("/api/{av}")
            };
            let Some(list) = self.get_json(&base).await? else {
                continue;
            };
            for r in list
                .get_path(&["resources"])
                .and_then(Value::as_list)
                .unwrap_or(&[])
            {
                let (Some(name), Some(kind)) = (r.str_at(&["name"]), r.str_at(&["kind"])) else {
                    continue;
                };
                if name.contains('/') {
                    continue;
                }
                let strings = |k: &str| -> Vec<String> {
                    r.get_path(&[k])
                        .and_then(Value::as_list)
                        .unwrap_or(&[])
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                };
                let verbs = strings("verbs");
                out.push(ServedResource {
                    api_version: av.clone(),
                    kind: kind.to_string(),
                    plural: name.to_string(),
                    singular: r.str_at(&["singularName"]).unwrap_or("").to_string(),
                    short_names: strings("shortNames"),
                    namespaced: matches!(r.get_path(&["namespaced"]), Some(Value::Bool(true))),
                    listable: verbs.iter().any(|v| v == "list"),
                    watchable: ["list", "watch"]
                        .iter()
                        .all(|w| verbs.contains(&w.to_string())),
                });
            }
        }
        Ok(out)
    }
}

/// A cluster's served types, asked once per apiVersion and kept until [`Types::clear`] (a CRD
/// changed): discovery and published schemas for catalogs, plurals for requests.
#[derive(Default)]
pub struct Types {
    /// The `/openapi/v3` index, once read (`Some(None)`: the cluster publishes none).
    index: std::sync::Mutex<Option<Option<Value>>>,
    by_version: dashmap::DashMap<String, Option<GvTypes>>,
}

impl Types {
    /// Forgets everything (the cluster's types changed).
    pub fn clear(&self) {
        self.by_version.clear();
        *self.index.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// What the cluster serves in one apiVersion (`None`: not served).
    pub async fn served(
        &self,
        api: &Api,
        api_version: &str,
    ) -> Result<Option<GvTypes>, ClusterError> {
        if let Some(t) = self.by_version.get(api_version) {
            return Ok(t.clone());
        }
        let cached = self.index.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let index = match cached {
            Some(i) => i,
            None => {
                let i = api.openapi_index().await?;
                *self.index.lock().unwrap_or_else(|p| p.into_inner()) = Some(i.clone());
                i
            }
        };
        let t = api.gv_types(&index, api_version).await?;
        self.by_version.insert(api_version.to_string(), t.clone());
        Ok(t)
    }

    /// A catalog for these apiVersions: the cluster's discovery (scope, plural, status
    /// subresource) and its published OpenAPI v3 schemas, over the newest bundled built-ins.
    pub async fn catalog(
        &self,
        api: &Api,
        api_versions: &BTreeSet<String>,
    ) -> Result<Catalog, ClusterError> {
        let mut catalog = Catalog::kubernetes(DEFAULT_KUBERNETES)
            .map_err(|e| ClusterError::new(format!("built-in schemas: {e}")))?;
        for av in api_versions {
            if let Some(t) = self.served(api, av).await? {
                t.add_to(&mut catalog);
            }
        }
        Ok(catalog)
    }

    /// What discovery said of a kind in an apiVersion already asked about.
    pub fn discovered(&self, gvk: &Gvk) -> Option<Discovered> {
        let t = self.by_version.get(&gvk.api_version())?;
        let t = t.as_ref()?;
        t.discovered
            .iter()
            .find(|(g, _)| g == gvk)
            .map(|(_, d)| d.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Defaults are a custom resource's (inline schema, ObjectMeta its only reference); an
    /// aggregated API's type, referring to other components, is not defaulted by them.
    #[test]
    fn only_inline_schemas_are_defaulted() {
        let doc = crate::value::json::parse_str(
            r##"{"components":{"schemas":{
              "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta":{"type":"object"},
              "test.Crd":{"type":"object","x-kubernetes-group-version-kind":[{"group":"t.io","version":"v1","kind":"Crd"}],
                "properties":{"metadata":{"allOf":[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]},
                  "spec":{"type":"object","properties":{"mode":{"type":"string","default":"fast"}}}}},
              "test.Aggregated":{"type":"object","x-kubernetes-group-version-kind":[{"group":"t.io","version":"v1","kind":"Aggregated"}],
                "properties":{"spec":{"default":{},"allOf":[{"$ref":"#/components/schemas/test.Spec"}]}}},
              "test.Spec":{"type":"object","properties":{"name":{"type":"string","default":""}}}}}}"##,
        )
        .unwrap();
        let schemas = custom_resource_schemas(&doc);
        let defaulted = |kind: &str| {
            schemas
                .iter()
                .find(|(g, _)| g.kind == kind)
                .map(|(_, s)| s.defaults_below)
        };
        assert_eq!(defaulted("Crd"), Some(true));
        assert_eq!(defaulted("Aggregated"), Some(false));
    }
}
