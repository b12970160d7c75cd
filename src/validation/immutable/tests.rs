//! The rule table against cases taken from upstream's own validation tests (Kubernetes
//! `pkg/apis/{core,apps,batch,rbac,storage,networking,scheduling,discovery}/validation/
//! validation_test.go`: `TestValidateJobUpdate`, `TestValidateServiceUpdate`,
//! `TestValidatePersistentVolumeClaimUpdate`, `TestValidatePersistentVolumeSourceUpdate`,
//! `TestValidateStatefulSetUpdate`, `TestValidatePodUpdate`, ...; each case names the one it
//! follows), each with the message the 1.36 server prints, and beside them the look-alike
//! changes upstream allows. Messages follow apimachinery 1.36's `field.Error` (bad values as
//! JSON), read from the Debian-packaged sources the real-apiserver tier builds.

use super::check;
use crate::value::Value;
use crate::value::yaml::parse_one;

fn yaml(s: &str) -> Value {
    parse_one(s).unwrap_or_else(|e| panic!("test YAML: {e}\n{s}"))
}

/// Sets `path` (`/`-separated keys) of `v` to the YAML `to`, creating maps on the way
/// (`to` = `~` removes the field). Also the kube-apiserver cases' (`tests_kubeapi.rs`).
pub(super) fn set(v: &mut Value, path: &str, to: &str) {
    // `~1` in a key is a `/` (as in a JSON pointer).
    let keys: Vec<String> = path.split('/').map(|k| k.replace("~1", "/")).collect();
    let mut cur = v;
    for k in &keys[..keys.len() - 1] {
        if let Ok(i) = k.parse::<usize>()
            && let Value::List(items) = cur
        {
            cur = &mut items[i];
            continue;
        }
        let m = cur.as_map_mut().expect("a map on the path");
        if m.get(k)
            .is_none_or(|x| x.as_map().is_none() && x.as_list().is_none())
        {
            m.insert(k.as_str(), Value::Map(crate::value::Map::new()));
        }
        cur = m.get_mut(k).expect("inserted");
    }
    let last = keys[keys.len() - 1].as_str();
    if let (Ok(i), Value::List(items)) = (last.parse::<usize>(), &mut *cur) {
        if to == "~" {
            items.remove(i);
        } else {
            items[i] = yaml(to);
        }
        return;
    }
    let m = cur.as_map_mut().expect("a map at the end");
    if to == "~" {
        m.remove(last);
    } else {
        m.insert(last, yaml(to));
    }
}

/// The errors of updating `old` to `old` changed by `changes`, as `field: message`.
fn errors(api_version: &str, kind: &str, old: &Value, changes: &[(&str, &str)]) -> Vec<String> {
    let mut new = old.clone();
    for (path, to) in changes {
        set(&mut new, path, to);
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    check(group, version, kind, false, old, &new, &new)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Asserts each `(upstream case, changes, expected errors)`.
/// A case: its upstream name, the changes (`/`-separated path, YAML value), the errors.
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);

fn table(api_version: &str, kind: &str, old: &Value, cases: &[Case]) {
    for (name, changes, want) in cases {
        let got = errors(api_version, kind, old, changes);
        // An expected error ending in `…` is a prefix of the error.
        let matches = got.len() == want.len()
            && got
                .iter()
                .zip(want.iter())
                .all(|(g, w)| match w.strip_suffix('…') {
                    Some(prefix) => g.starts_with(prefix),
                    None => g == w,
                });
        assert!(matches, "{kind}: {name}\n  got  {got:?}\n  want {want:?}");
    }
}

#[test]
fn metadata_uid() {
    let cm = yaml("{apiVersion: v1, kind: ConfigMap, metadata: {name: c, uid: u-1}, data: {a: b}}");
    table(
        "v1",
        "ConfigMap",
        &cm,
        &[
            (
                "ValidateObjectMetaUpdate: uid changed",
                &[("metadata/uid", "u-2")],
                &[r#"metadata.uid: Invalid value: "u-2": field is immutable"#],
            ),
            (
                "no uid in the request keeps the stored one",
                &[("metadata/uid", "~")],
                &[],
            ),
            ("labels may change", &[("metadata/labels", "{a: b}")], &[]),
        ],
    );
    // Custom resources: the metadata rule only.
    let cr = yaml(
        "{apiVersion: example.com/v1, kind: Widget, metadata: {name: w, uid: u-1}, spec: {selector: a}}",
    );
    let mut new = cr.clone();
    set(&mut new, "spec/selector", "b");
    assert!(check("example.com", "v1", "Widget", true, &cr, &new, &new).is_empty());
    set(&mut new, "metadata/uid", "u-9");
    assert_eq!(
        check("example.com", "v1", "Widget", true, &cr, &new, &new).len(),
        1
    );
}

const DEPLOYMENT: &str = "
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, uid: d-1}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: 'web:1'}]}
";

