use super::*;
use crate::value::cursor::DEPTH;
use crate::value::json;

/// What the serde path gives, strict and not, and what the direct reader gives, as text that
/// shows the order of keys and integers against floats.
fn both(text: &str) -> (Option<String>, Option<String>, Option<String>) {
    let show = |v: Value| format!("{v:?}");
    (
        json::serde_strict(text.as_bytes()).ok().map(show),
        json::serde_lenient(text).ok().map(show),
        read(text).map(show),
    )
}

#[test]
fn reads_integers_strings_and_maps_as_serde_does() {
    for ok in [
        r#"{"a":1,"b":-2,"c":0,"d":"x","e":true,"f":false,"g":null,"h":[],"i":{},"j":[1,"2",{"k":[]}]}"#,
        r#"{"max":9223372036854775807,"min":-9223372036854775808}"#,
        r#"  { "spaced" : [ 1 , 2 ] , "nl" :
            "x" }  "#,
        r#"{"esc":"a\"b\\c\/d\be\ff\ng\rh\ti\u00e9j\u0000k","k:{\"name\":\"app\"}":{}}"#,
        r#""a string alone""#,
        "[\"é\",\"日本\"]",
        "17",
    ] {
        let (strict, lenient, direct) = both(ok);
        assert!(direct.is_some(), "declined {ok}");
        assert_eq!(direct, strict, "{ok}");
        assert_eq!(direct, lenient, "{ok}");
    }
}

#[test]
fn declines_what_serde_reads_its_own_way_or_refuses() {
    for declined in [
        // Floats, and integers serde reads as floats.
        r#"{"a":1.5}"#,
        r#"{"a":1e3}"#,
        r#"{"a":9223372036854775808}"#,
        r#"{"a":-9223372036854775809}"#,
        r#"{"a":18446744073709551616}"#,
        r#"{"a":-0}"#,
        // Surrogates, repeated keys (an error for one parse, the last value for the other).
        r#"{"a":"\ud83d\ude00"}"#,
        r#"{"a":1,"a":2}"#,
        r#"{"x":{"b":1,"c":2,"b":3}}"#,
        // Wrong.
        r#"{"a":01}"#,
        r#"{"a":-}"#,
        r#"{"a":1,}"#,
        r#"[1,]"#,
        r#"{"a":"x"#,
        r#"{"a" 1}"#,
        r#"{"a":tru}"#,
        r#"{"a":"\q"}"#,
        "{\"a\":\"x\u{1}y\"}",
        r#"{"a":1} x"#,
        "",
    ] {
        assert!(read(declined).is_none(), "read {declined}");
    }
    // Many keys, one repeated at the end (the hash-set path).
    let mut many: Vec<String> = (0..100).map(|i| format!("\"k{i}\":{i}")).collect();
    many.push("\"k3\":0".into());
    let text = format!("{{{}}}", many.join(","));
    assert!(read(&text).is_none());
    let fixed = text.replace("\"k3\":0", "\"k100\":0");
    assert_eq!(both(&fixed).2, both(&fixed).0);
    // Deeper than it reads: left to serde.
    let deep = format!("{}1{}", "[".repeat(DEPTH + 1), "]".repeat(DEPTH + 1));
    assert!(json::serde_strict(deep.as_bytes()).is_ok());
    assert!(read(&deep).is_none());
    let shallow = format!("{}1{}", "[".repeat(DEPTH), "]".repeat(DEPTH));
    assert!(read(&shallow).is_some());
}

/// On thousands of mutated documents (a snapshot as `kubectl get -o json` prints it), whatever
/// the direct reader reads, serde reads the same, strict and not; whatever serde refuses, it
/// declines.
#[test]
fn agrees_with_serde_on_mutated_documents() {
    let text = crate::value::skim::example();
    let pieces = [
        "\"",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "-0",
        "01",
        "1.",
        "1.25",
        "-",
        "-7",
        "0",
        "null",
        "nul",
        "tru",
        "true",
        "\"k\":",
        "{\"a\":1}",
        " ",
        "\t",
        "\n",
        "\u{1}",
        "é",
        "\\",
        "\\u00e9",
        "\\ud800",
        "\\n",
        "\\\"",
        "1e5",
        "9223372036854775808",
        "-9223372036854775808",
    ];
    let mut rng = crate::value::skim::Rng(0x9e37_79b9_7f4a_7c15);
    let (mut read_, mut declined) = (0, 0);
    for _ in 0..6_000 {
        let t = crate::value::skim::mutant(&text, &pieces, &mut |n| rng.below(n));
        let (strict, lenient, direct) = both(&t);
        match direct {
            Some(d) => {
                read_ += 1;
                assert_eq!(Some(&d), strict.as_ref(), "{t}");
                assert_eq!(Some(&d), lenient.as_ref(), "{t}");
            }
            None => declined += 1,
        }
    }
    assert!(read_ > 500 && declined > 500, "{read_} / {declined}");
}

#[test]
fn lists_and_maps_are_allocated_at_their_size() {
    fn exact(v: &mut Value, at: &str) {
        match v {
            Value::List(items) => {
                assert_eq!(items.capacity(), items.len(), "list at {at}");
                for (i, item) in items.iter_mut().enumerate() {
                    exact(item, &format!("{at}[{i}]"));
                }
            }
            Value::Map(m) => {
                let entries = m.entries_mut();
                assert_eq!(entries.capacity(), entries.len(), "map at {at}");
                for (k, item) in entries.iter_mut() {
                    exact(item, &format!("{at}.{k}"));
                }
            }
            _ => {}
        }
    }
    // The first list and the first map read start at the bottom of their stacks (the case
    // that must not hand over the stack itself), the later ones above other entries.
    for text in [
        r#"{"a":[1,2,3],"b":{"c":[4,5],"d":1},"e":[[6],[7,8,9,10,11]],"f":{"g":{"h":2}}}"#,
        r#"[[1,2],{"a":[3],"b":{}},[],[4,5,6,7,8,9]]"#,
    ] {
        let mut v = read(text).unwrap();
        exact(&mut v, "");
    }
}
