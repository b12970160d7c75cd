//! A managedFields entry's FieldsV1 text, kept compact: the text with the content of every key
//! naming a list item (`k:{"name":"app"}`, `v:"x"`) cut out — its *shape*, the same for every
//! Pod of a ReplicaSet — and those contents on their own. Both are interned, so same-shaped
//! objects share the shape, and objects differing in one key (a Pod's IP) share all but a
//! short text. The apiserver's text comes back byte for byte.
//!
//! The cut is safe for any JSON text: every string token whose content starts with `k:` or
//! `v:` loses what follows the prefix, and the contents are joined with NUL, which no JSON
//! text holds raw. Putting it back visits the shape's string tokens in the same order.

use super::intern::Interner;
use std::borrow::Cow;
use std::sync::Arc;

/// NUL: never raw inside a JSON text, so it separates the cut contents unambiguously.
const SEP: char = '\0';

/// One entry's FieldsV1 text, as its shape and its keys' contents (both interned).
#[derive(Clone, Debug)]
pub struct Fields {
    shape: Arc<str>,
    /// The contents cut out, in order, each followed by NUL; `None` when nothing was cut.
    keys: Option<Arc<str>>,
}

/// The string tokens of a JSON text, as (start of content, end of content) byte offsets: the
/// content lies between the quotes. A string the text ends inside of ends the tokens (the cut
/// then keeps it whole: such text never came from the apiserver, but it must still come back
/// unchanged).
///
/// A plain byte loop: in FieldsV1 text a quote or backslash comes every few bytes, too close
/// together for a vectorised search (two `memchr` calls per token) to pay for its setup.
fn strings(text: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let open = at + text.get(at..)?.iter().position(|&b| b == b'"')?;
        let mut i = open + 1;
        while let Some(&b) = text.get(i) {
            match b {
                b'"' => {
                    at = i + 1;
                    return Some((open + 1, i));
                }
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
        at = text.len();
        None
    })
}

pub(super) fn is_item_key(content: &[u8]) -> bool {
    content.starts_with(b"k:") || content.starts_with(b"v:")
}

/// The contents of the string tokens of `text` that name list items (`k:…`, `v:…`), in order:
/// what the cut takes out.
pub(super) fn item_keys(text: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    strings(text).filter(|&(start, end)| is_item_key(&text[start..end]))
}

impl Fields {
    /// Cuts and interns `text`.
    pub fn intern(text: &str, interner: &Interner) -> Fields {
        let bytes = text.as_bytes();
        // A raw NUL (never in JSON) would blur the separators: such a text is kept whole.
        let cuts = if memchr::memchr(0, bytes).is_some() {
            None
        } else {
            Some(item_keys(bytes))
        };
        Self::with_scratch(|scratch| {
            Self::intern_with(text, cuts.into_iter().flatten(), interner, scratch)
        })
    }

    /// Cuts and interns `text`, a JSON text (checked: so it holds no raw NUL) whose item keys
    /// are known: `cuts` are the contents of its string tokens that start with `k:` or `v:`,
    /// in order (what the skim of an event finds on its way).
    pub(super) fn intern_cut(text: &str, cuts: &[(usize, usize)], interner: &Interner) -> Fields {
        Self::with_scratch(|scratch| {
            Self::intern_with(text, cuts.iter().copied(), interner, scratch)
        })
    }