#[test]
fn selectors_of_deployments_replicasets_daemonsets() {
    for kind in ["Deployment", "ReplicaSet", "DaemonSet"] {
        let mut old = yaml(DEPLOYMENT);
        set(&mut old, "kind", kind);
        table(
            "apps/v1",
            kind,
            &old,
            &[
                (
                    "selector changed",
                    &[("spec/selector/matchLabels/app", "web2")],
                    &[
                        r#"spec.selector: Invalid value: {"matchLabels":{"app":"web2"}}: field is immutable"#,
                    ],
                ),
                (
                    "selector gains an expression",
                    &[(
                        "spec/selector/matchExpressions",
                        "[{key: tier, operator: In, values: [a]}]",
                    )],
                    &[
                        r#"spec.selector: Invalid value: {"matchLabels":{"app":"web"},"matchExpressions":[{"key":"tier","operator":"In","values":["a"]}]}: field is immutable"#,
                    ],
                ),
                (
                    "replicas and template may change",
                    &[
                        ("spec/replicas", "5"),
                        ("spec/template/spec/containers/0", "~"),
                        ("spec/template/metadata/labels/v", "'2'"),
                    ],
                    &[],
                ),
                (
                    "an empty matchExpressions list is no change",
                    &[("spec/selector/matchExpressions", "[]")],
                    &[],
                ),
            ],
        );
    }
}

const STATEFUL_SET: &str = "
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec:
  replicas: 3
  serviceName: db
  podManagementPolicy: OrderedReady
  revisionHistoryLimit: 10
  selector: {matchLabels: {app: db}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 0}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: 'db:1'}]}
  volumeClaimTemplates:
  - apiVersion: v1
    kind: PersistentVolumeClaim
    metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
      volumeMode: Filesystem
    status: {phase: Pending}
";

#[test]
fn stateful_sets() {
    let old = yaml(STATEFUL_SET);
    let forbidden = "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";
    table(
        "apps/v1",
        "StatefulSet",
        &old,
        &[
            // TestValidateStatefulSetUpdate: the updatable fields.
            ("update replica count", &[("spec/replicas", "5")], &[]),
            (
                "update template",
                &[
                    ("spec/template/spec/containers/0", "~"),
                    ("spec/template/metadata/labels/tier", "db"),
                ],
                &[],
            ),
            (
                "update strategy and partition",
                &[("spec/updateStrategy/rollingUpdate/partition", "2")],
                &[],
            ),
            (
                "minReadySeconds, ordinals, retention policy",
                &[
                    ("spec/minReadySeconds", "10"),
                    ("spec/ordinals", "{start: 1}"),
                    (
                        "spec/persistentVolumeClaimRetentionPolicy",
                        "{whenDeleted: Delete}",
                    ),
                ],
                &[],
            ),
            (
                "revisionHistoryLimit (updatable since 1.35)",
                &[("spec/revisionHistoryLimit", "3")],
                &[],
            ),
            // ... and what is forbidden.
            (
                "update selector",
                &[("spec/selector/matchLabels/app", "db2")],
                &[forbidden],
            ),
            (
                "update serviceName",
                &[("spec/serviceName", "db2")],
                &[forbidden],
            ),
            (
                "update podManagementPolicy",
                &[("spec/podManagementPolicy", "Parallel")],
                &[forbidden],
            ),
            (
                "a claim template grows",
                &[(
                    "spec/volumeClaimTemplates",
                    "[{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 2Gi}}, volumeMode: Filesystem}, status: {phase: Pending}}]",
                )],
                &[forbidden],
            ),
            // volumeClaimTemplates is atomic: the merged list is the manifest's, which the
            // server defaults before comparing.
            (
                "the same claim template as a manifest writes it",
                &[(
                    "spec/volumeClaimTemplates",
                    "[{metadata: {name: data}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1024Mi}}}}]",
                )],
                &[],
            ),
        ],
    );
}

const JOB: &str = "
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: shop}
spec:
  completions: 1
  parallelism: 1
  selector: {matchLabels: {batch.kubernetes.io/controller-uid: j-1}}
  template:
    metadata: {labels: {batch.kubernetes.io/controller-uid: j-1, job-name: migrate}}
    spec:
      restartPolicy: Never
      dnsPolicy: ClusterFirst
      containers: [{name: m, image: 'migrate:1'}]
status: {startTime: '2026-11-25T10:00:00Z'}
";

