//! The server entries of Codex CLI's `config.toml` (`[mcp_servers.NAME]`), with the spans of
//! their `command` and `args`, read from the document `toml_edit` parses: its values keep
//! their place in the text, so an edit replaces exactly the bytes of one value and the
//! comments, spacing and order of everything else stay.

use super::{ArgList, Entry, Lit, Scope, Section, Transport};
use toml_edit::{Document, Item, Value};

/// The sections of `text` at `keys`; see [`super::sections`]. Codex has no `*` paths.
pub(super) fn sections(text: &str, keys: &[(Scope, Vec<&str>)]) -> Result<Vec<Section>, String> {
    // The error's message without its excerpt of the file: a line of the file can be long.
    let doc = Document::parse(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        format!("not valid TOML at byte {at}: {}", e.message().trim())
    })?;
    let mut out = Vec::new();
    for (scope, path) in keys {
        let mut item: Option<&Item> = Some(doc.as_item());
        for key in path {
            item = item.and_then(Item::as_table_like).and_then(|t| t.get(key));
        }
        let Some(servers) = item.and_then(Item::as_table_like) else {
            continue;
        };
        let entries = servers
            .iter()
            .map(|(name, item)| Entry {
                name: name.to_owned(),
                transport: transport(item).unwrap_or_else(Transport::Unknown),
            })
            .collect();
        out.push(Section {
            scope: scope.clone(),
            entries,
        });
    }
    Ok(out)
}

/// The transport of one `[mcp_servers.NAME]` table, or why it is not understood.
fn transport(item: &Item) -> Result<Transport, String> {
    let table = item.as_table_like().ok_or("not a table")?;
    if let Some(url) = table.get("url") {
        let url = url.as_str().ok_or("`url` is not a string")?;
        let headers = ["http_headers", "env_http_headers", "bearer_token_env_var"]
            .iter()
            .any(|k| table.contains_key(k));
        return Ok(Transport::Remote {
            url: url.to_owned(),
            headers,
        });
    }
    let command = table.get("command").ok_or("neither a command nor a url")?;
    let command = string(command).ok_or("`command` is not a string")?;
    let args = match table.get("args") {
        None => None,
        Some(a) => Some(arg_list(a)?),
    };
    // An added `args` follows the command's value: on a line of its own in a table, after a
    // comma in an inline table. Under dotted keys it would need the whole dotted prefix, so
    // such an entry is wrapped only when it has an `args` already.
    let add_args = match item {
        Item::Table(t) if !t.is_dotted() => ("\nargs = ", ""),
        Item::Value(Value::InlineTable(t)) if !t.is_dotted() => (", args = ", ""),
        _ if args.is_some() => ("", ""),
        _ => return Err("dotted keys without `args`: not rewritten".into()),
    };
    Ok(Transport::Stdio {
        command,
        args,
        add_args,
    })
}

/// A string value with its span.
fn string(item: &Item) -> Option<Lit> {
    let value = item.as_value()?;
    Some(Lit {
        span: value.span()?,
        value: value.as_str()?.to_owned(),
    })
}

/// The `args` array, every element a string.
fn arg_list(item: &Item) -> Result<ArgList, String> {
    let array = item
        .as_value()
        .and_then(Value::as_array)
        .ok_or("`args` is not a list")?;
    let span = array.span().ok_or("`args` has no place in the text")?;
    let mut items = Vec::with_capacity(array.len());
    for v in array.iter() {
        let (Some(span), Some(s)) = (v.span(), v.as_str()) else {
            return Err("`args` holds something other than strings".into());
        };
        items.push(Lit {
            span,
            value: s.to_owned(),
        });
    }
    Ok(ArgList {
        open: span.start + 1,
        items,
        end: span.end,
    })
}
