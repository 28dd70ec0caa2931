//! A server's input schema cut to the JSON Schema subset every provider tern speaks to
//! takes for a tool's parameters: an object at the top with `properties`, no combinators
//! at the top (OpenAI refuses them there), references to the schema's own definitions put
//! in place (several local servers do not follow them), and no keys that only name the
//! schema (`$schema`, `$id`, `$comment`).

use serde_json::{Map, Value};

/// How deep references are followed, and how many values the schema may grow to with them
/// put in place; past either, a reference becomes `{}` (anything).
const REF_DEPTH: usize = 8;
const MAX_VALUES: usize = 10_000;

pub fn sanitize(schema: &Value) -> Value {
    let Some(root) = schema.as_object() else {
        return empty();
    };
    let defs: Map<String, Value> = ["$defs", "definitions"]
        .iter()
        .filter_map(|key| root.get(*key).and_then(Value::as_object))
        .flat_map(|defs| defs.iter().map(|(k, v)| (k.clone(), v.clone())))
        .collect();
    let mut budget = MAX_VALUES;
    let mut out = match clean(schema, &defs, 0, &mut budget) {
        Value::Object(map) => map,
        _ => return empty(),
    };
    for key in [
        "$defs",
        "definitions",
        "oneOf",
        "anyOf",
        "allOf",
        "not",
        "enum",
        "const",
    ] {
        out.remove(key);
    }
    out.insert("type".to_owned(), Value::String("object".to_owned()));
    if !out.get("properties").is_some_and(Value::is_object) {
        out.insert("properties".to_owned(), Value::Object(Map::new()));
    }
    Value::Object(out)
}

fn empty() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

fn clean(value: &Value, defs: &Map<String, Value>, depth: usize, budget: &mut usize) -> Value {
    if *budget == 0 {
        return Value::Object(Map::new());
    }
    *budget -= 1;
    match value {
        Value::Object(map) => {
            if let Some(target) = map.get("$ref").and_then(Value::as_str) {
                let name = target
                    .strip_prefix("#/$defs/")
                    .or_else(|| target.strip_prefix("#/definitions/"));
                return match name.and_then(|name| defs.get(name)) {
                    Some(found) if depth < REF_DEPTH => clean(found, defs, depth + 1, budget),
                    _ => Value::Object(Map::new()),
                };
            }
            let kept = map
                .iter()
                .filter(|(key, _)| !matches!(key.as_str(), "$schema" | "$id" | "$comment"))
                .map(|(key, value)| (key.clone(), clean(value, defs, depth, budget)))
                .collect();
            Value::Object(kept)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| clean(v, defs, depth, budget))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_top_is_an_object_with_properties() {
        assert_eq!(sanitize(&json!(null)), empty());
        assert_eq!(sanitize(&json!({})), empty());
        let cut = sanitize(
            &json!({"$schema": "x", "anyOf": [{}], "properties": {"a": {"type": "string", "$comment": "c"}}}),
        );
        assert_eq!(
            cut,
            json!({"type": "object", "properties": {"a": {"type": "string"}}})
        );
    }

    #[test]
    fn references_that_multiply_stop_at_a_bounded_size() {
        let refs: Vec<Value> = (0..50).map(|_| json!({"$ref": "#/$defs/D"})).collect();
        let schema = json!({
            "properties": {"x": {"$ref": "#/$defs/D"}},
            "$defs": {"D": {"type": "array", "items": refs}}
        });
        let cut = sanitize(&schema);
        assert!(
            cut.to_string().len() < 1_000_000,
            "{}",
            cut.to_string().len()
        );
    }

    #[test]
    fn local_references_are_put_in_place_and_cycles_end() {
        let schema = json!({
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/Point"}, "n": {"$ref": "#/definitions/Node"}},
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
            "definitions": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"}}}}
        });
        let cut = sanitize(&schema);
        assert_eq!(cut["properties"]["p"]["properties"]["x"]["type"], "number");
        assert!(cut.get("$defs").is_none() && cut.get("definitions").is_none());
        let mut node = &cut["properties"]["n"];
        let mut depth = 0;
        while let Some(next) = node.get("properties").and_then(|p| p.get("next")) {
            node = next;
            depth += 1;
        }
        assert!(depth <= REF_DEPTH + 1, "{depth}");
    }
}
