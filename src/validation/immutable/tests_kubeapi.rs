//! The rules against kube-apiserver 1.36's own answers: cases of
//! `tests/data/kubeapi/immutable.yaml`, each by its name. The live object is the one that
//! server stored for the case's `base` (and `status`) — `testdata/kubeapi-stored.json`, as a
//! GET returned it, without the metadata it generates (uid, resourceVersion, times,
//! managedFields) — and the update is that object changed as the case's `refused` manifest
//! changes it (as the apply's merge and defaulting leave it); the errors must be the causes
//! the server answered, read from the data file itself, as a set (the server reports every
//! metadata error twice). The case's `allowed` change, made the same way, must pass.

use super::check;
use super::tests::set;
use crate::value::Value;
use crate::value::yaml::parse_one;
use std::collections::BTreeSet;
use std::sync::LazyLock;

static CASES: LazyLock<Value> = LazyLock::new(|| {
    parse_one(include_str!("../../../tests/data/kubeapi/immutable.yaml")).expect("immutable.yaml")
});

static STORED: LazyLock<Value> = LazyLock::new(|| {
    crate::value::json::parse_str(include_str!("testdata/kubeapi-stored.json"))
        .expect("kubeapi-stored.json")
});

fn case(name: &str) -> &'static Value {
    CASES
        .as_list()
        .expect("a list of cases")
        .iter()
        .find(|c| c.str_at(&["name"]) == Some(name))
        .unwrap_or_else(|| panic!("no case {name} in immutable.yaml"))
}

/// The causes the server answered for the case's `refused` apply.
fn server_causes(name: &str) -> BTreeSet<String> {
    case(name)
        .get_path(&["causes"])
        .and_then(Value::as_list)
        .into_iter()
        .flatten()
        .map(|c| c.as_str().expect("a cause").to_string())
        .collect()
}

/// The errors, as `field|reason|message`, of updating the case's stored object with
/// `changes`, through `api_version` (the stored object's when `None`).
fn errors(name: &str, api_version: Option<&str>, changes: &[(&str, &str)]) -> BTreeSet<String> {
    let old = STORED
        .get_path(&[name])
        .unwrap_or_else(|| panic!("no stored object for {name}"))
        .clone();
    let mut new = old.clone();
    for (path, to) in changes {
        set(&mut new, path, to);
    }
    let av = api_version.unwrap_or_else(|| old.str_at(&["apiVersion"]).unwrap());
    let kind = old.str_at(&["kind"]).unwrap();
    let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
    check(group, version, kind, false, &old, &new, &new)
        .iter()
        .map(|e| format!("{}|{}|{}", e.field, e.reason, e.message))
        .collect()
}

/// A case: its name, the changes its `refused` manifest makes, those its `allowed` makes.
type Case = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
);

