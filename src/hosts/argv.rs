//! Whether an entry's command line runs `fsbroker proxy`, and how: read from the argument
//! list as `fsbroker proxy` itself parses it (the flags that take a value, `--daemon` and
//! `--sandbox` only with `=`, the server from `--` or the first positional argument on).

/// The flags of `fsbroker proxy` that take a value as the next argument.
const VALUE_FLAGS: &[&str] = &[
    "--policy",
    "--root",
    "--consent",
    "--consent-fallback",
    "--server-id",
    "--audit-file",
    "--url",
    "--header",
    "--header-env",
    "--bearer-env",
    "--era",
    "--connect-timeout",
    "--request-timeout",
    "--retries",
    "--shutdown-grace",
    "--sandbox-allow",
    "--sandbox-limit",
    "--sandbox-net",
];

/// What a `fsbroker proxy` command line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Proxied {
    /// `--sandbox` (or `--sandbox=MODE`), with its mode.
    pub sandbox: Option<String>,
    /// `--daemon` (`Some(None)`) or `--daemon=SOCKET`; `None`: the proxy holds its own broker.
    pub daemon: Option<Option<String>>,
    /// `--url`: a remote server.
    pub url: Option<String>,
    /// The index in the arguments of the server's command, when there is one.
    pub server: Option<usize>,
}

/// Whether `command` is the broker's binary: named `fsbroker`, by any directory.
pub(crate) fn is_broker(command: &str) -> bool {
    std::path::Path::new(command)
        .file_name()
        .is_some_and(|n| n == "fsbroker")
}

/// What `command args` says when it runs `fsbroker proxy`; `None` when it does not.
pub(crate) fn proxied(command: &str, args: &[&str]) -> Option<Proxied> {
    if !is_broker(command) || args.first() != Some(&"proxy") {
        return None;
    }
    let mut p = Proxied {
        sandbox: None,
        daemon: None,
        url: None,
        server: None,
    };
    let mut i = 1;
    while i < args.len() {
        let a = args[i];
        if a == "--" {
            p.server = (i + 1 < args.len()).then_some(i + 1);
            break;
        }
        let Some(flag) = a.strip_prefix("--") else {
            p.server = Some(i);
            break;
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (flag, None),
        };
        let value = if value.is_none() && VALUE_FLAGS.contains(&a) {
            i += 1;
            args.get(i).map(|v| (*v).to_owned())
        } else {
            value
        };
        match name {
            "daemon" => p.daemon = Some(value),
            "sandbox" => p.sandbox = Some(value.unwrap_or_else(|| "strict".into())),
            "url" => p.url = value,
            _ => {}
        }
        i += 1;
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_starts_after_the_separator_or_at_the_first_positional() {
        let p = proxied("/x/fsbroker", &["proxy", "--daemon", "--", "npx", "-y"]).unwrap();
        assert_eq!(p.server, Some(3));
        assert_eq!(p.daemon, Some(None));
        let p = proxied("fsbroker", &["proxy", "--root", "/w", "--sandbox", "uvx"]).unwrap();
        assert_eq!((p.server, p.sandbox.as_deref()), (Some(4), Some("strict")));
        assert_eq!(p.daemon, None);
        let p = proxied("fsbroker", &["proxy", "--daemon=/s", "--url", "https://h/"]).unwrap();
        assert_eq!(p.url.as_deref(), Some("https://h/"));
        assert_eq!(p.daemon, Some(Some("/s".into())));
        assert_eq!(p.server, None);
        assert_eq!(proxied("npx", &["proxy"]), None);
        assert_eq!(proxied("/bin/fsbroker-x", &["proxy"]), None);
    }
}
