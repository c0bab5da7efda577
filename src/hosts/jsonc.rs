//! The server entries of a JSON (or JSONC) configuration, with the spans of their `command`
//! and `args`, read from the parser's syntax tree: its ranges are byte offsets into the text,
//! so an edit replaces exactly the bytes of one value. The parser bounds nesting (512), and
//! only the fixed key path of a host is walked.

use super::{ArgList, Entry, Lit, Scope, Section, Transport};
use jsonc_parser::ast::{Object, ObjectProp, Value};
use jsonc_parser::{CollectOptions, ParseOptions, parse_to_ast};

/// The sections of `text` at `keys`; see [`super::sections`].
pub(super) fn sections(text: &str, keys: &[(Scope, Vec<&str>)]) -> Result<Vec<Section>, String> {
    let parsed = parse_to_ast(text, &CollectOptions::default(), &ParseOptions::default())
        .map_err(|e| format!("not valid JSON: {e}"))?;
    let Some(Value::Object(root)) = parsed.value else {
        return Err("not a JSON object".into());
    };
    let mut out = Vec::new();
    for (scope, path) in keys {
        // The objects reached so far, each with the scope it stands for.
        let mut reached: Vec<(Scope, &Object)> = vec![(scope.clone(), &root)];
        for key in path {
            let mut next = Vec::new();
            for (scope, object) in reached {
                for prop in &object.properties {
                    let Value::Object(inner) = &prop.value else {
                        continue;
                    };
                    if *key == "*" {
                        next.push((Scope::Local(prop.name.as_str().to_owned()), inner));
                    } else if prop.name.as_str() == *key {
                        next.push((scope.clone(), inner));
                    }
                }
            }
            reached = next;
        }
        for (scope, servers) in reached {
            let entries = servers.properties.iter().map(|p| entry(text, p)).collect();
            out.push(Section { scope, entries });
        }
    }
    Ok(out)
}

/// One entry: its transport, or why it is not understood.
fn entry(text: &str, prop: &ObjectProp) -> Entry {
    let name = prop.name.as_str().to_owned();
    let transport = match &prop.value {
        Value::Object(o) => transport(text, o),
        _ => Transport::Unknown("not an object".into()),
    };
    Entry { name, transport }
}

/// The one property called `key`; an error when it is given more than once (which value a
/// host takes then is not ours to guess).
fn member<'a, 'b>(o: &'b Object<'a>, key: &str) -> Result<Option<&'b ObjectProp<'a>>, String> {
    let mut found = o.properties.iter().filter(|p| p.name.as_str() == key);
    let first = found.next();
    if found.next().is_some() {
        return Err(format!("`{key}` is given twice"));
    }
    Ok(first)
}

/// The transport an entry's members describe.
fn transport(text: &str, o: &Object) -> Transport {
    match try_transport(text, o) {
        Ok(t) => t,
        Err(why) => Transport::Unknown(why),
    }
}

fn try_transport(text: &str, o: &Object) -> Result<Transport, String> {
    for key in ["url", "serverUrl", "httpUrl"] {
        if let Some(p) = member(o, key)? {
            let Value::StringLit(url) = &p.value else {
                return Err(format!("`{key}` is not a string"));
            };
            return Ok(Transport::Remote {
                url: url.value.to_string(),
                headers: member(o, "headers")?.is_some(),
            });
        }
    }
    if let Some(p) = member(o, "type")?
        && let Value::StringLit(t) = &p.value
        && !matches!(t.value.as_ref(), "stdio" | "local")
    {
        return Err(format!("of type {:?} without a url", t.value));
    }
    let Some(command) = member(o, "command")? else {
        return Err("neither a command nor a url".into());
    };
    let Value::StringLit(command) = &command.value else {
        return Err("`command` is not a string".into());
    };
    let command = lit(command.range.start, command.range.end, &command.value);
    let args = match member(o, "args")? {
        None => None,
        Some(p) => Some(arg_list(text, &p.value)?),
    };
    Ok(Transport::Stdio {
        command,
        args,
        add_args: (", \"args\": ", ""),
    })
}

/// The `args` array, every element a string.
fn arg_list(text: &str, value: &Value) -> Result<ArgList, String> {
    let Value::Array(array) = value else {
        return Err("`args` is not a list".into());
    };
    let mut items = Vec::with_capacity(array.elements.len());
    for e in &array.elements {
        let Value::StringLit(s) = e else {
            return Err("`args` holds something other than strings".into());
        };
        items.push(lit(s.range.start, s.range.end, &s.value));
    }
    let (start, end) = (array.range.start, array.range.end);
    if text.as_bytes().get(start) != Some(&b'[') {
        return Err("`args` does not start with a bracket".into());
    }
    Ok(ArgList {
        open: start + 1,
        items,
        end,
    })
}

fn lit(start: usize, end: usize, value: &str) -> Lit {
    Lit {
        span: start..end,
        value: value.to_owned(),
    }
}
