//! What the cache keeps of a metadata-only object, watch event or list page, read in one pass
//! over its JSON text without serde: the object's name, namespace, resourceVersion, labels (as
//! text) and managedFields (FieldsV1 as text, with the places of its list-item keys found on
//! the way, so `fields.rs` does not look for them again). Everything else is checked to be JSON
//! and passed over.
//!
//! The skim is a fast path, never a second opinion. It answers only for text it reads exactly
//! as serde reads it into the types of `table.rs` and `watch.rs`, and gives up (`None`) on the
//! rest: an escape in a kept string or in a key, a kept field repeated or of another type,
//! nesting deeper than the cursor's `DEPTH` (serde_json's limit is deeper), a number with an
//! exponent, an escaped surrogate, anything that is not JSON. Serde then reads the text as
//! before and says what is wrong with it. So whenever the skim answers, its answer is the one
//! serde gives (the tests hold it to that, on real and mutated text). Its tokens are the
//! cursor's (`value/cursor.rs`), which the snapshot's skim and the direct JSON reader use too.

use super::fields::is_item_key;
use crate::value::cursor::{Cursor, Text};
use std::borrow::Cow;
use std::ops::Range;

/// An object's metadata, as the cache keeps it (read by the skim or by serde).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Meta<'a> {
    pub(super) name: Cow<'a, str>,
    pub(super) namespace: Cow<'a, str>,
    pub(super) resource_version: Cow<'a, str>,
    /// The labels' JSON text (`None` when absent or null).
    pub(super) labels: Option<&'a str>,
    pub(super) managed: Vec<Managed<'a>>,
    /// The list-item keys the skim found in the entries' FieldsV1 texts: each the content of
    /// a string token starting with `k:` or `v:`, as offsets into that entry's text.
    pub(super) cuts: Vec<(usize, usize)>,
}

/// One managedFields entry, borrowed from the text.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Managed<'a> {
    pub(super) manager: Cow<'a, str>,
    pub(super) operation: Cow<'a, str>,
    pub(super) api_version: Cow<'a, str>,
    pub(super) subresource: Cow<'a, str>,
    pub(super) time: Option<Cow<'a, str>>,
    /// The FieldsV1 JSON text (`None` when absent or null).
    pub(super) fields_v1: Option<&'a str>,
    /// Its item keys, a range of [`Meta::cuts`]: `None` when not looked for (serde read it).
    pub(super) cuts: Option<Range<usize>>,
}

/// A metadata-only list page.
#[derive(Debug, Default, PartialEq)]
pub(super) struct List<'a> {
    pub(super) items: Vec<Meta<'a>>,
    pub(super) resource_version: Cow<'a, str>,
    pub(super) cont: Cow<'a, str>,
}

/// A watch event (`type` and its object's metadata).
pub(super) fn event(text: &str) -> Option<(Cow<'_, str>, Meta<'_>)> {
    let mut s = Skim::new(text);
    let (mut kind, mut meta) = (None, None);
    s.object(0, |s, key, depth| match key {
        b"type" => once(&mut kind, s.plain()?),
        b"object" => once(&mut meta, s.object_meta(depth)?),
        _ => s.skip(depth),
    })?;
    s.end()?;
    Some((kind?, meta?))
}

/// A metadata-only object (`PartialObjectMetadata`).
pub(super) fn object(text: &str) -> Option<Meta<'_>> {
    let mut s = Skim::new(text);
    let meta = s.object_meta(0)?;
    s.end()?;
    Some(meta)
}

/// A metadata-only list page (`PartialObjectMetadataList`).
pub(super) fn list(text: &str) -> Option<List<'_>> {
    let mut s = Skim::new(text);
    let mut list = List::default();
    let (mut items, mut head) = (None, None);
    s.object(0, |s, key, depth| match key {
        b"items" => {
            once(&mut items, ())?;
            // kube-apiserver encodes an empty metadata list's items as `null` (a nil Go slice).
            if s.null()? {
                return Some(());
            }
            s.array(depth, |s, depth| {
                list.items.push(s.object_meta(depth)?);
                Some(())
            })
        }
        b"metadata" => {
            once(&mut head, ())?;
            let (mut rv, mut cont) = (None, None);
            s.object(depth, |s, key, depth| match key {
                b"resourceVersion" => once(&mut rv, s.plain()?),
                b"continue" => once(&mut cont, s.plain()?),
                _ => s.skip(depth),
            })?;
            list.resource_version = rv.unwrap_or_default();
            list.cont = cont.unwrap_or_default();
            Some(())
        }
        _ => s.skip(depth),
    })?;
    s.end()?;
    Some(list)
}

