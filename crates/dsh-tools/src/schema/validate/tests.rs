//! Tests of the validator: the fast pass and the value conversions agree with the diagnostic
//! pass, and each rule reports every violation with its pointer and wording.

use super::*;
use proptest::prelude::*;
use serde_json::{Value, json};

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 4_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_fast_pass_agrees_with_the_diagnostic_pass((schema, value) in strategies::pairs()) {
        let value = JsonValue::from(value);
        let mut violations = Vec::new();
        check(&schema, &value, "", &mut violations);
        prop_assert_eq!(
            is_valid(&schema, &value),
            violations.is_empty(),
            "schema {} value {} violations {:?}",
            schema.to_json(),
            value,
            violations
        );
    }

    #[test]
    fn a_value_is_judged_as_its_exact_conversion((schema, value) in strategies::pairs()) {
        // Tools' outputs are validated as `serde_json::Value`s without converting them; the
        // verdict and the violations must be those of the converted value.
        let exact = JsonValue::from(&value);
        prop_assert_eq!(
            is_valid(&schema, &value),
            is_valid(&schema, &exact),
            "schema {} value {}",
            schema.to_json(),
            value
        );
        prop_assert_eq!(validate_value(&schema, &value), validate(&schema, &exact));
        // Callers that need only the verdict (the concurrency classifier, the soft reading of
        // a typed tool's arguments) get the same one.
        prop_assert_eq!(
            accepts_value(&schema, &value),
            validate_value(&schema, &value).is_ok(),
            "schema {} value {}",
            schema.to_json(),
            value
        );
    }
}

#[test]
fn floats_are_judged_as_the_numbers_they_convert_to() {
    let integer = ValueSchema::integer();
    for (value, valid) in [
        (json!(1.0), true),
        (json!(1e20), true),
        (json!(-0.0), true),
        (json!(0.5), false),
        (json!(u64::MAX), true),
        (json!(i64::MIN), true),
    ] {
        assert_eq!(
            validate_value(&integer, &value).is_ok(),
            valid,
            "{value} as an integer"
        );
    }
    let three = ValueSchema::number().allowed([3]);
    assert_eq!(validate_value(&three, &json!(3.0)), Ok(()));
    assert_eq!(
        validate_value(&three, &json!(3.5)),
        validate(&three, &JsonValue::from(&json!(3.5)))
    );
    assert!(validate_value(&three, &json!(3.5)).is_err());
}

fn violations(schema: &ValueSchema, value: serde_json::Value) -> Vec<String> {
    match validate(schema, &JsonValue::from(value)) {
        Ok(()) => Vec::new(),
        Err(list) => list.into_iter().map(|v| v.to_string()).collect(),
    }
}