#[test]
fn jobs() {
    let old = yaml(JOB);
    // The template as the internal type prints it (Go field names, every field; what
    // kube-apiserver 1.36 printed for such a template, `tests/real/builtin.rs`).
    let template = |image: &str| {
        let internal = r#"{"labels":{"batch.kubernetes.io/controller-uid":"j-1","job-name":"migrate"},"Spec":{"Volumes":null,"InitContainers":null,"Containers":[{"Name":"m","Image":"IMAGE","Command":null,"Args":null,"WorkingDir":"","Ports":null,"EnvFrom":null,"Env":null,"Resources":{"Limits":null,"Requests":null,"Claims":null},"ResizePolicy":null,"RestartPolicy":null,"RestartPolicyRules":null,"VolumeMounts":null,"VolumeDevices":null,"LivenessProbe":null,"ReadinessProbe":null,"StartupProbe":null,"Lifecycle":null,"TerminationMessagePath":"","TerminationMessagePolicy":"","ImagePullPolicy":"","SecurityContext":null,"Stdin":false,"StdinOnce":false,"TTY":false}],"EphemeralContainers":null,"RestartPolicy":"Never","TerminationGracePeriodSeconds":null,"ActiveDeadlineSeconds":null,"DNSPolicy":"ClusterFirst","NodeSelector":null,"ServiceAccountName":"","AutomountServiceAccountToken":null,"NodeName":"","SecurityContext":null,"ImagePullSecrets":null,"Hostname":"","Subdomain":"","SetHostnameAsFQDN":null,"Affinity":null,"SchedulerName":"","Tolerations":null,"HostAliases":null,"PriorityClassName":"","Priority":null,"PreemptionPolicy":null,"DNSConfig":null,"ReadinessGates":null,"RuntimeClassName":null,"Overhead":null,"EnableServiceLinks":null,"TopologySpreadConstraints":null,"OS":null,"SchedulingGates":null,"ResourceClaims":null,"Resources":null,"HostnameOverride":null,"SchedulingGroup":null}}"#;
        format!(
            "spec.template: Invalid value: {}: field is immutable",
            internal.replace("IMAGE", image)
        )
    };
    let image2 = template("migrate:2");
    // The same change refused at the pod spec: the template's `Spec` alone.
    let pod_spec2 = {
        let spec = image2
            .split_once(r#","Spec":"#)
            .map(|(_, rest)| rest)
            .and_then(|rest| rest.strip_suffix("}: field is immutable"))
            .expect("the template's spec");
        format!("spec.template.spec: Invalid value: {spec}: field is immutable")
    };
    table(
        "batch/v1",
        "Job",
        &old,
        &[
            // TestValidateJobUpdate
            (
                "immutable completions for non-indexed jobs",
                &[("spec/completions", "2")],
                &["spec.completions: Invalid value: 2: field is immutable"],
            ),
            (
                "immutable selector",
                &[(
                    "spec/selector/matchLabels/batch.kubernetes.io~1controller-uid",
                    "x",
                )],
                &[
                    r#"spec.selector: Invalid value: {"matchLabels":{"batch.kubernetes.io/controller-uid":"x"}}: field is immutable"#,
                ],
            ),
            (
                "immutable pod template (an image)",
                &[("spec/template/spec/containers/0/image", "migrate:2")],
                &[image2.as_str()],
            ),
            (
                "immutable completion mode",
                &[("spec/completionMode", "Indexed")],
                &[r#"spec.completionMode: Invalid value: "Indexed": field is immutable"#],
            ),
            (
                "add pod failure policy",
                &[(
                    "spec/podFailurePolicy",
                    "{rules: [{action: FailJob, onExitCodes: {operator: In, values: [1]}}]}",
                )],
                &[
                    r#"spec.podFailurePolicy: Invalid value: {"Rules":[{"Action":"FailJob","OnExitCodes":{"ContainerName":null,"Operator":"In","Values":[1]},"OnPodConditions":null}]}: field is immutable"#,
                ],
            ),
            (
                "set backoff limit per index",
                &[("spec/backoffLimitPerIndex", "1")],
                &["spec.backoffLimitPerIndex: Invalid value: 1: field is immutable"],
            ),
            (
                "invalid update of the managedBy field",
                &[("spec/managedBy", "example.com/queue")],
                &[r#"spec.managedBy: Invalid value: "example.com/queue": field is immutable"#],
            ),
            (
                "add success policy",
                &[("spec/successPolicy", "{rules: [{succeededCount: 1}]}")],
                &[
                    r#"spec.successPolicy: Invalid value: {"Rules":[{"SucceededIndexes":null,"SucceededCount":1}]}: field is immutable"#,
                ],
            ),
            // What may change.
            (
                "parallelism, backoffLimit, activeDeadlineSeconds, ttl",
                &[
                    ("spec/parallelism", "3"),
                    ("spec/backoffLimit", "2"),
                    ("spec/activeDeadlineSeconds", "60"),
                    ("spec/ttlSecondsAfterFinished", "100"),
                ],
                &[],
            ),
            (
                "set max failed indexes",
                &[("spec/maxFailedIndexes", "1")],
                &[],
            ),
        ],
    );
    // "immutable node selector": refused unless suspended and never started.
    assert_eq!(
        errors(
            "batch/v1",
            "Job",
            &old,
            &[("spec/template/spec/nodeSelector", "{disk: ssd}")]
        )
        .len(),
        1,
        "immutable node selector"
    );
    let mut suspended = old.clone();
    set(&mut suspended, "spec/suspend", "true");
    set(&mut suspended, "status", "{}");
    table(
        "batch/v1",
        "Job",
        &suspended,
        &[
            // TestValidateJobUpdate with AllowMutableSchedulingDirectives (the old Job is
            // suspended and never started).
            (
                "mutable node selector",
                &[("spec/template/spec/nodeSelector", "{disk: ssd}")],
                &[],
            ),
            (
                "mutable tolerations",
                &[(
                    "spec/template/spec/tolerations",
                    "[{key: k, operator: Exists}]",
                )],
                &[],
            ),
            (
                "mutable annotations and labels",
                &[
                    ("spec/template/metadata/annotations", "{a: b}"),
                    ("spec/template/metadata/labels/extra", "x"),
                ],
                &[],
            ),
            (
                "add node affinity",
                &[(
                    "spec/template/spec/affinity",
                    "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]}}}",
                )],
                &[],
            ),
            // 1.36: MutablePodResourcesForSuspendedJobs (beta, on) moves the refusal to the
            // pod spec (as kube-apiserver 1.36 answered, `tests/real/builtin.rs`).
            (
                "a suspended Job's image is still immutable",
                &[("spec/template/spec/containers/0/image", "migrate:2")],
                &[pod_spec2.as_str()],
            ),
            (
                "a suspended Job's container resources may change",
                &[(
                    "spec/template/spec/containers/0/resources",
                    "{limits: {cpu: '1'}}",
                )],
                &[],
            ),
        ],
    );
    let mut indexed = old.clone();
    set(&mut indexed, "spec/completionMode", "Indexed");
    table(
        "batch/v1",
        "Job",
        &indexed,
        &[
            // validateCompletions with ElasticIndexedJob.
            (
                "scale an indexed job with parallelism",
                &[("spec/completions", "4"), ("spec/parallelism", "4")],
                &[],
            ),
            (
                "completions without parallelism",
                &[("spec/completions", "4")],
                &[
                    "spec.completions: Invalid value: 4: can only be modified in tandem with spec.parallelism",
                ],
            ),
        ],
    );
    // CronJobs have no immutable spec field: a new job template is fine.
    let cron = yaml(
        "{apiVersion: batch/v1, kind: CronJob, metadata: {name: c}, spec: {schedule: '* * * * *', jobTemplate: {spec: {template: {spec: {containers: [{name: c, image: 'c:1'}]}}}}}}",
    );
    table(
        "batch/v1",
        "CronJob",
        &cron,
        &[(
            "jobTemplate changes",
            &[(
                "spec/jobTemplate/spec/template/spec/containers",
                "[{name: c, image: 'c:2'}]",
            )],
            &[],
        )],
    );
}

const POD: &str = "
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: shop}
spec:
  containers: [{name: a, image: 'a:1', ports: [{containerPort: 80}]}]
  initContainers: [{name: i, image: 'i:1'}]
  activeDeadlineSeconds: 100
  tolerations: [{key: k, operator: Exists, effect: NoExecute, tolerationSeconds: 30}]
  terminationGracePeriodSeconds: -1
";

#[test]
fn pods() {
    let old = yaml(POD);
    // Followed by a diff of the internal pod specs (`…` ends a prefix; in full in
    // tests_kubeapi.rs).
    let spec = "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n@@ …";
    table(
        "v1",
        "Pod",
        &old,
        &[
            // TestValidatePodUpdate
            ("image change", &[("spec/containers/0/image", "a:2")], &[]),
            (
                "init container image change",
                &[("spec/initContainers/0/image", "i:2")],
                &[],
            ),
            (
                "activeDeadlineSeconds lowered",
                &[("spec/activeDeadlineSeconds", "50")],
                &[],
            ),
            (
                "activeDeadlineSeconds raised",
                &[("spec/activeDeadlineSeconds", "200")],
                &[
                    "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value",
                ],
            ),
            (
                "activeDeadlineSeconds unset",
                &[("spec/activeDeadlineSeconds", "~")],
                &[
                    "spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value",
                ],
            ),
            (
                "toleration seconds change",
                &[
                    ("spec/tolerations/0", "~"),
                    (
                        "spec/tolerations",
                        "[{key: k, operator: Exists, effect: NoExecute, tolerationSeconds: 10}]",
                    ),
                ],
                &[],
            ),
            (
                "toleration added",
                &[(
                    "spec/tolerations",
                    "[{key: k, operator: Exists, effect: NoExecute, tolerationSeconds: 30}, {key: j, operator: Exists}]",
                )],
                &[],
            ),
            (
                "toleration removed",
                &[("spec/tolerations", "[]")],
                &[
                    "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds",
                ],
            ),
            (
                "terminationGracePeriodSeconds from negative to 1",
                &[("spec/terminationGracePeriodSeconds", "1")],
                &[],
            ),
            (
                "port change",
                &[(
                    "spec/containers",
                    "[{name: a, image: 'a:1', ports: [{containerPort: 81}]}]",
                )],
                &[spec],
            ),
            ("nodeName change", &[("spec/nodeName", "n2")], &[spec]),
            (
                "more containers",
                &[(
                    "spec/containers",
                    "[{name: a, image: 'a:1'}, {name: b, image: 'b:1'}]",
                )],
                &["spec.containers: Forbidden: pod updates may not add or remove containers"],
            ),
        ],
    );
}

const SERVICE: &str = "
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  type: NodePort
  clusterIP: 1.2.3.4
  clusterIPs: [1.2.3.4]
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  ports: [{port: 80, nodePort: 30080}]
";

#[test]
fn services() {
    let old = yaml(SERVICE);
    table(
        "v1",
        "Service",
        &old,
        &[
            // TestValidateServiceUpdate
            (
                "Service with NodePort type cannot change its set ClusterIP",
                &[
                    ("spec/clusterIP", "1.2.3.5"),
                    ("spec/clusterIPs", "[1.2.3.5]"),
                ],
                &[r#"spec.clusterIPs[0]: Invalid value: ["1.2.3.5"]: may not change once set"#],
            ),
            (
                "a manifest that changes only clusterIP (clusterIPs follows it)",
                &[("spec/clusterIP", "1.2.3.5")],
                &[r#"spec.clusterIPs[0]: Invalid value: ["1.2.3.5"]: may not change once set"#],
            ),
            (
                "Service with NodePort type cannot change its set ClusterIP when changing type to ClusterIP",
                &[
                    ("spec/type", "ClusterIP"),
                    ("spec/clusterIP", "1.2.3.5"),
                    ("spec/clusterIPs", "[1.2.3.5]"),
                ],
                &[r#"spec.clusterIPs[0]: Invalid value: ["1.2.3.5"]: may not change once set"#],
            ),
            (
                "a manifest without clusterIP keeps the allocated one",
                &[("spec/clusterIP", "~"), ("spec/clusterIPs", "~")],
                &[],
            ),
            (
                "valid: convert to ExternalName",
                &[
                    ("spec/type", "ExternalName"),
                    ("spec/externalName", "foo"),
                    ("spec/clusterIP", "~"),
                    ("spec/clusterIPs", "~"),
                    ("spec/ipFamilies", "~"),
                    ("spec/ipFamilyPolicy", "~"),
                ],
                &[],
            ),
            (
                "same ServiceIPFamily, change IPFamilyPolicy singleStack => requireDualStack",
                &[("spec/ipFamilyPolicy", "RequireDualStack")],
                &[],
            ),
            (
                "add a new ServiceIPFamily",
                &[
                    ("spec/ipFamilies", "[IPv4, IPv6]"),
                    ("spec/ipFamilyPolicy", "RequireDualStack"),
                ],
                &[],
            ),
            // The server's IP allocator refuses it first, for its cluster IP (as
            // kube-apiserver 1.36 answered: immutable.yaml's service-ip-families).
            (
                "change primary ServiceIPFamily",
                &[("spec/ipFamilies", "[IPv6]")],
                &[
                    r#"spec.clusterIPs[0]: Invalid value: "1.2.3.4": expected an IPv6 value as indicated by `ipFamilies[0]`"#,
                ],
            ),
        ],
    );
    let mut external = old.clone();
    set(&mut external, "spec/type", "ExternalName");
    table(
        "v1",
        "Service",
        &external,
        &[(
            "Service with ExternalName type can change its set ClusterIP when changing type to ClusterIP",
            &[
                ("spec/type", "ClusterIP"),
                ("spec/clusterIP", "1.2.3.5"),
                ("spec/clusterIPs", "[1.2.3.5]"),
            ],
            &[],
        )],
    );
    let mut lb = old.clone();
    set(&mut lb, "spec/type", "LoadBalancer");
    set(&mut lb, "spec/loadBalancerClass", "example.com/a");
    set(&mut lb, "spec/externalTrafficPolicy", "Local");
    set(&mut lb, "spec/healthCheckNodePort", "31000");
    table(
        "v1",
        "Service",
        &lb,
        &[
            (
                "loadBalancerClass changed on a LoadBalancer",
                &[("spec/loadBalancerClass", "example.com/b")],
                &[
                    r#"spec.loadBalancerClass: Invalid value: "example.com/b": may not change once set"#,
                ],
            ),
            (
                "loadBalancerClass unset on a LoadBalancer",
                &[("spec/loadBalancerClass", "~")],
                &["spec.loadBalancerClass: Invalid value: null: may not change once set"],
            ),
            (
                "healthCheckNodePort changed",
                &[("spec/healthCheckNodePort", "31001")],
                &["spec.healthCheckNodePort: Forbidden: field is immutable"],
            ),
            (
                "healthCheckNodePort left out keeps the allocated one",
                &[("spec/healthCheckNodePort", "~")],
                &[],
            ),
            (
                "to NodePort: the class may go",
                &[
                    ("spec/type", "NodePort"),
                    ("spec/loadBalancerClass", "~"),
                    ("spec/healthCheckNodePort", "~"),
                ],
                &[],
            ),
        ],
    );
}

const CLAIM: &str = "
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: shop}
spec:
  accessModes: [ReadWriteOnce, ReadOnlyMany]
  resources: {requests: {storage: 10G}}
  volumeMode: Filesystem
  volumeName: volume
  storageClassName: fast
status: {phase: Bound, capacity: {storage: 10G}}
";

#[test]
fn claims() {
    let old = yaml(CLAIM);
    // Followed by a diff of the internal specs (one case below in full; `…` ends a prefix).
    let spec = "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n@@ …";
    table(
        "v1",
        "PersistentVolumeClaim",
        &old,
        &[
            // TestValidatePersistentVolumeClaimUpdate
            (
                "valid-size-update-resize-enabled",
                &[("spec/resources/requests/storage", "15G")],
                &[],
            ),
            (
                "the same size spelled otherwise",
                &[("spec/resources/requests/storage", "10000M")],
                &[],
            ),
            (
                "invalid-size-update-resize-enabled (below capacity)",
                &[("spec/resources/requests/storage", "5G")],
                &[
                    "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity",
                ],
            ),
            (
                "invalid-update-change-access-modes-on-bound-claim",
                &[("spec/accessModes", "[ReadWriteOnce]")],
                &[
                    "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n@@ -1,7 +1,6 @@\n {\n  \"AccessModes\": [\n-  \"ReadWriteOnce\",\n-  \"ReadOnlyMany\"\n+  \"ReadWriteOnce\"\n  ],\n  \"Selector\": null,\n  \"Resources\": {\n",
                ],
            ),
            (
                "invalid-update-volume-mode-to-block",
                &[("spec/volumeMode", "Block")],
                &[
                    spec,
                    r#"volumeMode: Invalid value: "Block": field is immutable"#,
                ],
            ),
            (
                "invalid-upgrade-not-nil-storage-class-spec-to-spec",
                &[("spec/storageClassName", "fast2")],
                &[spec],
            ),
            (
                "valid-update-volume-attributes-class (bound)",
                &[("spec/volumeAttributesClassName", "gold")],
                &[],
            ),
            (
                "limits are not requests",
                &[("spec/resources/limits", "{storage: 20G}")],
                &[spec],
            ),
        ],
    );
    let mut pending = old.clone();
    set(&mut pending, "status", "{phase: Pending}");
    set(&mut pending, "spec/volumeName", "~");
    table(
        "v1",
        "PersistentVolumeClaim",
        &pending,
        &[
            (
                "unbound-size-update-resize-enabled",
                &[("spec/resources/requests/storage", "12G")],
                &[spec],
            ),
            (
                "valid-update-volumeName-only",
                &[("spec/volumeName", "volume")],
                &[],
            ),
        ],
    );
    let mut shrinking = old.clone();
    set(&mut shrinking, "spec/resources/requests/storage", "15G");
    table(
        "v1",
        "PersistentVolumeClaim",
        &shrinking,
        &[
            (
                "valid-expand-shrink-resize-enabled",
                &[("spec/resources/requests/storage", "13G")],
                &[],
            ),
            (
                "invalid-expand-shrink-to-status-resize-enabled",
                &[("spec/resources/requests/storage", "10G")],
                &[
                    "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity",
                ],
            ),
        ],
    );
    let mut annotated = old.clone();
    set(&mut annotated, "spec/storageClassName", "~");
    set(
        &mut annotated,
        "metadata/annotations",
        "{volume.beta.kubernetes.io/storage-class: fast}",
    );
    table(
        "v1",
        "PersistentVolumeClaim",
        &annotated,
        &[
            (
                "valid-upgrade-storage-class-annotation-to-spec",
                &[("spec/storageClassName", "fast")],
                &[],
            ),
            (
                "invalid-update-change-storage-class-annotation-after-creation",
                &[
                    (
                        "metadata/annotations/volume.beta.kubernetes.io~1storage-class",
                        "~",
                    ),
                    (
                        "metadata/annotations",
                        "{volume.beta.kubernetes.io/storage-class: fast2}",
                    ),
                ],
                &[
                    r#"metadata.annotations.volume.beta.kubernetes.io/storage-class: Invalid value: "fast2": field is immutable"#,
                ],
            ),
        ],
    );
    // A bound claim's class may change, to empty or none too, until one was applied
    // (status.currentVolumeAttributesClassName).
    let mut classed = old.clone();
    set(&mut classed, "spec/volumeAttributesClassName", "gold");
    table(
        "v1",
        "PersistentVolumeClaim",
        &classed,
        &[
            (
                "valid-update-volume-attributes-class-to-nil (none applied yet)",
                &[("spec/volumeAttributesClassName", "~")],
                &[],
            ),
            (
                "valid-update-volume-attributes-class-to-empty (none applied yet)",
                &[("spec/volumeAttributesClassName", "''")],
                &[],
            ),
        ],
    );
    set(
        &mut classed,
        "status/currentVolumeAttributesClassName",
        "gold",
    );
    table(
        "v1",
        "PersistentVolumeClaim",
        &classed,
        &[
            (
                "invalid-update-volume-attributes-class-to-nil",
                &[("spec/volumeAttributesClassName", "~")],
                &[
                    "spec.volumeAttributesClassName: Forbidden: update to nil is forbidden when status.currentVolumeAttributesClassName is not nil",
                ],
            ),
            (
                "invalid-update-volume-attributes-class-to-empty",
                &[("spec/volumeAttributesClassName", "''")],
                &[
                    "spec.volumeAttributesClassName: Forbidden: update to empty string is forbidden when status.currentVolumeAttributesClassName is not nil",
                ],
            ),
            (
                "valid-update-volume-attributes-class (another)",
                &[("spec/volumeAttributesClassName", "silver")],
                &[],
            ),
        ],
    );
    // An unbound claim's class is part of its immutable spec.
    let mut pending_classed = pending.clone();
    set(
        &mut pending_classed,
        "spec/volumeAttributesClassName",
        "gold",
    );
    table(
        "v1",
        "PersistentVolumeClaim",
        &pending_classed,
        &[(
            "invalid-update-volume-attributes-class (unbound)",
            &[("spec/volumeAttributesClassName", "silver")],
            &[spec],
        )],
    );
}

const VOLUME: &str = "
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv}
spec:
  capacity: {storage: 1G}
  accessModes: [ReadWriteOnce]
  storageClassName: valid
  hostPath: {path: /foo, type: Directory}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: failure-domain.beta.kubernetes.io/zone, operator: In, values: [a]}]
";

#[test]
fn volumes() {
    let old = yaml(VOLUME);
    // Followed by a diff of the internal volume sources (in full in tests_kubeapi.rs).
    let source = "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n@@ …";
    table(
        "v1",
        "PersistentVolume",
        &old,
        &[
            // TestValidatePersistentVolumeSourceUpdate
            ("condition-no-update", &[], &[]),
            (
                "condition-update-source-type",
                &[
                    ("spec/hostPath", "~"),
                    ("spec/flexVolume", "{driver: kubernetes.io/blue}"),
                ],
                &[source],
            ),
            (
                "condition-update-source-deep",
                &[("spec/hostPath/path", "/updated")],
                &[source],
            ),
            (
                "capacity and reclaim policy may change",
                &[
                    ("spec/capacity/storage", "2G"),
                    ("spec/persistentVolumeReclaimPolicy", "Delete"),
                ],
                &[],
            ),
            // TestValidateVolumeNodeAffinityUpdate
            (
                "beta zone label to GA",
                &[(
                    "spec/nodeAffinity/required/nodeSelectorTerms",
                    "[{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [a]}]}]",
                )],
                &[],
            ),
            (
                "node affinity changed",
                &[(
                    "spec/nodeAffinity/required/nodeSelectorTerms",
                    "[{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [b]}]}]",
                )],
                &[
                    r#"nodeAffinity: Invalid value: {"Required":{"NodeSelectorTerms":[{"MatchExpressions":[{"Key":"topology.kubernetes.io/zone","Operator":"In","Values":["b"]}],"MatchFields":null}]}}: field is immutable, except for updating from beta label to GA"#,
                ],
            ),
        ],
    );
    let csi = yaml(
        "{apiVersion: v1, kind: PersistentVolume, metadata: {name: pv}, spec: {csi: {driver: come.google.gcepd, volumeHandle: foobar}}}",
    );
    table(
        "v1",
        "PersistentVolume",
        &csi,
        &[
            (
                "csi-expansion-enabled-with-pv-secret",
                &[(
                    "spec/csi/controllerExpandSecretRef",
                    "{name: expansion-secret, namespace: default}",
                )],
                &[],
            ),
            (
                "csi-cntrlpublish-enabled-with-shortSecretRef",
                &[(
                    "spec/csi/controllerPublishSecretRef",
                    "{name: s, namespace: default}",
                )],
                &[source],
            ),
        ],
    );
}

#[test]
fn config_maps_and_secrets() {
    let cm = yaml(
        "{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, immutable: true, data: {a: b}}",
    );
    let forbidden = |f: &str| format!("{f}: Forbidden: field is immutable when `immutable` is set");
    let (data, flag, binary) = (
        forbidden("data"),
        forbidden("immutable"),
        forbidden("binaryData"),
    );
    table(
        "v1",
        "ConfigMap",
        &cm,
        &[
            // TestValidateConfigMapUpdate
            (
                "data cannot be updated when immutable",
                &[("data/a", "c")],
                &[data.as_str()],
            ),
            (
                "immutable flag cannot be unset",
                &[("immutable", "false")],
                &[flag.as_str()],
            ),
            (
                "binaryData cannot be added",
                &[("binaryData", "{x: eA==}")],
                &[binary.as_str()],
            ),
            ("labels may change", &[("metadata/labels", "{a: b}")], &[]),
        ],
    );
    let mut mutable = cm.clone();
    set(&mut mutable, "immutable", "~");
    table(
        "v1",
        "ConfigMap",
        &mutable,
        &[(
            "immutable flag can be set, with new data",
            &[("immutable", "true"), ("data/a", "z")],
            &[],
        )],
    );

    let secret = yaml(
        "{apiVersion: v1, kind: Secret, metadata: {name: s}, type: kubernetes.io/tls, immutable: true, data: {tls.crt: YQ==, tls.key: Yg==}}",
    );
    table(
        "v1",
        "Secret",
        &secret,
        &[
            // TestValidateSecretUpdate
            (
                "type change",
                &[("type", "Opaque")],
                &[r#"type: Invalid value: "Opaque": field is immutable"#],
            ),
            (
                "no type defaults to Opaque",
                &[("type", "~")],
                &[r#"type: Invalid value: "Opaque": field is immutable"#],
            ),
            (
                "data changed while immutable",
                &[("data/tls.crt", "Yw==")],
                &[data.as_str()],
            ),
            (
                "stringData is data",
                &[("stringData", "{tls.crt: c}")],
                &[data.as_str()],
            ),
            (
                "stringData equal to data is no change",
                &[("stringData", "{tls.crt: a}")],
                &[],
            ),
        ],
    );
    let opaque =
        yaml("{apiVersion: v1, kind: Secret, metadata: {name: s}, type: Opaque, data: {a: YQ==}}");
    table(
        "v1",
        "Secret",
        &opaque,
        &[(
            "a manifest without a type keeps Opaque",
            &[("type", "~"), ("data/a", "Yg==")],
            &[],
        )],
    );
}

#[test]
fn quotas() {
    let q = yaml(
        "{apiVersion: v1, kind: ResourceQuota, metadata: {name: q}, spec: {hard: {pods: '10'}, scopes: [BestEffort, Terminating]}}",
    );
    table(
        "v1",
        "ResourceQuota",
        &q,
        &[
            (
                "scopes changed",
                &[("spec/scopes", "[NotBestEffort]")],
                &[r#"spec.scopes: Invalid value: ["NotBestEffort"]: field is immutable"#],
            ),
            (
                "scopes reordered (a set)",
                &[("spec/scopes", "[Terminating, BestEffort]")],
                &[],
            ),
            ("hard may change", &[("spec/hard/pods", "'20'")], &[]),
        ],
    );
}

#[test]
fn cluster_kinds() {
    let rb = yaml(
        "{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: r}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: valid}, subjects: [{kind: User, name: a}]}",
    );
    for kind in ["RoleBinding", "ClusterRoleBinding"] {
        table(
            "rbac.authorization.k8s.io/v1",
            kind,
            &rb,
            &[
                (
                    "TestValidateRoleBindingUpdate: roleRef name changed",
                    &[("roleRef/name", "changed")],
                    &[
                        r#"roleRef: Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"Role","Name":"changed"}: cannot change roleRef"#,
                    ],
                ),
                (
                    "subjects may change",
                    &[("subjects", "[{kind: User, name: b}]")],
                    &[],
                ),
                (
                    "apiGroup left to its default",
                    &[("roleRef/apiGroup", "~")],
                    &[],
                ),
            ],
        );
    }
    let sc = yaml(
        "{apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: fast}, provisioner: kubernetes.io/foo, parameters: {type: ssd}, reclaimPolicy: Delete, volumeBindingMode: Immediate}",
    );
    table(
        "storage.k8s.io/v1",
        "StorageClass",
        &sc,
        &[
            (
                "provisioner",
                &[("provisioner", "kubernetes.io/bar")],
                &[r#"provisioner: Invalid value: "kubernetes.io/bar": field is immutable"#],
            ),
            (
                "parameters",
                &[("parameters/type", "hdd")],
                &[r#"parameters: Invalid value: {"type":"hdd"}: field is immutable"#],
            ),
            (
                "reclaimPolicy",
                &[("reclaimPolicy", "Retain")],
                &[r#"reclaimPolicy: Invalid value: "Retain": field is immutable"#],
            ),
            (
                "volumeBindingMode",
                &[("volumeBindingMode", "WaitForFirstConsumer")],
                &[
                    r#"volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable"#,
                ],
            ),
            (
                "allowVolumeExpansion may change; defaults left out",
                &[
                    ("allowVolumeExpansion", "true"),
                    ("reclaimPolicy", "~"),
                    ("volumeBindingMode", "~"),
                ],
                &[],
            ),
        ],
    );
    let ic = yaml(
        "{apiVersion: networking.k8s.io/v1, kind: IngressClass, metadata: {name: nginx}, spec: {controller: example.com/a}}",
    );
    table(
        "networking.k8s.io/v1",
        "IngressClass",
        &ic,
        &[
            (
                "spec.controller change",
                &[("spec/controller", "example.com/b")],
                &[r#"spec.controller: Invalid value: "example.com/b": field is immutable"#],
            ),
            (
                "spec.parameters change",
                &[("spec/parameters", "{kind: K, name: n}")],
                &[],
            ),
        ],
    );
    let pc = yaml(
        "{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high}, value: 1000, preemptionPolicy: PreemptLowerPriority}",
    );
    table(
        "scheduling.k8s.io/v1",
        "PriorityClass",
        &pc,
        &[
            (
                "change value",
                &[("value", "10")],
                &["value: Forbidden: may not be changed in an update."],
            ),
            (
                "change preemptionPolicy",
                &[("preemptionPolicy", "Never")],
                &[r#"preemptionPolicy: Invalid value: "Never": field is immutable"#],
            ),
            (
                "description and globalDefault",
                &[("description", "x"), ("globalDefault", "true")],
                &[],
            ),
        ],
    );
    let es = yaml(
        "{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: e}, addressType: IPv4, endpoints: [{addresses: [10.0.0.1]}]}",
    );
    table(
        "discovery.k8s.io/v1",
        "EndpointSlice",
        &es,
        &[
            (
                "invalid address type change",
                &[("addressType", "IPv6")],
                &[r#"addressType: Invalid value: "IPv6": field is immutable"#],
            ),
            (
                "valid update",
                &[("endpoints", "[{addresses: [10.0.0.2]}]")],
                &[],
            ),
        ],
    );
    let va = yaml(
        "{apiVersion: storage.k8s.io/v1, kind: VolumeAttachment, metadata: {name: v}, spec: {attacher: csi.example.com, nodeName: n1, source: {persistentVolumeName: pv1}}}",
    );
    table(
        "storage.k8s.io/v1",
        "VolumeAttachment",
        &va,
        &[
            (
                "node changed",
                &[("spec/nodeName", "n2")],
                &[
                    r#"spec: Invalid value: {"Attacher":"csi.example.com","Source":{"PersistentVolumeName":"pv1","InlineVolumeSpec":null},"NodeName":"n2"}: field is immutable"#,
                ],
            ),
            ("status may change", &[("status", "{attached: true}")], &[]),
        ],
    );
    let csi = yaml(
        "{apiVersion: storage.k8s.io/v1, kind: CSIDriver, metadata: {name: d}, spec: {attachRequired: true, podInfoOnMount: false}}",
    );
    table(
        "storage.k8s.io/v1",
        "CSIDriver",
        &csi,
        &[
            (
                "attachRequired",
                &[("spec/attachRequired", "false")],
                &["spec.attachedRequired: Invalid value: false: field is immutable"],
            ),
            (
                "volumeLifecycleModes",
                &[("spec/volumeLifecycleModes", "[Persistent, Ephemeral]")],
                &[
                    r#"spec.volumeLifecycleModes: Invalid value: ["Persistent","Ephemeral"]: field is immutable"#,
                ],
            ),
            (
                "podInfoOnMount may change; defaults left out",
                &[
                    ("spec/podInfoOnMount", "true"),
                    ("spec/volumeLifecycleModes", "[Persistent]"),
                ],
                &[],
            ),
        ],
    );
}

#[test]
fn every_rule_names_its_source_and_what_it_refuses() {
    for r in super::rules() {
        assert!(!r.source.is_empty() && !r.refuses.is_empty());
    }
    assert!(super::rules().count() >= 18);
}