/// Sets a field read for the first time; a repeat gives up (serde refuses a repeated field).
fn once<T>(slot: &mut Option<T>, v: T) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(v);
            Some(())
        }
    }
}

/// The JSON cursor, with the text it reads (kept strings are borrowed from it).
struct Skim<'a> {
    text: &'a str,
    c: Cursor<'a>,
}

impl<'a> Skim<'a> {
    fn new(text: &'a str) -> Skim<'a> {
        Skim {
            text,
            c: Cursor::new(text),
        }
    }

    /// The next byte after whitespace (not taken).
    #[inline(always)]
    fn peek(&mut self) -> Option<u8> {
        self.c.space();
        self.c.peek()
    }

    /// Nothing but whitespace left.
    fn end(&mut self) -> Option<()> {
        self.c.at_end().then_some(())
    }

    /// A string token (after whitespace).
    #[inline(always)]
    fn string(&mut self) -> Option<Text> {
        (self.peek()? == b'"').then_some(())?;
        self.c.string()
    }

    /// A string without escapes, borrowed.
    fn plain(&mut self) -> Option<Cow<'a, str>> {
        let t = self.string()?;
        (!t.escaped).then(|| Cow::Borrowed(&self.text[t.start..t.end]))
    }

    /// `null` (taken: true) or not (nothing taken).
    fn null(&mut self) -> Option<bool> {
        if self.peek()? == b'n' {
            self.c.word(b"null")?;
            return Some(true);
        }
        Some(false)
    }

    /// An object at `depth`, each member handed to `member` with its key (no escapes) and the
    /// depth of its value; `member` must take the value.
    fn object(
        &mut self,
        depth: usize,
        mut member: impl FnMut(&mut Self, &'a [u8], usize) -> Option<()>,
    ) -> Option<()> {
        (self.peek()? == b'{').then_some(())?;
        if self.c.open(depth, b'}')? {
            return Some(());
        }
        loop {
            let key = self.string()?;
            if key.escaped {
                return None;
            }
            self.c.eat(b':')?;
            member(self, &self.c.b[key.start..key.end], depth + 1)?;
            if !self.c.next(b'}')? {
                return Some(());
            }
        }
    }

    /// An array at `depth`, each item handed to `item` with its depth; `item` must take it.
    fn array(
        &mut self,
        depth: usize,
        mut item: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<()> {
        (self.peek()? == b'[').then_some(())?;
        if self.c.open(depth, b']')? {
            return Some(());
        }
        loop {
            item(self, depth + 1)?;
            if !self.c.next(b']')? {
                return Some(());
            }
        }
    }

    /// Passes over any value, checking it is JSON ([`Cursor::skip`]).
    fn skip(&mut self, depth: usize) -> Option<()> {
        self.c.skip(depth)
    }

    /// [`Cursor::value`]: passes over any value, handing every string's range to `seen`.
    fn value(&mut self, depth: usize, seen: &mut impl FnMut(usize, usize)) -> Option<()> {
        self.c.value(depth, seen)
    }

    /// A value's text, as serde's `RawValue` borrows it (`None` for null).
    fn raw(&mut self, depth: usize) -> Option<Option<&'a str>> {
        if self.null()? {
            return Some(None);
        }
        let start = self.c.at;
        self.skip(depth)?;
        Some(Some(&self.text[start..self.c.at]))
    }

    /// An object of which only `metadata` is kept (it must be there).
    fn object_meta(&mut self, depth: usize) -> Option<Meta<'a>> {
        let mut meta = None;
        self.object(depth, |s, key, depth| match key {
            b"metadata" => once(&mut meta, s.meta(depth)?),
            _ => s.skip(depth),
        })?;
        meta
    }

