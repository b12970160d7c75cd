//! Bounds on what the apiserver answers: every body is read as it arrives and refused once it
//! passes what its request can return — one object, a page of a list, a document, one event of
//! a watch — so a server (or a proxy in front of it) that answers without end costs an error at
//! the bound, never the memory. A `Content-Length` past the bound is refused before anything
//! is read.

use crate::manifest::limits::human_bytes;
use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// One object: etcd stores values of at most 1.5 MiB (its `--max-request-bytes` default) and
/// kube-apiserver takes requests of at most 3 MiB; 16 MiB leaves room for a server configured
/// higher and for the JSON it prints the object as (escapes, managedFields).
pub const OBJECT_BYTES: u64 = 16 * MIB;

/// One object of a page of a list, for the bound of a page of `limit` objects: etcd's 1.5 MiB
/// and room for its JSON.
pub const PAGE_ITEM_BYTES: u64 = 2 * MIB;

/// A list without `limit` (the apiserver answers it whole), a page at least, and the other
/// documents (discovery, OpenAPI: tens of MiB in clusters of many CRDs).
pub const LIST_BYTES: u64 = 256 * MIB;

/// One line of a watch: an event holds one object, and its type.
pub const EVENT_BYTES: u64 = OBJECT_BYTES + 64 * KIB;

/// What one answer may hold, and what that is (for the refusal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    pub bytes: u64,
    pub what: String,
}

impl Bound {
    /// The bound of a GET of `path`, by what the path names: an object (or its subresource),
    /// a collection (a page of `limit` objects, or the whole list), or another document.
    pub fn of_get(path: &str) -> Bound {
        let (p, query) = path.split_once('?').unwrap_or((path, ""));
        let segments: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
        let rest = match segments.as_slice() {
            ["api", _, rest @ ..] => rest,
            ["apis", _, _, rest @ ..] => rest,
            _ => &[],
        };
        let rest = match rest {
            ["namespaces", _, inner @ ..] if !inner.is_empty() => inner,
            _ => rest,
        };
        match rest.len() {
            0 => Bound {
                bytes: LIST_BYTES,
                what: "a document".into(),
            },
            1 => match page_size(query) {
                Some(n) => Bound {
                    bytes: n.saturating_mul(PAGE_ITEM_BYTES).max(LIST_BYTES),
                    what: format!("a page of {n} objects"),
                },
                None => Bound {
                    bytes: LIST_BYTES,
                    what: "a list".into(),
                },
            },
            _ => Bound::object(),
        }
    }

    /// One object (what a write answers, and an error's `Status`).
    pub fn object() -> Bound {
        Bound {
            bytes: OBJECT_BYTES,
            what: "one object".into(),
        }
    }

    /// The tighter of the two.
    pub fn min(self, other: Bound) -> Bound {
        if other.bytes < self.bytes {
            other
        } else {
            self
        }
    }

    /// "the answer passed 16 MiB, the most one object can be".
    fn refusal(&self) -> String {
        format!(
            "the answer passed {}, the most {} can be: not read further",
            human_bytes(self.bytes),
            self.what
        )
    }
}

/// `limit=N` of a query.
fn page_size(query: &str) -> Option<u64> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("limit="))
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
}

/// Why a body was not read.
#[derive(Debug)]
pub enum BodyError {
    /// It passed its bound (the message says which).
    TooLarge(String),
    /// The connection failed while it was read.
    Transport(kube::Error),
}

/// The body of `res`, read as it arrives, up to `bound`.
pub async fn read(
    res: http::Response<kube::client::Body>,
    bound: &Bound,
) -> Result<Vec<u8>, BodyError> {
    let declared = res
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > bound.bytes) {
        return Err(BodyError::TooLarge(bound.refusal()));
    }
    let mut body = res.into_body();
    let mut out = Vec::with_capacity(declared.unwrap_or(0) as usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(BodyError::Transport)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if (out.len() + data.len()) as u64 > bound.bytes {
            return Err(BodyError::TooLarge(bound.refusal()));
        }
        out.extend_from_slice(&data);
    }
    Ok(out)
}

/// The body of `res` as a stream of lines none longer than [`EVENT_BYTES`]: a line past it
/// ends the stream with an error naming `what` (the request), after which nothing more is
/// read.
pub fn lines_bounded(
    res: http::Response<kube::client::Body>,
    what: String,
) -> impl futures::AsyncBufRead + use<> {
    line_bounded(res.into_body().into_data_stream(), EVENT_BYTES, what).into_async_read()
}

