use super::schemas::MAX_CACHED_SCHEMAS;
use super::*;

/// The result of a line read whole into a value and run by a fresh replayer: what
/// [`Replayer::run_line`] gave before it read a case's schema as text.
fn whole(line: &str) -> String {
    let res = match json::parse(line.as_bytes())
        .map_err(|e| e.to_string())
        .and_then(parse_case)
    {
        Ok(c) => Replayer::new().run_case(&c),
        Err(e) => CaseResult {
            result: StepResult {
                error: format!("bad case JSON: {e}"),
                ..StepResult::default()
            },
            ..CaseResult::default()
        },
    };
    res.to_json(&is_synthetic)
}

const SCHEMA: &str = r#"{"types":[{"name":"t","map":{"fields":[{"name":"apiVersion","type":{"scalar":"string"}},{"name":"kind","type":{"scalar":"string"}},{"name":"a","type":{"scalar":"string"}}]}}]}"#;

const STEPS: &str = r#""steps":[{"op":"apply","manager":"m","config":{"apiVersion":"v1","kind":"T","a":"x"}},{"op":"apply","manager":"n","config":{"apiVersion":"v1","kind":"T","a":"y"}},{"op":"update","manager":"u","object":{"apiVersion":"v1","kind":"T","a":"z"}}]"#;