fn judge(cases: &[Case]) {
    let mut failures = Vec::new();
    for (name, refused, allowed) in cases {
        let (got, want) = (errors(name, None, refused), server_causes(name));
        if got != want {
            failures.push(format!(
                "{name}: refused\n  got  {got:#?}\n  want {want:#?}"
            ));
        }
        let got = errors(name, None, allowed);
        if !got.is_empty() {
            failures.push(format!("{name}: allowed, but got {got:#?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn metadata() {
    judge(&[
        (
            "metadata-deletion-grace-period",
            &[("metadata/deletionGracePeriodSeconds", "30")],
            &[
                ("metadata/generation", "7"),
                ("metadata/creationTimestamp", "'2020-01-01T00:00:00Z'"),
            ],
        ),
        (
            "metadata-deletion-timestamp",
            &[("metadata/deletionTimestamp", "'2026-01-01T00:00:00Z'")],
            &[("metadata/annotations", "{note: kept}"), ("data/a", "Mg==")],
        ),
    ]);
}

/// What `rest.BeforeUpdate` keeps of an object being deleted (no case: the server deletes an
/// object without finalizers at once).
#[test]
fn metadata_of_an_object_being_deleted() {
    let old = parse_one(
        "{apiVersion: v1, kind: ConfigMap, metadata: {name: c, deletionTimestamp: '2026-01-01T00:00:00Z', deletionGracePeriodSeconds: 0, finalizers: [example.com/a]}}",
    )
    .unwrap();
    let errs = |changes: &[(&str, &str)]| -> Vec<String> {
        let mut new = old.clone();
        for (p, to) in changes {
            set(&mut new, p, to);
        }
        check("", "v1", "ConfigMap", false, &old, &new, &new)
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert!(errs(&[("metadata/deletionTimestamp", "'2027-01-01T00:00:00Z'")]).is_empty());
    assert!(errs(&[("metadata/deletionGracePeriodSeconds", "~")]).is_empty());
    assert_eq!(
        errs(&[("metadata/deletionGracePeriodSeconds", "30")]),
        ["metadata.deletionGracePeriodSeconds: Invalid value: 30: field is immutable"]
    );
    assert_eq!(
        errs(&[(
            "metadata/finalizers",
            "[example.com/b, example.com/a, example.com/c]"
        )]),
        [
            r#"metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/b", "example.com/c"}"#
        ]
    );
    assert!(errs(&[("metadata/finalizers", "[]")]).is_empty());
}

#[test]
fn storage_classes() {
    judge(&[
        (
            "storageclass-parameters",
            &[("parameters/type", "hdd")],
            &[
                ("allowVolumeExpansion", "true"),
                ("mountOptions", "[noatime]"),
            ],
        ),
        (
            "storageclass-provisioner",
            &[("provisioner", "example.com/other")],
            &[
                ("metadata/labels", "{tier: fast}"),
                (
                    "allowedTopologies",
                    "[{matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [a]}]}]",
                ),
            ],
        ),
        (
            "storageclass-reclaim-policy",
            &[
                ("reclaimPolicy", "Retain"),
                ("volumeBindingMode", "WaitForFirstConsumer"),
            ],
            &[("reclaimPolicy", "~"), ("volumeBindingMode", "~")],
        ),
    ]);
}

#[test]
fn claims_volume_attributes_classes() {
    judge(&[
        (
            "pvc-volume-attributes-class",
            &[("spec/volumeAttributesClassName", "''")],
            &[("spec/volumeAttributesClassName", "imm-silver")],
        ),
        (
            "pvc-volume-attributes-class-not-applied",
            &[("spec/resources/limits", "{storage: 2Gi}")],
            &[("spec/volumeAttributesClassName", "''")],
        ),
        (
            "pvc-pending-volume-attributes-class",
            &[("spec/volumeAttributesClassName", "imm-silver")],
            &[
                ("metadata/labels", "{tier: gold}"),
                ("spec/volumeName", "imm-pv-gold"),
            ],
        ),
    ]);
}

#[test]
fn job_policies() {
    judge(&[
        (
            "job-pod-failure-policy",
            &[
                (
                    "spec/podFailurePolicy",
                    "{rules: [{action: FailJob, onExitCodes: {containerName: main, operator: In, values: [42]}}]}",
                ),
                ("spec/podReplacementPolicy", "Failed"),
            ],
            &[
                ("spec/activeDeadlineSeconds", "300"),
                ("spec/podReplacementPolicy", "Failed"),
            ],
        ),
        (
            "job-success-policy",
            &[(
                "spec/successPolicy",
                "{rules: [{succeededIndexes: '0', succeededCount: 1}]}",
            )],
            &[("spec/completions", "2"), ("spec/parallelism", "2")],
        ),
    ]);
}

#[test]
fn pods() {
    judge(&[
        (
            "pod-image",
            &[(
                "spec/containers/0/ports",
                "[{containerPort: 80, protocol: TCP}, {containerPort: 8080, protocol: TCP}]",
            )],
            &[
                ("metadata/labels", "{rev: '2'}"),
                ("spec/initContainers/0/image", "busybox:1.37"),
                ("spec/containers/0/image", "nginx:1.28"),
            ],
        ),
        (
            "pod-termination-grace-period",
            &[("spec/terminationGracePeriodSeconds", "1")],
            &[("metadata/annotations", "{owner: team-a}")],
        ),
        (
            "pod-scheduling-gates",
            &[(
                "spec/schedulingGates",
                "[{name: example.com/quota}, {name: example.com/topology}]",
            )],
            &[
                ("spec/nodeSelector", "{disk: ssd, zone: a}"),
                (
                    "spec/affinity",
                    "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]}}}",
                ),
            ],
        ),
        (
            "pod-gated-node-selector",
            &[("spec/nodeSelector", "{disk: hdd}")],
            &[("spec/nodeSelector", "{disk: ssd, rack: r1}")],
        ),
        (
            "pod-node-selector-ungated",
            &[("spec/nodeSelector", "{disk: ssd, rack: r1}")],
            &[
                ("metadata/labels", "{placed: 'no'}"),
                ("spec/containers/0/image", "nginx:1.28"),
            ],
        ),
        (
            "pod-mirror-annotation",
            &[(
                "metadata/annotations",
                "{kubernetes.io/config.mirror: mirror}",
            )],
            &[("metadata/annotations", "{kubernetes.io/config.source: api}")],
        ),
        (
            "pod-apparmor-annotation",
            &[(
                "metadata/annotations",
                "{container.apparmor.security.beta.kubernetes.io/app: runtime/default}",
            )],
            &[(
                "metadata/annotations",
                "{example.com/apparmor: runtime/default}",
            )],
        ),
    ]);
}

/// What a gated Pod's node affinity may and may not gain, and the annotations the kubelet
/// writes once they are there (no case: upstream's `TestValidatePodUpdate`).
#[test]
fn gated_pods_and_kubelet_annotations() {
    let mut old = STORED.get_path(&["pod-scheduling-gates"]).unwrap().clone();
    set(
        &mut old,
        "spec/affinity",
        "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]}}}",
    );
    set(
        &mut old,
        "metadata/annotations",
        "{kubernetes.io/config.mirror: m, container.apparmor.security.beta.kubernetes.io/app: runtime/default}",
    );
    let errs = |changes: &[(&str, &str)]| -> Vec<String> {
        let mut new = old.clone();
        for (p, to) in changes {
            set(&mut new, p, to);
        }
        check("", "v1", "Pod", false, &old, &new, &new)
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    let terms = "spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms";
    assert!(
        errs(&[(
            terms,
            "[{matchExpressions: [{key: zone, operator: In, values: [a]}, {key: rack, operator: Exists}]}]"
        )])
        .is_empty(),
        "a requirement added"
    );
    assert_eq!(
        errs(&[(
            terms,
            "[{matchExpressions: [{key: zone, operator: In, values: [b]}]}]"
        )]),
        [
            r#"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: Invalid value: {"MatchExpressions":[{"Key":"zone","Operator":"In","Values":["b"]}],"MatchFields":null}: only additions are allowed (no mutations or deletions)"#
        ]
    );
    assert_eq!(
        errs(&[(
            terms,
            "[{matchExpressions: [{key: zone, operator: In, values: [a]}]}, {matchExpressions: [{key: rack, operator: Exists}]}]"
        )]),
        [
            r#"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Invalid value: [{"MatchExpressions":[{"Key":"zone","Operator":"In","Values":["a"]}],"MatchFields":null},{"MatchExpressions":[{"Key":"rack","Operator":"Exists","Values":null}],"MatchFields":null}]: no additions/deletions to non-empty NodeSelectorTerms list are allowed"#
        ]
    );
    let updated = errs(&[("metadata/annotations", "{kubernetes.io/config.mirror: m2}")]);
    assert_eq!(
        updated,
        [
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/app]: Forbidden: may not remove or update AppArmor annotations",
            "metadata.annotations[kubernetes.io/config.mirror]: Forbidden: may not remove or update mirror pod annotation",
        ]
    );
}

#[test]
fn volumes() {
    judge(&[
        (
            "pv-source",
            &[("spec/hostPath/path", "/tmp/imm-b")],
            &[
                ("spec/capacity/storage", "2Gi"),
                ("spec/accessModes", "[ReadWriteOnce, ReadOnlyMany]"),
                ("spec/persistentVolumeReclaimPolicy", "Delete"),
                ("spec/storageClassName", "imm-expandable"),
                ("spec/mountOptions", "[ro]"),
            ],
        ),
        (
            "pv-csi-expand-secret",
            &[(
                "spec/csi/controllerPublishSecretRef",
                "{name: publish, namespace: immutable}",
            )],
            &[
                (
                    "spec/csi/controllerExpandSecretRef",
                    "{name: expand, namespace: immutable}",
                ),
                ("spec/volumeAttributesClassName", "imm-gold"),
            ],
        ),
        (
            "pv-node-affinity-set",
            &[("spec/hostPath/type", "DirectoryOrCreate")],
            &[(
                "spec/nodeAffinity",
                "{required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node-1]}]}]}}",
            )],
        ),
    ]);
}

#[test]
fn services() {
    judge(&[
        (
            "service-ip-families",
            &[("spec/ipFamilies", "[IPv6]")],
            &[("spec/ipFamilyPolicy", "PreferDualStack")],
        ),
        (
            // The class the base manager owns stays in the merged object; the strategy drops
            // it with the type.
            "service-load-balancer-class",
            &[("spec/loadBalancerClass", "example.com/lb-b")],
            &[("spec/type", "NodePort")],
        ),
        (
            "service-load-balancer-class-from-cluster-ip",
            &[("spec/loadBalancerClass", "example.com/lb-a")],
            &[
                ("spec/type", "LoadBalancer"),
                ("spec/loadBalancerClass", "example.com/lb-a"),
            ],
        ),
    ]);
}

/// The allocator's checks before validation: its errors are the only ones (no case: a
/// single-stack cluster reaches few of them).
#[test]
fn services_refused_by_the_allocator() {
    let mut old = STORED.get_path(&["service-ip-families"]).unwrap().clone();
    set(&mut old, "metadata/uid", "u-1");
    let errs = |changes: &[(&str, &str)]| -> Vec<String> {
        let mut new = old.clone();
        for (p, to) in changes {
            set(&mut new, p, to);
        }
        check("", "v1", "Service", false, &old, &new, &new)
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert_eq!(
        errs(&[("spec/ipFamilies", "[IPv6]"), ("metadata/uid", "u-2")]),
        [
            r#"spec.clusterIPs[0]: Invalid value: "10.96.100.50": expected an IPv6 value as indicated by `ipFamilies[0]`"#
        ],
        "the allocator's errors alone"
    );
    assert_eq!(
        errs(&[("spec/clusterIPs", "[10.96.100.51]")]),
        [r#"spec.clusterIPs: Invalid value: ["10.96.100.51"]: first value must match `clusterIP`"#]
    );
    assert_eq!(
        errs(&[
            ("spec/clusterIP", "10.96.100.051"),
            ("spec/clusterIPs", "[10.96.100.051]")
        ]),
        [r#"spec.clusterIPs[0]: Invalid value: "10.96.100.051": must not have leading 0s"#]
    );
    assert_eq!(
        errs(&[
            ("spec/clusterIPs", "[10.96.100.50, 10.96.100.51]"),
            ("spec/ipFamilyPolicy", "RequireDualStack")
        ]),
        [
            r#"spec.clusterIPs: Invalid value: ["10.96.100.50","10.96.100.51"]: may specify no more than one IP for each IP family"#
        ]
    );
    assert_eq!(
        errs(&[("spec/ipFamilies", "[IPv4, IPv4]")]),
        [r#"spec.ipFamilies[1]: Duplicate value: "IPv4""#]
    );
}

#[test]
fn controller_revisions_nodes_events() {
    judge(&[
        (
            "controllerrevision-data",
            &[("data/spec/template/metadata/labels/app", "b")],
            &[("revision", "2"), ("metadata/labels", "{app: a}")],
        ),
        (
            "node-pod-cidrs",
            &[
                ("spec/podCIDR", "10.244.2.0/24"),
                ("spec/podCIDRs", "[10.244.2.0/24]"),
            ],
            &[
                ("metadata/labels", "{zone: a}"),
                ("spec/unschedulable", "true"),
                (
                    "spec/taints",
                    "[{key: dedicated, value: db, effect: NoSchedule}]",
                ),
            ],
        ),
        (
            "node-pod-cidr-set-once",
            &[("spec/providerID", "'example://node/2'")],
            &[
                ("spec/podCIDR", "10.244.3.0/24"),
                ("spec/podCIDRs", "[10.244.3.0/24]"),
            ],
        ),
        (
            "node-provider-id-set-once",
            &[("spec/externalID", "ext-2")],
            &[("spec/providerID", "'example://node/3'")],
        ),
        (
            "event-note",
            &[
                ("reason", "Failed"),
                ("type", "Warning"),
                ("note", "second"),
            ],
            &[],
        ),
    ]);
    // The core v1 API (and events.k8s.io/v1beta1) may change them.
    let changes = [
        ("reason", "Failed"),
        ("type", "Warning"),
        ("note", "second"),
    ];
    assert!(errors("event-note", Some("events.k8s.io/v1beta1"), &changes).is_empty());
}

#[test]
fn runtime_classes_and_networking() {
    judge(&[
        (
            "runtimeclass-handler",
            &[("handler", "kata")],
            &[
                ("overhead", "{podFixed: {cpu: 100m}}"),
                ("scheduling", "{nodeSelector: {runtime: runc}}"),
            ],
        ),
        (
            "ipaddress-parent-ref",
            &[("spec/parentRef/name", "svc-b")],
            &[("metadata/labels", "{owner: svc-a}")],
        ),
        (
            "servicecidr-cidrs",
            &[("spec/cidrs", "[10.98.0.0/24]")],
            &[("spec/cidrs", "[10.97.0.0/24, 'fd00:10:97::/112']")],
        ),
        (
            "servicecidr-cidrs-dual-stack",
            &[("spec/cidrs", "[10.99.1.0/24, 'fd00:10:99::/112']")],
            &[("metadata/labels", "{stack: single}")],
        ),
        (
            "servicecidr-cidrs-remove",
            &[("spec/cidrs", "[10.100.0.0/24]")],
            &[("metadata/annotations", "{note: dual}")],
        ),
    ]);
}

#[test]
fn dynamic_resource_allocation() {
    judge(&[
        (
            // The manifest's requests replace the stored ones, without their defaults.
            "resourceclaim-spec",
            &[(
                "spec/devices/requests",
                "[{name: gpu, exactly: {deviceClassName: gpu.example.com, count: 2}}]",
            )],
            &[
                ("metadata/labels", "{team: ml}"),
                (
                    "spec/devices/requests",
                    "[{name: gpu, exactly: {deviceClassName: gpu.example.com}}]",
                ),
            ],
        ),
        (
            "resourceclaimtemplate-spec",
            &[
                ("spec/metadata", "{labels: {team: ml}}"),
                (
                    "spec/spec/devices/requests",
                    "[{name: gpu, exactly: {deviceClassName: gpu.example.com}}]",
                ),
            ],
            &[
                ("metadata/labels", "{team: ml}"),
                (
                    "spec/spec/devices/requests",
                    "[{name: gpu, exactly: {deviceClassName: gpu.example.com}}]",
                ),
            ],
        ),
        (
            "resourceslice-pool-name",
            &[("spec/pool/name", "pool-b")],
            &[
                ("spec/pool/generation", "2"),
                ("spec/devices", "[{name: gpu-0}, {name: gpu-1}]"),
            ],
        ),
        (
            "resourceslice-driver-node",
            &[
                ("spec/driver", "tpu.example.com"),
                ("spec/nodeName", "node-2"),
            ],
            &[
                ("metadata/labels", "{node: node-1}"),
                (
                    "spec/devices",
                    "[{name: gpu-0, attributes: {model: {string: a100}}}]",
                ),
            ],
        ),
    ]);
}

#[test]
fn storage_drivers_capacities_attribute_classes() {
    judge(&[
        (
            "csinode-drivers",
            &[("spec/drivers/0/nodeID", "node-b")],
            &[(
                "spec/drivers",
                "[{name: disk.example.com, nodeID: node-a, topologyKeys: [topology.kubernetes.io/zone], allocatable: {count: 20}}, {name: nfs.example.com, nodeID: node-a}]",
            )],
        ),
        (
            "csistoragecapacity-topology",
            &[
                ("storageClassName", "imm-other"),
                (
                    "nodeTopology",
                    "{matchLabels: {topology.kubernetes.io/zone: b}}",
                ),
            ],
            &[("capacity", "50Gi"), ("maximumVolumeSize", "10Gi")],
        ),
        (
            "volumeattributesclass-parameters",
            &[
                ("driverName", "other.example.com"),
                ("parameters/iops", "'6000'"),
            ],
            &[("metadata/labels", "{tier: gold}")],
        ),
    ]);
}

#[test]
fn custom_resource_definitions() {
    judge(&[
        (
            "crd-group-plural",
            &[
                ("spec/group", "imm2.example.com"),
                ("spec/names/plural", "gadgets"),
            ],
            &[
                ("spec/names/singular", "wdgt"),
                ("spec/names/listKind", "WidgetItems"),
                ("spec/names/shortNames", "[wd]"),
                ("spec/names/categories", "[imm]"),
            ],
        ),
        (
            "crd-scope-kind",
            &[
                ("spec/scope", "Cluster"),
                ("spec/names/kind", "Cog"),
                ("spec/names/listKind", "CogList"),
            ],
            &[
                ("spec/names/shortNames", "[spr]"),
                (
                    "spec/versions",
                    "[{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}, {name: v2, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]",
                ),
            ],
        ),
        (
            // The new storage version joins status.storedVersions; v1 stays in it.
            "crd-stored-versions",
            &[(
                "spec/versions",
                "[{name: v2, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]",
            )],
            &[(
                "spec/versions",
                "[{name: v1, served: false, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}, {name: v2, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]",
            )],
        ),
        (
            "crd-preserve-unknown-fields",
            &[("spec/preserveUnknownFields", "true")],
            &[
                ("spec/preserveUnknownFields", "false"),
                (
                    "spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-preserve-unknown-fields",
                    "true",
                ),
            ],
        ),
    ]);
    // Before the CRD is Established its scope and kind may change.
    let mut pending = STORED.get_path(&["crd-scope-kind"]).unwrap().clone();
    set(&mut pending, "status/conditions", "[]");
    let mut new = pending.clone();
    set(&mut new, "spec/scope", "Cluster");
    set(&mut new, "spec/names/kind", "Cog");
    assert!(
        check(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            false,
            &pending,
            &new,
            &new
        )
        .is_empty()
    );
}
