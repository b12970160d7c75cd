//! `-o json`: the report as one JSON document. The schema is documented in
//! `docs/check-report.md`; `apiVersion` changes whenever a field changes meaning or goes away.

use crate::check::{ObjectReport, Report, Summary};
use crate::cores::{chunk_len, cores, map_chunks};
use serde::Serialize;
use std::io::Write;

/// The report's `apiVersion`.
pub const SCHEMA_VERSION: &str = "fieldguard.dev/v1";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    api_version: &'static str,
    kind: &'static str,
    field_manager: &'a str,
    force: Force,
    source: &'a str,
    summary: Summary,
    objects: &'a [ObjectReport],
    #[serde(skip_serializing_if = "Option::is_none")]
    hooks: Option<&'a crate::check::HookPlan>,
}

#[derive(Serialize)]
struct Force {
    mode: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    against: Vec<String>,
}

pub fn render(r: &Report) -> String {
    let mut out = Vec::new();
    match write(r, &mut out) {
        // serde_json writes UTF-8 only.
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        Err(e) => format!("{{\"error\":\"{e}\"}}\n"),
    }
}

/// [`render`] written to `w` as it is made: the objects rendered on every core (a chunk at a
/// time, each chunk's text written in order), the document around them by `serde_json`.
pub fn write(r: &Report, w: &mut dyn Write) -> std::io::Result<()> {
    // The document with no objects, then the objects put where its empty list is: the
    // pretty-printed key at depth 1 (a string never holds a raw newline, so nothing else
    // matches), its list as `serde_json` prints one at that depth.
    let mut head = serde_json::to_vec_pretty(&document(r, &[])).map_err(std::io::Error::other)?;
    head.push(b'\n');
    const EMPTY: &[u8] = b"\n  \"objects\": []";
    let at = memchr::memmem::find(&head, EMPTY)
        .filter(|_| !r.objects.is_empty())
        .map(|at| at + EMPTY.len() - 1);
    let Some(at) = at else {
        return w.write_all(&head);
    };
    w.write_all(&head[..at])?;
    let mut first = true;
    for chunk in objects_pretty(&r.objects)? {
        // Each object comes after `,` and its line; the first after its line only.
        let text = if first { &chunk[1..] } else { &chunk[..] };
        first = false;
        w.write_all(text)?;
    }
    w.write_all(b"\n  ")?;
    w.write_all(&head[at..])
}

/// The report as a document, with `objects` for its list.
fn document<'a>(r: &'a Report, objects: &'a [ObjectReport]) -> Document<'a> {
    Document {
        api_version: SCHEMA_VERSION,
        kind: "CheckReport",
        field_manager: &r.field_manager,
        force: Force {
            mode: r.force.mode(),
            against: r.force.patterns(),
        },
        source: &r.source,
        summary: r.summary(),
        objects,
        hooks: r.hooks.as_ref(),
    }
}

/// Fewer objects than this are rendered on the calling thread.
const PARALLEL_OBJECTS: usize = 64;

/// Each object as `serde_json`'s pretty printer writes an item of a list at depth 1 of a
/// document (`,`, a new line, its indentation, the object), in chunks of contiguous objects.
fn objects_pretty(objects: &[ObjectReport]) -> std::io::Result<Vec<Vec<u8>>> {
    let render = |run: &[ObjectReport]| -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        for o in run {
            out.extend_from_slice(b",\n    ");
            // The printer at depth 2 (the document's object, then its list).
            let mut f = serde_json::ser::PrettyFormatter::new();
            for _ in 0..2 {
                serde_json::ser::Formatter::begin_array(&mut f, &mut std::io::sink())?;
            }
            let mut s = serde_json::Serializer::with_formatter(&mut out, f);
            o.serialize(&mut s).map_err(std::io::Error::other)?;
        }
        Ok(out)
    };
    if objects.len() < PARALLEL_OBJECTS || cores() < 2 {
        return Ok(vec![render(objects)?]);
    }
    map_chunks(objects, chunk_len(objects.len()), cores(), render)
        .into_iter()
        .map(|r| r.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        .collect()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Problem<'a> {
    file: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    document: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
    message: &'a str,
}

/// `{"apiVersion": …, "kind": "InvalidInput", "errors": [{file, document, line, path, message}]}`.
pub fn render_errors(errors: &[crate::manifest::ManifestError]) -> String {
    let problems: Vec<Problem> = errors
        .iter()
        .map(|e| Problem {
            file: &e.file,
            document: e.doc,
            line: e.line,
            path: e.path.as_deref(),
            message: &e.message,
        })
        .collect();
    let doc = serde_json::json!({
        "apiVersion": SCHEMA_VERSION,
        "kind": "InvalidInput",
        "errors": problems,
    });
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, DEFAULT_KUBERNETES};
    use crate::check::Options;
    use std::fmt::Write as _;

    /// A report of `n` ConfigMaps to create (and a Helm hook when `hooked`).
    fn report(n: usize, hooked: bool) -> Report {
        let mut text = String::new();
        for i in 0..n {
            let _ = write!(
                text,
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\ndata: {{k: \"v\\n\\\"{i}\"}}\n"
            );
        }
        if hooked {
            text.push_str("---\napiVersion: v1\nkind: Pod\nmetadata: {name: t, annotations: {helm.sh/hook: test}}\nspec: {containers: [{name: t, image: 't:1'}]}\n");
        }
        let mut l = crate::manifest::load(&[], &mut std::io::empty());
        crate::manifest::parse_into(&std::sync::Arc::from("m.yaml"), text.as_bytes(), &mut l);
        assert!(l.errors.is_empty(), "{:?}", l.errors);
        let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
        let targets = crate::check::resolve(l.documents, &mut c, "team").unwrap();
        let opts = Options {
            field_manager: "ci".into(),
            force: crate::check::Force::None,
            namespace: "team".into(),
            now: 1_700_000_000,
        };
        crate::check::run(&targets, &Default::default(), &opts, None, &mut |_, _| {})
    }

    /// The objects spliced into the document read exactly as `serde_json` prints the whole
    /// document: none, one, and enough for every core, with and without the hooks after them.
    #[test]
    fn the_document_reads_as_serde_json_prints_it() {
        for (n, hooked) in [
            (0, false),
            (0, true),
            (1, false),
            (3, true),
            (200, false),
            (200, true),
        ] {
            let r = report(n, hooked);
            // The whole document, as `serde_json` prints it in one piece.
            let want = serde_json::to_string_pretty(&document(&r, &r.objects)).unwrap() + "\n";
            assert_eq!(render(&r), want, "{n} objects, hooks {hooked}");
            assert_eq!(r.hooks.is_some(), hooked, "{n}");
        }
    }
}
