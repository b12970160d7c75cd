//! Bounds on input, enforced on bytes before anything is parsed, so that hostile or careless
//! input (a 200 MB file, `/dev/zero`, a document of a million keys, a million documents) costs
//! a refusal, not the machine: sizes are checked from file metadata or while reading (never
//! reading more than the limit and one byte), documents are counted and measured by a scan of
//! the text before any of them is parsed.

use std::fmt;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// Input limits (see the module documentation). Each names the setting that raises it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// One file, or standard input (`--max-file-bytes`).
    pub file_bytes: u64,
    /// One document of a YAML stream, one JSON file, or one item of a `List`
    /// (`--max-document-bytes`; kube-apiserver takes requests of 3 MiB).
    pub document_bytes: u64,
    /// Every input of one check, request or snapshot together (`--max-input-bytes`).
    pub total_bytes: u64,
    /// Documents (and `List` items), every input together (`--max-documents`).
    pub documents: usize,
    /// What is bounded (which settings a refusal names).
    pub scope: Scope,
}

/// What limits bound, which decides the settings their refusals name: manifests (and a request
/// to the service) have `--max-file-bytes` and the rest; a snapshot has `--max-snapshot-bytes`
/// only, its other limits fixed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    #[default]
    Manifests,
    Snapshot,
}

impl Limits {
    /// For manifests (a release): 64 MiB a file, 3 MiB a document, 256 MiB and 20,000
    /// documents in all.
    pub const MANIFESTS: Limits = Limits {
        file_bytes: 64 * MIB,
        document_bytes: 3 * MIB,
        total_bytes: 256 * MIB,
        documents: 20_000,
        scope: Scope::Manifests,
    };

    /// For one request to the service (its manifests together): 32 MiB, 3 MiB a document,
    /// 10,000 documents.
    pub const REQUESTS: Limits = Limits {
        file_bytes: 32 * MIB,
        document_bytes: 3 * MIB,
        total_bytes: 32 * MIB,
        documents: 10_000,
        scope: Scope::Manifests,
    };

    /// For a snapshot of a cluster: 2 GiB a file; 512 MiB a document (`kubectl get -o json`
    /// prints a whole kind as one `List`, and an OpenAPI document is one; a larger `List` is
    /// read item by item); 4 GiB and 2,000,000 documents in all.
    pub const SNAPSHOT: Limits = Limits {
        file_bytes: 2 * GIB,
        document_bytes: 512 * MIB,
        total_bytes: 4 * GIB,
        documents: 2_000_000,
        scope: Scope::Snapshot,
    };

    /// The value of `limit`.
    pub fn of(&self, limit: Limit) -> u64 {
        match limit {
            Limit::File => self.file_bytes,
            Limit::Document => self.document_bytes,
            Limit::Total => self.total_bytes,
            Limit::Documents => self.documents as u64,
        }
    }

    /// The setting that raises `limit` here; for a snapshot's fixed limits, what they are.
    /// A snapshot's file and document limits are lowered to `--max-snapshot-bytes` when it is
    /// smaller: they then name it.
    pub fn setting(&self, limit: Limit) -> &'static str {
        let fixed = &Limits::SNAPSHOT;
        match (self.scope, limit) {
            (Scope::Manifests, l) => l.flag(),
            (Scope::Snapshot, Limit::Total) => "--max-snapshot-bytes",
            (Scope::Snapshot, Limit::File) if self.file_bytes < fixed.file_bytes => {
                "--max-snapshot-bytes"
            }
            (Scope::Snapshot, Limit::Document) if self.document_bytes < fixed.document_bytes => {
                "--max-snapshot-bytes"
            }
            (Scope::Snapshot, Limit::File) => "a snapshot's limit for one file",
            (Scope::Snapshot, Limit::Document) => "a snapshot's limit for one document",
            (Scope::Snapshot, Limit::Documents) => "a snapshot's limit of documents",
        }
    }

    /// "more than the limit of 3 MiB (--max-document-bytes)", with the setting of this scope.
    pub fn over(&self, limit: Limit) -> String {
        format!(
            "more than the limit of {} ({})",
            amount(limit, self.of(limit)),
            self.setting(limit)
        )
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::MANIFESTS
    }
}

