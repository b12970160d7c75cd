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
}

impl Limits {
    /// For manifests (a release): 64 MiB a file, 3 MiB a document, 256 MiB and 20,000
    /// documents in all.
    pub const MANIFESTS: Limits = Limits {
        file_bytes: 64 * MIB,
        document_bytes: 3 * MIB,
        total_bytes: 256 * MIB,
        documents: 20_000,
    };

    /// For one request to the service (its manifests together): 32 MiB, 3 MiB a document,
    /// 10,000 documents.
    pub const REQUESTS: Limits = Limits {
        file_bytes: 32 * MIB,
        document_bytes: 3 * MIB,
        total_bytes: 32 * MIB,
        documents: 10_000,
    };

    /// For a snapshot of a cluster: 2 GiB a file; 512 MiB a document (`kubectl get -o json`
    /// prints a whole kind as one `List`, and an OpenAPI document is one; a larger `List` is
    /// read item by item); 4 GiB and 2,000,000 documents in all.
    pub const SNAPSHOT: Limits = Limits {
        file_bytes: 2 * GIB,
        document_bytes: 512 * MIB,
        total_bytes: 4 * GIB,
        documents: 2_000_000,
    };
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

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::File => "--max-file-bytes",
            Limit::Document => "--max-document-bytes",
            Limit::Total => "--max-input-bytes",
            Limit::Documents => "--max-documents",
        })
    }
}

/// "more than the limit of 3 MiB (--max-document-bytes)".
pub fn over(limit: Limit, value: u64) -> String {
    let amount = match limit {
        Limit::Documents => format!("{value}"),
        _ => human_bytes(value),
    };
    format!("more than the limit of {amount} ({limit})")
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
        assert_eq!(human_bytes(700), "700 bytes");
    }
}