/// `chunks` with every line (the bytes between line feeds) at most `limit` long; the first
/// longer one is an error, and the end (nothing is read after it).
fn line_bounded<S, E>(
    chunks: S,
    limit: u64,
    what: String,
) -> impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Unpin
where
    S: futures::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // The chunks, the bytes of the line the last chunk ended in, and whether the stream is over.
    let state = (chunks, 0u64, false, what);
    Box::pin(futures::stream::unfold(
        state,
        move |(mut chunks, mut open, over, what)| async move {
            if over {
                return None;
            }
            let checked = chunks
                .next()
                .await?
                .map_err(std::io::Error::other)
                .and_then(|b| {
                    if line_past(&mut open, &b, limit) {
                        Err(std::io::Error::other(format!(
                            "{what}: a line of the answer passed {}, the most one event can be: \
                             not read further",
                            human_bytes(limit)
                        )))
                    } else {
                        Ok(b)
                    }
                });
            let over = checked.is_err();
            Some((checked, (chunks, open, over, what)))
        },
    ))
}

/// Whether `chunk`, following a line of `open` bytes, holds (or ends in) a line longer than
/// `limit`; `open` becomes the bytes of the line it ends in.
fn line_past(open: &mut u64, chunk: &[u8], limit: u64) -> bool {
    let mut start = 0usize;
    for at in memchr::memchr_iter(b'\n', chunk) {
        if *open + (at - start) as u64 > limit {
            return true;
        }
        *open = 0;
        start = at + 1;
    }
    *open += (chunk.len() - start) as u64;
    *open > limit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_what_the_path_names() {
        let of = |p: &str| Bound::of_get(p);
        for object in [
            "/api/v1/namespaces/shop/configmaps/a",
            "/apis/apps/v1/namespaces/shop/deployments/web/scale",
            "/api/v1/namespaces/shop",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.example.com",
            "/api/v1/namespaces/shop/pods/p/log?container=c&limitBytes=10",
        ] {
            assert_eq!(of(object), Bound::object(), "{object}");
        }
        for list in [
            "/api/v1/namespaces",
            "/api/v1/namespaces/shop/events?fieldSelector=x",
            "/apis/apps/v1/deployments",
        ] {
            assert_eq!(of(list).bytes, LIST_BYTES, "{list}");
            assert_eq!(of(list).what, "a list", "{list}");
        }
        let page = of("/apis/apps/v1/deployments?limit=500&continue=abc");
        assert_eq!(
            (page.bytes, page.what.as_str()),
            (500 * PAGE_ITEM_BYTES, "a page of 500 objects")
        );
        assert_eq!(of("/api/v1/pods?limit=3").bytes, LIST_BYTES);
        for document in [
            "/version",
            "/apis",
            "/api/v1",
            "/openapi/v3/apis/apps/v1?hash=1",
        ] {
            assert_eq!(of(document).what, "a document", "{document}");
        }
    }

    #[test]
    fn lines_are_bounded_across_chunks() {
        let mut open = 0;
        assert!(!line_past(&mut open, b"abc\nde", 4));
        assert_eq!(open, 2);
        assert!(!line_past(&mut open, b"f", 4));
        assert!(line_past(&mut open, b"gh\n", 4));
        let mut open = 0;
        assert!(line_past(&mut open, b"a\nbcdef\ng", 4));
        let mut open = 0;
        assert!(!line_past(&mut open, b"abcd\nabcd\n", 4));
        assert_eq!(open, 0);
    }

    /// An endless line ends the stream with the error at the bound: nothing is read past it.
    #[tokio::test]
    async fn an_endless_line_is_an_error_at_the_bound() {
        use futures::AsyncBufReadExt;
        let chunk = bytes::Bytes::from(vec![b'x'; 1000]);
        let mut pulled = 0usize;
        let endless = futures::stream::repeat_with(|| {
            pulled += 1;
            Ok::<_, std::io::Error>(chunk.clone())
        });
        let first = futures::stream::iter([Ok(bytes::Bytes::from_static(b"{\"a\":1}\n"))]);
        let s = line_bounded(first.chain(endless), 10_000, "GET /x".into());
        let mut lines = s.into_async_read().lines();
        assert_eq!(lines.next().await.unwrap().unwrap(), "{\"a\":1}");
        let e = lines.next().await.unwrap().unwrap_err();
        assert!(
            e.to_string()
                .contains("GET /x: a line of the answer passed 9.8 KiB"),
            "{e}"
        );
        drop(lines);
        assert_eq!(pulled, 11);
    }
}