#[test]
fn reports_every_violation_with_its_pointer() {
    let schema = ValueSchema::closed_object()
        .required("path", ValueSchema::string())
        .required("items", ValueSchema::array(ValueSchema::integer()))
        .property("mode", ValueSchema::string().allowed(["fast", "slow"]));
    assert_eq!(
        // Parsed exactly: violations come in the order the value's keys were sent.
        validate(
            &schema,
            &JsonValue::parse(r#"{"items": [1, 2.5, "x"], "mode": "medium", "extra": true}"#)
                .unwrap()
        )
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>(),
        vec![
            "/path: required property is missing",
            "/items/1: expected a whole number, got 2.5",
            "/items/2: expected integer, got string",
            "/mode: expected one of \"fast\", \"slow\", got \"medium\"",
            "/extra: unknown property (this object accepts only its declared properties)",
        ]
    );
}

/// A withheld key is refused with its own reason, is not part of the schema the model
/// receives, and applies only where a closed object would refuse the key anyway.
#[test]
fn a_withheld_property_is_refused_with_its_reason_and_never_sent() {
    let offered = ValueSchema::closed_object().required("command", ValueSchema::string());
    let schema = offered.clone().withhold(
        "background",
        "background jobs are off here; run it in the foreground",
    );
    assert_eq!(
        violations(
            &schema,
            json!({"command": "ls", "background": true, "other": 1})
        ),
        vec![
            "/background: background jobs are off here; run it in the foreground",
            "/other: unknown property (this object accepts only its declared properties)",
        ]
    );
    assert!(!is_valid(
        &schema,
        &json!({"command": "ls", "background": false})
    ));
    assert_eq!(schema.to_json(), offered.to_json());
    assert_eq!(schema.to_strict_json(), offered.to_strict_json());
    // A declared property of the same name is validated as declared.
    let declared = schema.property("background", ValueSchema::boolean());
    assert_eq!(
        violations(&declared, json!({"command": "ls", "background": true})),
        Vec::<String>::new()
    );
    // On an open object there is nothing to refuse: the misuse is reported.
    let open = ValueSchema::open_object().withhold("background", "why");
    assert_eq!(
        open.check().unwrap_err().to_string(),
        "schema is outside the supported subset: (root): `withhold` applies only to closed object nodes"
    );
}

/// A number with a fraction where an integer is due is refused in words that say what is
/// wrong with it, with the number as sent (when it is short); other values keep the type
/// mismatch wording.
#[test]
fn a_fraction_for_an_integer_is_refused_as_not_a_whole_number() {
    let long = format!("0.{}1", "0".repeat(40));
    let texts = [
        "1000.5",
        "-0.25",
        "1e-1",
        "18446744073709551616.5",
        long.as_str(),
        "\"5\"",
        "true",
    ];
    let int = ValueSchema::integer();
    let refused = |text: &str| match validate(&int, &JsonValue::parse(text).unwrap()) {
        Ok(()) => Vec::new(),
        Err(list) => list.iter().map(ToString::to_string).collect(),
    };
    assert_eq!(
        texts.map(refused),
        [
            "(root): expected a whole number, got 1000.5",
            "(root): expected a whole number, got -0.25",
            "(root): expected a whole number, got 1e-1",
            "(root): expected a whole number, got 18446744073709551616.5",
            "(root): expected a whole number, got number",
            "(root): expected integer, got string",
            "(root): expected integer, got boolean",
        ]
        .map(|message| vec![message.to_owned()])
    );
}

#[test]
fn numbers_are_checked_losslessly() {
    let parse = |text: &str| JsonValue::parse(text).unwrap();
    let int = ValueSchema::integer();
    for text in ["18446744073709551617", "1.0", "-0", "1e2", "1e400"] {
        assert!(validate(&int, &parse(text)).is_ok(), "{text}");
    }
    for text in ["0.1", "0.10", "1e-400", "18446744073709551616.5"] {
        assert!(validate(&int, &parse(text)).is_err(), "{text}");
    }
    let one = ValueSchema::number().constant(json!(1));
    assert!(validate(&one, &parse("1.0")).is_ok());
    // `const` and `enum` compare exact values: 2^64+1 is not 2^64, 0.10 is 0.1.
    let exact = ValueSchema::from_exact_json(&parse(
        r#"{"type": "number", "enum": [18446744073709551617, 0.10, 1e400]}"#,
    ))
    .unwrap();
    for text in [
        "18446744073709551617",
        "1.8446744073709551617e19",
        "0.1",
        "10e399",
    ] {
        assert!(validate(&exact, &parse(text)).is_ok(), "{text}");
    }
    for text in [
        "18446744073709551616",
        "18446744073709551618",
        "0.11",
        "1e401",
    ] {
        assert!(validate(&exact, &parse(text)).is_err(), "{text}");
    }
}

#[test]
fn one_of_requires_exactly_one_match() {
    let schema = ValueSchema::one_of([ValueSchema::number(), ValueSchema::integer()]);
    assert_eq!(
        violations(&schema, json!(1)),
        vec!["(root): value matches 2 alternatives (#0, #1); exactly one must match"]
    );
    assert!(violations(&schema, json!(1.5)).is_empty());
    assert_eq!(
        violations(&schema, json!("x")),
        vec!["(root): expected number or integer, got string \"x\""]
    );
    let nullable = ValueSchema::nullable(ValueSchema::integer());
    assert_eq!(
        violations(&nullable, json!("5")),
        vec!["(root): expected integer or null, got string \"5\""]
    );
}

/// The tagged shapes the `oneOf` message table aims values at.
fn shape() -> ValueSchema {
    ValueSchema::one_of([
        ValueSchema::closed_object()
            .required("kind", ValueSchema::string().constant("circle"))
            .required("r", ValueSchema::number()),
        ValueSchema::closed_object()
            .required("kind", ValueSchema::string().constant("square"))
            .required("side", ValueSchema::integer()),
    ])
}

/// A `oneOf` whose branches always both match, so it refuses every value while any value
/// aims at it.
fn ambiguous_any() -> ValueSchema {
    ValueSchema::one_of([ValueSchema::json(), ValueSchema::json()])
}

#[test]
fn one_of_mismatches_are_worded_after_the_branch_the_value_aimed_at() {
    // (what the case shows, schema, value, the violations as displayed)
    let long = "x".repeat(38);
    let longer = "x".repeat(39);
    let cases: Vec<(&str, ValueSchema, Value, Vec<String>)> = vec![
        (
            "a tagged object aims at the branch of its tag",
            shape(),
            json!({"kind": "square", "side": "big"}),
            vec!["/side: expected integer, got string".into()],
        ),
        (
            "an unknown tag aims at no branch",
            shape(),
            json!({"kind": "hexagon", "side": 1}),
            vec![
                "(root): expected an object with kind \"circle\" or an object with kind \"square\", got object"
                    .into(),
            ],
        ),
        (
            "a missing tag aims at no branch",
            shape(),
            json!({"side": 1}),
            vec![
                "(root): expected an object with kind \"circle\" or an object with kind \"square\", got object"
                    .into(),
            ],
        ),
        (
            "a value of another type is described with its text",
            shape(),
            json!(5),
            vec![
                "(root): expected an object with kind \"circle\" or an object with kind \"square\", got integer 5"
                    .into(),
            ],
        ),
        (
            "a value whose tags all agree aims at the branch",
            ValueSchema::one_of([
                ValueSchema::closed_object()
                    .required("kind", ValueSchema::string().constant("a"))
                    .required("version", ValueSchema::integer().constant(2)),
                ValueSchema::string(),
            ]),
            json!({"kind": "a", "version": 2, "x": 1}),
            vec!["/x: unknown property (this object accepts only its declared properties)".into()],
        ),
        (
            "one disagreeing tag of two aims at no branch",
            ValueSchema::one_of([
                ValueSchema::closed_object()
                    .required("kind", ValueSchema::string().constant("a"))
                    .required("version", ValueSchema::integer().constant(2)),
                ValueSchema::string(),
            ]),
            json!({"kind": "a", "version": 3}),
            vec![
                "(root): expected an object with kind \"a\" and version 2 or string, got object"
                    .into(),
            ],
        ),
        (
            "a branch with two tags is described with both",
            ValueSchema::one_of([
                ValueSchema::closed_object()
                    .required("kind", ValueSchema::string().constant("a"))
                    .required("version", ValueSchema::integer().constant(2)),
                ValueSchema::string(),
            ]),
            json!(false),
            vec![
                "(root): expected an object with kind \"a\" and version 2 or string, got boolean false"
                    .into(),
            ],
        ),
        (
            "a fractional number aims at an integer branch",
            ValueSchema::one_of([
                ValueSchema::integer(),
                ValueSchema::string().constant("auto"),
            ]),
            json!(1.5),
            vec!["(root): expected a whole number, got 1.5".into()],
        ),
        (
            "a string aims at the string constant",
            ValueSchema::one_of([
                ValueSchema::integer(),
                ValueSchema::string().constant("auto"),
            ]),
            json!("manual"),
            vec!["(root): expected \"auto\", got \"manual\"".into()],
        ),
        (
            "a value of no branch's type lists them all",
            ValueSchema::one_of([
                ValueSchema::integer(),
                ValueSchema::string().constant("auto"),
            ]),
            json!(true),
            vec!["(root): expected integer or \"auto\", got boolean true".into()],
        ),
        (
            "a string aims at the enumeration",
            ValueSchema::one_of([
                ValueSchema::string().allowed(["fast", "slow"]),
                ValueSchema::integer(),
            ]),
            json!("medium"),
            vec!["(root): expected one of \"fast\", \"slow\", got \"medium\"".into()],
        ),
        (
            "an enumeration is described by its values",
            ValueSchema::one_of([
                ValueSchema::string().allowed(["fast", "slow"]),
                ValueSchema::integer(),
            ]),
            Value::Null,
            vec!["(root): expected \"fast\" or \"slow\" or integer, got null".into()],
        ),
        (
            "an array aims at the array branch",
            ValueSchema::one_of([
                ValueSchema::array(ValueSchema::integer()),
                ValueSchema::string(),
            ]),
            json!([1, "x"]),
            vec!["/1: expected integer, got string".into()],
        ),
        (
            "an object aims at no array branch and is described by its type alone",
            ValueSchema::one_of([
                ValueSchema::array(ValueSchema::integer()),
                ValueSchema::string(),
            ]),
            json!({"a": 1}),
            vec!["(root): expected an array or string, got object".into()],
        ),
        (
            "an array value is described by its type alone",
            ValueSchema::one_of([ValueSchema::integer(), ValueSchema::string()]),
            json!([1]),
            vec!["(root): expected integer or string, got array".into()],
        ),
        (
            "an untagged object with only known keys aims at its branch",
            ValueSchema::one_of([
                ValueSchema::closed_object().required("name", ValueSchema::string()),
                ValueSchema::integer(),
            ]),
            json!({"name": 5}),
            vec!["/name: expected string, got integer".into()],
        ),
        (
            "an untagged object with an unknown key aims at no branch",
            ValueSchema::one_of([
                ValueSchema::closed_object().required("name", ValueSchema::string()),
                ValueSchema::integer(),
            ]),
            json!({"other": 1}),
            vec!["(root): expected an object or integer, got object".into()],
        ),
        (
            "two branches aimed at are both listed",
            ValueSchema::one_of([
                ValueSchema::closed_object().required("a", ValueSchema::string()),
                ValueSchema::closed_object().required("a", ValueSchema::integer()),
            ]),
            json!({"a": true}),
            vec!["(root): expected an object or an object, got object".into()],
        ),
        (
            "three branches are listed with commas",
            ValueSchema::one_of([
                ValueSchema::integer(),
                ValueSchema::boolean(),
                ValueSchema::null(),
            ]),
            json!("x"),
            vec!["(root): expected integer, boolean or null, got string \"x\"".into()],
        ),
        (
            "a single branch is described alone",
            ValueSchema::one_of([ValueSchema::integer()]),
            json!("x"),
            vec!["(root): expected integer, got string \"x\"".into()],
        ),
        (
            "a value of 40 characters is quoted",
            ValueSchema::one_of([ValueSchema::integer(), ValueSchema::boolean()]),
            json!(long),
            vec![format!("(root): expected integer or boolean, got string \"{long}\"")],
        ),
        (
            "a value of 41 characters is not",
            ValueSchema::one_of([ValueSchema::integer(), ValueSchema::boolean()]),
            json!(longer),
            vec!["(root): expected integer or boolean, got string".into()],
        ),
        (
            "a nested oneOf aims through its branches",
            ValueSchema::one_of([ambiguous_any(), ValueSchema::integer()]),
            json!("x"),
            vec!["(root): value matches 2 alternatives (#0, #1); exactly one must match".into()],
        ),
        (
            "a nested oneOf is described by its alternatives",
            ValueSchema::one_of([ambiguous_any(), ambiguous_any()]),
            json!("x"),
            vec![
                "(root): expected any value or any value or any value or any value, got string \"x\""
                    .into(),
            ],
        ),
        (
            "three matches are all numbered",
            ValueSchema::one_of([
                ValueSchema::number(),
                ValueSchema::integer(),
                ValueSchema::json(),
            ]),
            json!(1),
            vec!["(root): value matches 3 alternatives (#0, #1, #2); exactly one must match".into()],
        ),
        (
            "a mismatch inside an object names the property",
            ValueSchema::closed_object().required("shape", shape()),
            json!({"shape": {"kind": "circle", "r": "big"}}),
            vec!["/shape/r: expected number, got string".into()],
        ),
        (
            "an unaimed mismatch inside an object names the property",
            ValueSchema::closed_object().required("shape", shape()),
            json!({"shape": []}),
            vec![
                "/shape: expected an object with kind \"circle\" or an object with kind \"square\", got array"
                    .into(),
            ],
        ),
    ];
    for (what, schema, value, expected) in cases {
        pretty_assertions::assert_eq!(violations(&schema, value), expected, "{what}");
    }
}

#[test]
fn tagged_alternatives_point_into_the_aimed_branch() {
    let shape = ValueSchema::one_of([
        ValueSchema::closed_object()
            .required("kind", ValueSchema::string().constant("circle"))
            .required("r", ValueSchema::number()),
        ValueSchema::closed_object()
            .required("kind", ValueSchema::string().constant("square"))
            .required("side", ValueSchema::integer()),
    ]);
    assert_eq!(
        violations(&shape, json!({"kind": "square", "side": "big"})),
        vec!["/side: expected integer, got string"]
    );
}