    fn meta(&mut self, depth: usize) -> Option<Meta<'a>> {
        let mut m = Meta::default();
        let (mut name, mut namespace, mut rv) = (None, None, None);
        let (mut labels, mut managed) = (None, None);
        self.object(depth, |s, key, depth| match key {
            b"name" => once(&mut name, s.plain()?),
            b"namespace" => once(&mut namespace, s.plain()?),
            b"resourceVersion" => once(&mut rv, s.plain()?),
            b"labels" => once(&mut labels, s.raw(depth)?),
            b"managedFields" => {
                once(&mut managed, ())?;
                if s.null()? {
                    return Some(());
                }
                s.array(depth, |s, depth| {
                    let entry = s.managed(depth, &mut m.cuts)?;
                    m.managed.push(entry);
                    Some(())
                })
            }
            _ => s.skip(depth),
        })?;
        m.name = name.unwrap_or_default();
        m.namespace = namespace.unwrap_or_default();
        m.resource_version = rv.unwrap_or_default();
        m.labels = labels.flatten();
        Some(m)
    }

    fn managed(&mut self, depth: usize, cuts: &mut Vec<(usize, usize)>) -> Option<Managed<'a>> {
        let (mut manager, mut operation, mut api_version) = (None, None, None);
        let (mut subresource, mut time, mut fields) = (None, None, None);
        let mut found = cuts.len()..cuts.len();
        self.object(depth, |s, key, depth| match key {
            b"manager" => once(&mut manager, s.plain()?),
            b"operation" => once(&mut operation, s.plain()?),
            b"apiVersion" => once(&mut api_version, s.plain()?),
            b"subresource" => once(&mut subresource, s.plain()?),
            b"time" => {
                let t = if s.null()? { None } else { Some(s.plain()?) };
                once(&mut time, t)
            }
            b"fieldsV1" => {
                if s.null()? {
                    return once(&mut fields, None);
                }
                let start = s.c.at;
                let text = s.c.b;
                found.start = cuts.len();
                s.value(depth, &mut |from, to| {
                    if is_item_key(&text[from..to]) {
                        cuts.push((from - start, to - start));
                    }
                })?;
                found.end = cuts.len();
                once(&mut fields, Some(&s.text[start..s.c.at]))
            }
            _ => s.skip(depth),
        })?;
        let fields_v1 = fields.flatten();
        Some(Managed {
            manager: manager.unwrap_or_default(),
            operation: operation.unwrap_or_default(),
            api_version: api_version.unwrap_or_default(),
            subresource: subresource.unwrap_or_default(),
            time: time.flatten(),
            cuts: fields_v1.map(|_| found),
            fields_v1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::table::RawObject;
    use crate::cache::watch::{RawMetaEvent, RawMetaList};

    /// A Pod's metadata-only event, with what the skim must pass over: escapes and unicode in
    /// skipped strings, numbers of every form, literals, nested lists, and FieldsV1 whose
    /// item keys hold escaped quotes.
    const POD: &str = r#"{"type":"MODIFIED","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"web-7d4b9c-x2x9z","generateName":"web-7d4b9c-","namespace":"team-a","uid":"6f1c7a52-3e0b-4d8e-9a61-000000000001","resourceVersion":"48213","generation":12,"creationTimestamp":"2026-11-20T10:00:00Z","labels":{"app":"web","pod-template-hash":"7d4b9c"},"annotations":{"note":"caf\u00e9 \"quoted\" \\ back\/slash \n é","weights":[-1.5,0,0.25,100,-0],"flags":{"on":true,"off":false,"none":null}},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d4b9c","uid":"u-1","controller":true,"blockOwnerDeletion":true}],"finalizers":[],"managedFields":[{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-11-20T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"u-1\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:ports":{"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}},"f:finalizers":{"v:\"x\"":{}}}}},{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-11-20T10:00:07Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:podIPs":{".":{},"k:{\"ip\":\"10.0.0.7\"}":{".":{},"f:ip":{}}},"f:phase":{}}},"subresource":"status"},{"manager":"hand","operation":"Apply","apiVersion":"v1","time":null,"fieldsV1":null}]}}}"#;

    const OTHERS: &[&str] = &[
        r#"{"type":"DELETED","object":{"metadata":{"name":"a","namespace":"n","resourceVersion":"9"}}}"#,
        r#" {"object":{"kind":"PartialObjectMetadata","metadata":{"name":"a","labels":null,"managedFields":null}} , "type":"ADDED"} "#,
        r#"{"type":"BOOKMARK","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"12345","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}}}}"#,
        r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}"#,
        r#"{"type":"ADDED","object":{"metadata":{"name":"b","managedFields":[{"manager":"m","fieldsV1":"not an object"},{"fieldsV1":{"k:":{},"v:":[],"x":"k:y"}},{}]}}}"#,
    ];

    /// What serde reads (the types the cache used before the skim), as the skim reads it.
    fn by_serde(text: &str) -> Option<(Cow<'_, str>, Meta<'_>)> {
        let ev: RawMetaEvent = serde_json::from_str(text).ok()?;
        Some((ev.kind, ev.object.metadata.into()))
    }

    /// Checks the skim's item keys against the scan `fields.rs` makes of the same text, then
    /// drops them (serde does not look for them).
    fn checked_cuts(mut m: Meta<'_>) -> Meta<'_> {
        for e in &mut m.managed {
            let found = match (e.fields_v1, e.cuts.take()) {
                (Some(_), Some(range)) => m.cuts[range].to_vec(),
                (None, None) => continue,
                other => panic!("item keys without a text or the reverse: {other:?}"),
            };
            let text = e.fields_v1.unwrap_or_default().as_bytes();
            let scanned: Vec<(usize, usize)> = crate::cache::fields::item_keys(text).collect();
            assert_eq!(found, scanned, "{:?}", e.fields_v1);
        }
        m.cuts.clear();
        m
    }

    fn same_as_serde(text: &str) -> bool {
        let Some((kind, meta)) = event(text) else {
            return false;
        };
        let serde =
            by_serde(text).unwrap_or_else(|| panic!("the skim read what serde refuses: {text}"));
        assert_eq!((kind, checked_cuts(meta)), serde, "{text}");
        true
    }

    #[test]
    fn reads_what_serde_reads() {
        for text in std::iter::once(POD).chain(OTHERS.iter().copied()) {
            assert!(same_as_serde(text), "the skim gave up on {text}");
        }
        let (_, pod) = event(POD).unwrap();
        assert_eq!(pod.managed.len(), 3);
        assert_eq!(
            pod.labels,
            Some(r#"{"app":"web","pod-template-hash":"7d4b9c"}"#)
        );
        let keys = |i: usize| {
            let e = &pod.managed[i];
            let text = e.fields_v1.unwrap();
            pod.cuts[e.cuts.clone().unwrap()]
                .iter()
                .map(|&(a, b)| &text[a..b])
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(0),
            [
                r#"k:{\"uid\":\"u-1\"}"#,
                r#"k:{\"name\":\"app\"}"#,
                r#"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}"#,
                r#"v:\"x\""#
            ]
        );
        assert_eq!(keys(1), [r#"k:{\"ip\":\"10.0.0.7\"}"#]);
        assert_eq!(pod.managed[2].fields_v1, None);
    }

    /// Texts serde reads but the skim leaves to it, and texts neither reads.
    #[test]
    fn gives_up_where_serde_must_decide() {
        let serde_reads = [
            POD.replace(
                r#""name":"web-7d4b9c-x2x9z""#,
                r#""name":"web\u002d7d4b9c""#,
            ),
            POD.replace(r#""namespace""#, r#""n\u0061mespace""#),
            POD.replace(r#""manager":"kubelet""#, r#""manager":"kube\/let""#),
            POD.replace("caf\\u00e9", "\\ud83d\\ude00"),
            POD.replace(r#""generation":12"#, r#""generation":1.2e1"#),
        ];
        for text in &serde_reads {
            assert!(by_serde(text).is_some(), "{text}");
            assert!(event(text).is_none(), "{text}");
        }
        let nobody_reads = [
            POD.replace(
                r#""namespace":"team-a","#,
                r#""namespace":"team-a","name":"again","#,
            ),
            POD.replace(r#""type":"MODIFIED""#, r#""type":null"#),
            POD.replace(r#""generation":12"#, r#""generation":012"#),
            POD.replace(r#""generation":12"#, r#""generation":1."#),
            POD.replace(r#""generation":12"#, r#""generation":tru"#),
            POD.replace("\\n é", "\n é"),
            format!("{POD} x"),
            POD.replace(r#""resourceVersion":"48213""#, r#""resourceVersion":48213"#),
            POD.replace(
                r#"{"type":"MODIFIED","object":{"kind""#,
                r#"{"type":"MODIFIED","object":{"metadata":{},"kind""#,
            ),
        ];
        for text in &nobody_reads {
            assert!(by_serde(text).is_none(), "{text}");
            assert!(event(text).is_none(), "{text}");
        }
    }

    /// Nesting is bounded: deep FieldsV1 gives up without exhausting the stack.
    #[test]
    fn deep_nesting_gives_up() {
        let nested = |n: usize| {
            format!(
                "{}{}",
                r#"{"f:a":"#.repeat(n),
                "{}".to_string() + &"}".repeat(n)
            )
        };
        let with = |fields: &str| {
            POD.replace(
                r#"{"f:status":{"f:podIPs""#,
                &format!(r#"{{"f:x":{fields},"f:status":{{"f:podIPs""#),
            )
        };
        assert!(same_as_serde(&with(&nested(80))));
        assert!(event(&with(&nested(120))).is_none());
        assert!(event(&with(&nested(100_000))).is_none());
        assert!(event(&"[".repeat(1_000_000)).is_none());
    }

    /// Mutated events (JSON's own characters inserted, bytes cut, keys repeated): whenever
    /// the skim reads one, serde reads the same. Many mutants stay readable, so the check
    /// bites.
    #[test]
    fn mutated_events_are_read_as_serde_reads_them_or_left_to_it() {
        // JSON's single characters (and a control character), then longer pieces.
        let singles = "\"\\{}[],: \t\u{1}07-.e".chars().map(String::from);
        let words = [
            "true",
            "null",
            "\\u00e9",
            "k:",
            "\"name\":\"x\",",
            "{}",
            "\"f:a\":{},",
        ];
        let owned: Vec<String> = singles.chain(words.map(String::from)).collect();
        let pieces: Vec<&str> = owned.iter().map(String::as_str).collect();
        let mut rng = crate::value::skim::Rng(0x2545_f491_4f6c_dd1d);
        let bases: Vec<&str> = std::iter::once(POD).chain(OTHERS.iter().copied()).collect();
        let (mut read, mut tried) = (0, 0);
        for round in 0..30_000 {
            let text = crate::value::skim::mutant(bases[round % bases.len()], &pieces, &mut |n| {
                rng.below(n)
            });
            tried += 1;
            read += usize::from(same_as_serde(&text));
        }
        assert!(read > tried / 10, "only {read} of {tried} mutants read");
    }

    #[test]
    fn lists_and_objects_are_read_as_serde_reads_them() {
        let items: Vec<&str> = [POD, OTHERS[0], OTHERS[4]]
            .iter()
            .map(|e| {
                let at = e.find(r#""object":"#).unwrap() + r#""object":"#.len();
                &e[at..e.rfind('}').unwrap()]
            })
            .collect();
        let page = format!(
            r#"{{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{{"resourceVersion":"777","continue":"abc","remainingItemCount":3}},"items":[{}]}}"#,
            items.join(",")
        );
        let skimmed = list(&page).unwrap();
        let serde: RawMetaList = serde_json::from_str(&page).unwrap();
        assert_eq!(skimmed.resource_version, serde.metadata.resource_version);
        assert_eq!(skimmed.cont, "abc");
        let serde_items: Vec<Meta> = (serde.items.into_iter().flatten())
            .map(|o| o.metadata.into())
            .collect();
        let skimmed_items: Vec<Meta> = skimmed.items.into_iter().map(checked_cuts).collect();
        assert_eq!(skimmed_items, serde_items);
        for item in &items {
            let serde: RawObject = serde_json::from_str(item).unwrap();
            assert_eq!(
                checked_cuts(object(item).unwrap()),
                Meta::from(serde.metadata)
            );
        }
        // An empty page, and one as kube-apiserver sends an empty metadata list (items null).
        let empty = list(r#"{"metadata":{"resourceVersion":"1"},"items":[]}"#).unwrap();
        assert_eq!(
            (empty.items.len(), &*empty.resource_version, &*empty.cont),
            (0, "1", "")
        );
        let null = list(r#"{"metadata":{"resourceVersion":"2"},"items":null}"#).unwrap();
        assert_eq!((null.items.len(), &*null.resource_version), (0, "2"));
    }
}