/// Which limit a refusal concerns, with the setting that raises it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    File,
    Document,
    Total,
    Documents,
}

impl Limit {
    /// The setting of manifests' limit.
    pub fn flag(self) -> &'static str {
        match self {
            Limit::File => "--max-file-bytes",
            Limit::Document => "--max-document-bytes",
            Limit::Total => "--max-input-bytes",
            Limit::Documents => "--max-documents",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.flag())
    }
}

/// "more than the limit of 3 MiB (--max-document-bytes)" (manifests' settings; see
/// [`Limits::over`] for a snapshot's).
pub fn over(limit: Limit, value: u64) -> String {
    format!("more than the limit of {} ({limit})", amount(limit, value))
}

fn amount(limit: Limit, value: u64) -> String {
    match limit {
        Limit::Documents => format!("{value}"),
        _ => human_bytes(value),
    }
}

/// `3 MiB`, `64 MiB`, `1.5 GiB`, `700 bytes`.
pub fn human_bytes(n: u64) -> String {
    let (unit, name) = match n {
        n if n >= GIB => (GIB, "GiB"),
        n if n >= MIB => (MIB, "MiB"),
        n if n >= KIB => (KIB, "KiB"),
        _ => return format!("{n} bytes"),
    };
    if n % unit == 0 {
        format!("{} {name}", n / unit)
    } else {
        format!("{:.1} {name}", n as f64 / unit as f64)
    }
}

/// Parses a size: a number of bytes with an optional unit (`3Mi`, `3MiB`, `64M`, `1G`,
/// `500k`, `1048576`). Decimal units (`k`, `M`, `G`) are powers of 1000, binary ones (`Ki`,
/// `Mi`, `Gi`) of 1024, as in Kubernetes quantities.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 3Mi, 64MiB, 1G, 1048576)"))?;
    let unit = unit.trim().trim_end_matches(['B', 'b']);
    let mult: u64 = match unit {
        "" => 1,
        "k" | "K" => 1000,
        "M" => 1000 * 1000,
        "G" => 1000 * 1000 * 1000,
        "Ki" => KIB,
        "Mi" => MIB,
        "Gi" => GIB,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?} (k, M, G, Ki, Mi, Gi)"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_kubernetes_units() {
        assert_eq!(parse_size("1048576"), Ok(1048576));
        assert_eq!(parse_size("3Mi"), Ok(3 * MIB));
        assert_eq!(parse_size("3MiB"), Ok(3 * MIB));
        assert_eq!(parse_size("64M"), Ok(64_000_000));
        assert_eq!(parse_size("1Gi"), Ok(GIB));
        assert_eq!(parse_size("500k"), Ok(500_000));
        assert!(parse_size("3 parsecs").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999999999Gi").is_err());
    }

    #[test]
    fn refusals_name_the_setting() {
        assert_eq!(
            over(Limit::Document, 3 * MIB),
            "more than the limit of 3 MiB (--max-document-bytes)"
        );
        assert_eq!(
            over(Limit::Documents, 20_000),
            "more than the limit of 20000 (--max-documents)"
        );
        assert_eq!(human_bytes(1536 * KIB), "1.5 MiB");
        // A snapshot's refusals name its own setting, or say the limit is fixed.
        let snap = Limits {
            file_bytes: MIB,
            document_bytes: MIB,
            total_bytes: MIB,
            ..Limits::SNAPSHOT
        };
        for l in [Limit::File, Limit::Document, Limit::Total] {
            assert_eq!(
                snap.over(l),
                "more than the limit of 1 MiB (--max-snapshot-bytes)"
            );
        }
        assert_eq!(
            Limits::SNAPSHOT.over(Limit::Document),
            "more than the limit of 512 MiB (a snapshot's limit for one document)"
        );
        assert_eq!(
            Limits::MANIFESTS.over(Limit::File),
            "more than the limit of 64 MiB (--max-file-bytes)"
        );
        assert_eq!(human_bytes(700), "700 bytes");
    }
}
