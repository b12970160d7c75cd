//! The input limits users can raise (or lower): `--max-file-bytes`, `--max-document-bytes`,
//! `--max-input-bytes`, `--max-documents`, `--max-snapshot-bytes` (sizes in bytes or with a
//! unit: `3Mi`, `64MiB`, `1G`). See [`crate::manifest::limits`].

use crate::manifest::Limits;
use crate::manifest::limits::parse_size;
use clap::Args;

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Input limits (sizes: bytes, or 3Mi, 64MiB, 1G)")]
pub struct LimitArgs {
    /// Largest manifest file, or standard input [default: 64Mi; 32Mi for a request to `serve`]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_file_bytes: Option<u64>,
    /// Largest document of a manifest, or item of a List [default: 3Mi, kube-apiserver's
    /// request limit]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_document_bytes: Option<u64>,
    /// Largest input, every manifest together [default: 256Mi; 32Mi for a request to `serve`]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_input_bytes: Option<u64>,
    /// Most documents (and List items), every manifest together [default: 20000; 10000 for a
    /// request to `serve`]
    #[arg(long, value_name = "N")]
    pub max_documents: Option<usize>,
    /// Largest snapshot, every file of it together [default: 4Gi]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_snapshot_bytes: Option<u64>,
}

impl LimitArgs {
    /// The limits for manifests, from `base` with what was given.
    pub fn manifests(&self, base: Limits) -> Limits {
        Limits {
            file_bytes: self.max_file_bytes.unwrap_or(base.file_bytes),
            document_bytes: self.max_document_bytes.unwrap_or(base.document_bytes),
            total_bytes: self.max_input_bytes.unwrap_or(base.total_bytes),
            documents: self.max_documents.unwrap_or(base.documents),
            scope: base.scope,
        }
    }

    /// The limits for a snapshot: no file or document of it larger than all of it may be.
    pub fn snapshot(&self) -> Limits {
        let base = Limits::SNAPSHOT;
        let total = self.max_snapshot_bytes.unwrap_or(base.total_bytes);
        Limits {
            total_bytes: total,
            file_bytes: base.file_bytes.min(total),
            document_bytes: base.document_bytes.min(total),
            ..base
        }
    }
}
