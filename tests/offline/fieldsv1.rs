//! FieldsV1 golden fixtures: real documents decode and re-encode to the same bytes.

use fieldguard::fieldpath::Set;
use fieldguard::value::json;

#[test]
fn golden_fieldsv1_round_trips_byte_for_byte() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fieldsv1/golden.jsonl"
    ))
    .unwrap();
    let mut n = 0;
    for line in text.lines() {
        let rec = json::parse_str(line).unwrap();
        let raw = rec.str_at(&["fieldsV1"]).unwrap();
        let source = rec.str_at(&["source"]).unwrap();
        let set = Set::from_fields_v1(raw.as_bytes()).unwrap_or_else(|e| panic!("{source}: {e}"));
        assert!(set.size() > 0, "{source}");
        assert_eq!(set.to_fields_v1(), raw, "{source}");
        // The same through an already-parsed document (as inside an object's managedFields).
        let as_value = json::parse_str(raw).unwrap();
        let again = Set::from_fields_v1_value(&as_value).unwrap();
        assert!(again.equals(&set), "{source}");
        assert_eq!(again.to_fields_v1(), raw, "{source}");
        n += 1;
    }
    assert_eq!(n, 23);
}