#[test]
fn a_case_line_gives_what_the_whole_line_read_as_a_value_gives() {
    let spaced = SCHEMA.replace(',', ", ");
    let lines = [
        format!(r#"{{"name":"inline","schema":{SCHEMA},"typeName":"t",{STEPS}}}"#),
        // The same schema in other text, then the first text again.
        format!(r#"{{"name":"spaced","schema":{spaced},"typeName":"t",{STEPS}}}"#),
        format!(r#"{{"name":"inline","schema":{SCHEMA},"typeName":"t",{STEPS}}}"#),
        // A repeated key keeps its last value, the schema's too.
        format!(r#"{{"schema":"nonsense","name":"twice","schema":{SCHEMA},"typeName":"t",{STEPS}}}"#),
        format!(r#"{{"schema":{SCHEMA},"name":"twice","schema":"k8s","typeName":"t",{STEPS}}}"#),
        format!(r#"{{"name":"null","schema":null,"typeName":"t",{STEPS}}}"#),
        format!(r#"{{"name":"none","typeName":"t",{STEPS}}}"#),
        format!(r#"{{"name":"bad schema","schema":{{"types":[{{"name":1}}]}},"typeName":"t",{STEPS}}}"#),
        format!(r#"{{"name":"bad schema","schema":{{"types":[{{"name":1}}]}},"typeName":"t",{STEPS}}}"#),
        format!(r#"{{"name":"unknown key","schema":{SCHEMA},"typo":1,{STEPS}}}"#),
        format!(r#"{{"name":"escaped key","sch\u0065ma":{SCHEMA},"typeName":"t",{STEPS}}}"#),
        r#"{"name":"k8s","schema":"k8s","steps":[{"op":"apply","manager":"m","config":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"1"}}}]}"#.to_string(),
        format!(r#"{{"name":"deep","schema":{}1{},"typeName":"t",{STEPS}}}"#, "[".repeat(200), "]".repeat(200)),
        // At the parser's nesting limit, counted from the line's outer object.
        format!(r#"{{"name":"126","schema":{}1{},"typeName":"t",{STEPS}}}"#, "[".repeat(126), "]".repeat(126)),
        format!(r#"{{"name":"127","schema":{}1{},"typeName":"t",{STEPS}}}"#, "[".repeat(127), "]".repeat(127)),
        format!(r#"{{"name":"128","schema":{}1{},"typeName":"t",{STEPS}}}"#, "[".repeat(128), "]".repeat(128)),
        r#"[1,2]"#.to_string(),
        r#"{"name":"cut","schema":{"types":"#.to_string(),
        "{\"name\":\"control \u{1} character\"}".to_string(),
    ];
    let mut r = Replayer::new();
    for round in 0..2 {
        for line in &lines {
            let ours = r.run_line(line.as_bytes()).to_json(&is_synthetic);
            assert_eq!(ours, whole(line), "round {round}: {line}");
        }
    }
    // Only schemas that loaded are remembered by their text: the inline one, spelled two
    // ways, and "k8s".
    assert_eq!(r.schemas.by_text.len(), 3);
}

#[test]
fn a_line_that_is_not_utf8_is_refused_as_before() {
    let mut line = br#"{"name":""#.to_vec();
    line.extend_from_slice(&[0xff, 0xfe]);
    line.extend_from_slice(br#"","schema":"k8s"}"#);
    let res = Replayer::new().run_line(&line);
    assert!(
        res.result.error.starts_with("bad case JSON"),
        "{}",
        res.result.error
    );
}

#[test]
fn schema_caches_stay_bounded() {
    let mut r = Replayer::new();
    for i in 0..MAX_CACHED_SCHEMAS + 5 {
        // Each text differs (a type no case uses), so each is a new schema.
        let schema = format!(
            r#"{},{{"name":"x{i}","scalar":"string"}}]}}"#,
            &SCHEMA[..SCHEMA.len() - 2]
        );
        let line = format!(r#"{{"name":"n","schema":{schema},"typeName":"t",{STEPS}}}"#);
        let res = r.run_line(line.as_bytes());
        assert!(
            res.result.error.is_empty() || res.result.error.contains("conflict"),
            "{}",
            res.result.error
        );
        assert!(r.schemas.by_text.len() <= MAX_CACHED_SCHEMAS);
        assert!(r.schemas.by_json.len() <= MAX_CACHED_SCHEMAS);
    }
}

#[test]
fn a_result_line_reusing_the_last_steps_text_is_the_line_written_in_full() {
    // Steps with expectations (checks differ between the steps and the case), one failing.
    let line = format!(
        r#"{{"name":"checks","schema":{SCHEMA},"typeName":"t","steps":[{{"op":"apply","manager":"m","config":{{"apiVersion":"v1","kind":"T","a":"x"}},"expect":{{"conflicts":[]}}}},{{"op":"apply","manager":"n","config":{{"apiVersion":"v1","kind":"T","a":"y"}},"expect":{{"conflicts":[]}}}}],"expect":{{"objectChanged":false}}}}"#
    );
    let plain = format!(r#"{{"name":"plain","schema":{SCHEMA},"typeName":"t",{STEPS}}}"#);
    for (line, checked) in [(line, true), (plain, false)] {
        let res = Replayer::new().run_line(line.as_bytes());
        let last = res.steps.last().expect("steps ran");
        assert!(last.prints_as(&res.result), "{line}");
        // The same result with its last step's object and managers no longer shared: each
        // is written in full.
        let mut unshared = res.clone();
        let step = unshared.steps.last_mut().unwrap();
        step.object = step.object.as_deref().map(|o| Arc::new(o.clone()));
        step.managers = Arc::new(step.managers.to_vec());
        assert!(!unshared.steps.last().unwrap().prints_as(&unshared.result));
        let text = res.to_json(&is_synthetic);
        assert_eq!(text, unshared.to_json(&is_synthetic));
        assert_eq!(
            text.matches("\"check\":").count(),
            if checked { 3 } else { 0 },
            "{text}"
        );
        assert_eq!(text.contains("\"passed\":false"), checked, "{text}");
    }
}

#[test]
fn an_object_a_step_validated_is_not_validated_again() {
    let line = format!(
        r#"{{"name":"v","schema":{SCHEMA},"typeName":"t","steps":[{{"op":"update","manager":"u","object":{{"apiVersion":"v1","kind":"T","a":"z"}}}},{{"op":"apply","manager":"m","force":true,"config":{{"apiVersion":"v1","kind":"T","a":"x"}}}},{{"op":"apply","manager":"m","config":{{"apiVersion":"v1","kind":"T"}}}},{{"op":"apply","manager":"m","config":{{"apiVersion":"v1","kind":"T","a":"w"}}}},{{"op":"update","manager":"u","object":{{"apiVersion":"v1","kind":"T","a":1}}}}]}}"#
    );
    let case = parse_case(json::parse(line.as_bytes()).unwrap()).unwrap();
    let mut r = Replayer::new();
    let mut s = r.session(&case).unwrap();
    let validated_as = |s: &Session| s.state.validated_as.clone();
    assert_eq!(validated_as(&s), None);
    // An update validates the object it writes: the next step need not.
    assert_eq!(s.step(&case.steps[0]).unwrap().error, "");
    assert_eq!(validated_as(&s).as_deref(), Some("t"));
    // An apply walked over a valid object that prunes nothing leaves a valid one.
    assert_eq!(s.step(&case.steps[1]).unwrap().error, "");
    assert_eq!(validated_as(&s).as_deref(), Some("t"));
    // An apply that prunes (`a`, which only `m` owned) leaves one to validate again.
    let pruned = s.step(&case.steps[2]).unwrap();
    assert_eq!(pruned.error, "");
    assert_eq!(
        pruned.object.as_deref().and_then(|o| o.get_path(&["a"])),
        None
    );
    assert_eq!(validated_as(&s), None);
    // The next apply validates it first, and leaves a valid one again.
    assert_eq!(s.step(&case.steps[3]).unwrap().error, "");
    assert_eq!(validated_as(&s).as_deref(), Some("t"));
    // A refused update leaves the state (and what is known of it) as it was.
    let refused = s.step(&case.steps[4]).unwrap();
    assert!(refused.error.contains("new object"), "{}", refused.error);
    assert_eq!(validated_as(&s).as_deref(), Some("t"));
    // The same steps replayed with the memory: the same lines as a replay without it.
    assert_eq!(
        r.run_line(line.as_bytes()).to_json(&is_synthetic),
        whole(&line)
    );
}
