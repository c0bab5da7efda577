//! The `x-mcp-header` declarations of a tool's `inputSchema`: where they may stand, what
//! they may name, and the bounds on the walk that finds them (the schema is the server's).

use reqwest::header::HeaderName;
use serde_json::{Map, Value};
use std::collections::HashSet;

/// Declarations one tool may carry at most.
pub(super) const MAX_DECLS: usize = 16;

/// Schema nodes looked at per tool at most: a larger schema is not checked, and its tool is
/// removed from the list.
pub(super) const MAX_NODES: usize = 4096;

/// `properties` steps in a declared path at most.
const MAX_DEPTH: usize = 16;

/// Bytes of a header name (after `Mcp-Param-`) or of a declared path's property names
/// together, at most.
const MAX_NAME: usize = 256;

/// Schema keywords whose subschemas are not statically reachable: an annotation found under
/// one of them makes the tool invalid (the same list as the TypeScript SDK's checker).
const UNREACHABLE: [&str; 18] = [
    "items",
    "prefixItems",
    "contains",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "patternProperties",
    "dependentSchemas",
    "oneOf",
    "anyOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "$defs",
    "definitions",
];

/// Those of [`UNREACHABLE`] whose value maps names to subschemas.
const NAMED_SUBSCHEMAS: [&str; 4] = [
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];

/// One `x-mcp-header` declaration: the header to send and where its value is in the call's
/// `arguments`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Decl {
    /// The header, `Mcp-Param-` and the declared name.
    pub(super) header: HeaderName,
    /// The property names from `arguments` down to the value.
    pub(super) path: Vec<String>,
}

/// Whether `b` is an RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Where a schema node stands: on a chain of `properties` keys from the root (with the
/// property names of the chain), or not.
enum Reach<'a> {
    Path(Vec<&'a str>),
    /// On such a chain, but deeper than [`MAX_DEPTH`].
    Deep,
    Not,
}

/// Text a server chose, for a reason that is logged and may reach the host: escaped (no
/// control characters reach the log) and cut to 64 characters.
pub(super) fn shown(text: &str) -> String {
    let cut: String = text.chars().take(64).collect();
    let more = if cut.len() < text.len() { "..." } else { "" };
    format!("{cut:?}{more}")
}

/// The declarations of a tool's `inputSchema`, or why the tool is invalid. Walks the schema
/// without recursion (a stack of nodes, at most [`MAX_NODES`] looked at) through
/// `properties` and every keyword of [`UNREACHABLE`]; an annotation that is not on a
/// property reached through `properties` alone, that is not a non-empty token, that sits on
/// a property whose `type` is not `string`, `integer` or `boolean`, or that repeats another
/// (ignoring case), makes the tool invalid.
pub(super) fn scan(schema: &Value) -> Result<Vec<Decl>, String> {
    let mut decls: Vec<Decl> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut stack: Vec<(&Value, Reach<'_>)> = vec![(schema, Reach::Path(Vec::new()))];
    let mut looked = 0usize;
    while let Some((node, reach)) = stack.pop() {
        looked += 1;
        if looked > MAX_NODES {
            return Err(format!(
                "the input schema has more than {MAX_NODES} nodes to check for x-mcp-header"
            ));
        }
        let Some(obj) = node.as_object() else {
            continue;
        };
        if let Some(raw) = obj.get("x-mcp-header") {
            let decl = declaration(obj, raw, &reach, &mut seen, decls.len())?;
            decls.push(decl);
        }
        push_children(obj, &reach, &mut stack);
    }
    Ok(decls)
}

/// The declaration `raw` on the schema node `obj` standing at `reach`, or why the tool is
/// invalid; `seen` holds the lowercase names of the `declared` declarations so far, this
/// one's added.
fn declaration(
    obj: &Map<String, Value>,
    raw: &Value,
    reach: &Reach<'_>,
    seen: &mut HashSet<String>,
    declared: usize,
) -> Result<Decl, String> {
    let path = match reach {
        Reach::Path(p) if !p.is_empty() => p,
        Reach::Deep => {
            return Err(format!(
                "x-mcp-header on a property deeper than {MAX_DEPTH} levels, more than the proxy keeps"
            ));
        }
        _ => {
            return Err("x-mcp-header is only permitted on properties reached through a chain of `properties` keys (not the root, items, additionalProperties, oneOf/anyOf/allOf/not, if/then/else or $defs)".into());
        }
    };
    let joined = path.join(".");
    let at = shown(&joined);
    let Some(raw) = raw.as_str().filter(|s| !s.is_empty()) else {
        return Err(format!("{at}: x-mcp-header must be a non-empty string"));
    };
    if !raw.bytes().all(is_tchar) {
        return Err(format!(
            "{at}: x-mcp-header {} is not an RFC 9110 token",
            shown(raw)
        ));
    }
    if raw.len() > MAX_NAME || joined.len() > MAX_NAME {
        return Err(format!(
            "{at}: the x-mcp-header name or its path is longer than the {MAX_NAME} bytes the proxy keeps"
        ));
    }
    let ty = obj.get("type").and_then(Value::as_str);
    if !matches!(ty, Some("string" | "integer" | "boolean")) {
        return Err(format!(
            "{at}: x-mcp-header is only permitted on properties of type string, integer or boolean; got {}",
            ty.map_or_else(|| "<none>".to_owned(), shown)
        ));
    }
    let lower = raw.to_ascii_lowercase();
    if !seen.insert(lower.clone()) {
        return Err(format!(
            "x-mcp-header {} is not unique (ignoring case)",
            shown(raw)
        ));
    }
    if declared >= MAX_DECLS {
        return Err(format!("more than {MAX_DECLS} x-mcp-header declarations"));
    }
    let header = HeaderName::from_bytes(format!("mcp-param-{lower}").as_bytes())
        .map_err(|_| format!("{at}: x-mcp-header {} cannot be a header name", shown(raw)))?;
    Ok(Decl {
        header,
        path: path.iter().map(|s| (*s).to_owned()).collect(),
    })
}

/// Pushes the subschemas of `obj` (at `reach`) onto the walk's `stack`: its `properties`,
/// which extend the chain, and those under every keyword of [`UNREACHABLE`], which are off it.
fn push_children<'a>(
    obj: &'a Map<String, Value>,
    reach: &Reach<'a>,
    stack: &mut Vec<(&'a Value, Reach<'a>)>,
) {
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (k, child) in props {
            let next = match reach {
                Reach::Path(p) if p.len() < MAX_DEPTH => {
                    let mut q = p.clone();
                    q.push(k.as_str());
                    Reach::Path(q)
                }
                // Deeper than the proxy keeps: an annotation there is refused.
                Reach::Path(_) | Reach::Deep => Reach::Deep,
                Reach::Not => Reach::Not,
            };
            stack.push((child, next));
        }
    }
    for kw in UNREACHABLE {
        match obj.get(kw) {
            None => {}
            Some(Value::Array(a)) => stack.extend(a.iter().map(|b| (b, Reach::Not))),
            Some(Value::Object(o)) if NAMED_SUBSCHEMAS.contains(&kw) => {
                stack.extend(o.values().map(|b| (b, Reach::Not)));
            }
            Some(sub) => stack.push((sub, Reach::Not)),
        }
    }
}