    fn with_scratch(f: impl FnOnce(&mut Scratch) -> Fields) -> Fields {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Scratch> = Default::default();
        }
        SCRATCH.with(|s| match s.try_borrow_mut() {
            Ok(mut scratch) => f(&mut scratch),
            Err(_) => f(&mut Scratch::default()),
        })
    }

    /// Cuts `text` at `cuts` (item keys' contents) and interns the shape and the keys.
    fn intern_with(
        text: &str,
        cuts: impl Iterator<Item = (usize, usize)>,
        interner: &Interner,
        scratch: &mut Scratch,
    ) -> Fields {
        scratch.shape.clear();
        scratch.keys.clear();
        let mut from = 0;
        for (start, end) in cuts {
            // Keep `"k:`, cut the rest of the content.
            scratch.shape.push_str(&text[from..start + 2]);
            scratch.keys.push_str(&text[start + 2..end]);
            scratch.keys.push(SEP);
            from = end;
        }
        if from == 0 {
            return Fields {
                shape: interner.text(text),
                keys: None,
            };
        }
        scratch.shape.push_str(&text[from..]);
        Fields {
            shape: interner.text(&scratch.shape),
            keys: Some(interner.text(&scratch.keys)),
        }
    }

    /// The FieldsV1 text, as the apiserver wrote it.
    pub fn text(&self) -> Cow<'_, str> {
        let Some(keys) = &self.keys else {
            return Cow::Borrowed(&self.shape);
        };
        let shape = &*self.shape;
        let mut out = String::with_capacity(shape.len() + keys.len());
        let mut from = 0;
        let mut cut = keys.split(SEP);
        for (start, _) in item_keys(shape.as_bytes()) {
            out.push_str(&shape[from..start + 2]);
            out.push_str(cut.next().unwrap_or(""));
            from = start + 2;
        }
        out.push_str(&shape[from..]);
        Cow::Owned(out)
    }

    /// The addresses of its interned texts: equal for [`Fields::same`] ones, and unique while
    /// this value lives (it holds them).
    pub fn addresses(&self) -> (usize, usize) {
        (
            Arc::as_ptr(&self.shape) as *const u8 as usize,
            self.keys
                .as_ref()
                .map_or(0, |k| Arc::as_ptr(k) as *const u8 as usize),
        )
    }

    /// The very same interned texts (what interning makes of equal ones).
    pub fn same(&self, other: &Fields) -> bool {
        Arc::ptr_eq(&self.shape, &other.shape)
            && match (&self.keys, &other.keys) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

/// Buffers [`Fields::intern`] reuses (one per thread).
#[derive(Default)]
struct Scratch {
    shape: String,
    keys: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> Fields {
        let interner = Interner::default();
        let f = Fields::intern(text, &interner);
        assert_eq!(f.text(), text, "{text:?}");
        f
    }

    #[test]
    fn a_pods_fields_come_back_byte_for_byte_and_share_their_shape() {
        let pod = |ip: &str| {
            format!(
                r#"{{"f:status":{{"f:conditions":{{"k:{{\"type\":\"Ready\"}}":{{".":{{}},"f:status":{{}}}}}},"f:podIPs":{{".":{{}},"k:{{\"ip\":\"{ip}\"}}":{{".":{{}},"f:ip":{{}}}}}},"f:phase":{{}}}}}}"#
            )
        };
        let interner = Interner::default();
        let a = Fields::intern(&pod("10.0.0.1"), &interner);
        let b = Fields::intern(&pod("10.0.0.2"), &interner);
        let a2 = Fields::intern(&pod("10.0.0.1"), &interner);
        assert_eq!(a.text(), pod("10.0.0.1"));
        assert_eq!(b.text(), pod("10.0.0.2"));
        assert!(Arc::ptr_eq(&a.shape, &b.shape), "one shape for both Pods");
        assert!(!a.same(&b));
        assert!(a.same(&a2));
        // Only the keys' contents are kept per Pod.
        assert_eq!(
            a.keys.as_deref(),
            Some("{\\\"type\\\":\\\"Ready\\\"}\0{\\\"ip\\\":\\\"10.0.0.1\\\"}\0")
        );
        assert!(!a.shape.contains("10.0.0.1"));
    }

    #[test]
    fn any_text_comes_back_unchanged() {
        for text in [
            "{}",
            "",
            r#"{"f:metadata":{"f:finalizers":{".":{},"v:\"x\"":{}}}}"#,
            // Keys with escapes, an empty key, NUL-free unicode, spacing, odd values.
            r#"{ "k:" : {}, "k:{\"a\\\\\":1}" : {"v:\"\\u0000\"":{}} , "f:x":"k:y"}"#,
            r#"{"k:\u00e9\"}":{}}"#,
            r#"["k:1","v:2",{"k:3":"v:4"}]"#,
            // Not JSON: an unterminated string, a trailing backslash.
            r#"{"k:abc"#,
            r#"{"k:abc\"#,
            r#""k:""#,
            "\"",
            "{\"k:a\0b\":{},\"k:c\":{}}",
            // A backslash as the last byte, inside a string and before what would close it.
            "\"a\\",
            "\"\\",
            "{\"k:a\\\"",
        ] {
            assert_eq!(
                strings(text.as_bytes()).collect::<Vec<_>>(),
                strings_by_memchr(text.as_bytes()),
                "{text:?}"
            );
            round_trip(text);
        }
        assert!(round_trip(r#"{"f:a":{"f:b":{}}}"#).keys.is_none());
    }

    /// The tokens as two `memchr` searches per string find them (how `strings` was written
    /// before): the reference the byte loop is held to.
    fn strings_by_memchr(text: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(open) = text.get(at..).and_then(|t| memchr::memchr(b'"', t)) {
            let open = at + open;
            let mut i = open + 1;
            loop {
                match text.get(i..).and_then(|t| memchr::memchr2(b'"', b'\\', t)) {
                    Some(j) if text[i + j] == b'\\' => i += j + 2,
                    Some(j) => {
                        at = i + j + 1;
                        out.push((open + 1, i + j));
                        break;
                    }
                    None => return out,
                }
            }
        }
        out
    }

    /// Mutated texts (bytes dropped, duplicated, swapped for quotes and backslashes) still come
    /// back unchanged: the cut never loses or moves a byte. And their string tokens are the
    /// ones the reference search finds.
    #[test]
    fn mutated_texts_come_back_unchanged() {
        let base = r#"{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:ports":{"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{}}}},"f:finalizers":{"v:\"a\\\"b\"":{}}}}"#;
        let bytes = base.as_bytes();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..5000 {
            let mut t = bytes.to_vec();
            for _ in 0..(next() % 4 + 1) {
                let i = (next() as usize) % t.len();
                match next() % 4 {
                    0 => t[i] = b'"',
                    1 => t[i] = b'\\',
                    2 => {
                        t.remove(i);
                    }
                    _ => t.insert(i, t[i]),
                }
            }
            assert_eq!(
                strings(&t).collect::<Vec<_>>(),
                strings_by_memchr(&t),
                "{:?}",
                String::from_utf8_lossy(&t)
            );
            if let Ok(s) = std::str::from_utf8(&t) {
                round_trip(s);
            }
        }
    }
}
