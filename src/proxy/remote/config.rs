//! What `fsbroker proxy --url` connects to and with which headers: the command line's
//! spellings turned into a checked configuration.
//!
//! Secrets never come from the command line, where every user of the machine can read them
//! (`ps`, `/proc/PID/cmdline`) and hosts store them in plain configuration files: a header
//! whose name looks like it carries a credential is refused when given literally, and the
//! URL may not carry a user name or password. Values read from the environment are marked
//! sensitive, so the HTTP stack never prints them, and the proxy logs header names only.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::time::Duration;
use url::Url;

/// Parts of a header name that mark it as a credential when given literally.
const SECRET_PARTS: [&str; 9] = [
    "auth",
    "token",
    "secret",
    "key",
    "password",
    "passwd",
    "credential",
    "cookie",
    "signature",
];

/// Headers the transport sets itself; a user value would break the protocol.
const RESERVED: [&str; 10] = [
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "last-event-id",
    "accept",
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
];

/// The remote endpoint and how to talk to it.
#[derive(Debug, Clone)]
pub(crate) struct RemoteConfig {
    /// The MCP endpoint (Streamable HTTP), or the SSE URL of a server of the 2024-11-05
    /// HTTP+SSE transport.
    pub(crate) url: Url,
    /// Extra headers sent with every request (values from the environment are sensitive).
    pub(crate) headers: HeaderMap,
    /// Limit on connecting (TCP and TLS), and on the answer to a request that needs no work
    /// from the server: a notification, a response, the GET stream, the DELETE.
    pub(crate) connect_timeout: Duration,
    /// Limit on the answer (headers and JSON body) to a POST carrying requests. Event streams
    /// have no overall limit: they carry operations that may wait for the user.
    pub(crate) request_timeout: Duration,
    /// Reconnection attempts after a lost connection before the session is given up.
    pub(crate) retries: u32,
    /// The largest message (a JSON body or an event's data) accepted from the server; the
    /// policy's `limits.max_line_bytes`.
    pub(crate) max_message: usize,
    /// How long in-flight requests may take to finish once the host has gone.
    pub(crate) grace: Duration,
}

/// Why the remote configuration was refused. Messages name headers and variables, never
/// their values.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ConfigError {
    /// `--url` does not parse.
    #[error("--url is not a valid URL: {0}")]
    BadUrl(#[source] url::ParseError),
    /// `--url` is not http or https.
    #[error("--url must be an http or https URL, not {0}:")]
    Scheme(String),
    /// `--url` carries a user name or password.
    #[error(
        "--url must not carry a user name or password: give credentials with --bearer-env or --header-env"
    )]
    Credentials,
    /// A `--header` without `Name: value`.
    #[error("--header expects `Name: value`")]
    HeaderSyntax,
    /// A `--header-env` without `Name=VARIABLE`.
    #[error("--header-env expects `Name=VARIABLE`")]
    EnvSyntax,
    /// A header name that HTTP does not allow.
    #[error("{0:?} is not a valid header name")]
    BadName(String),
    /// A header value that HTTP does not allow (control characters).
    #[error("the value of header {0} is not a valid header value")]
    BadValue(String),
    /// A credential given literally on the command line.
    #[error(
        "header {0} looks like a credential: give its value in an environment variable with --header-env {0}=VARIABLE (or --bearer-env VARIABLE), never on the command line"
    )]
    SecretOnCommandLine(String),
    /// A header the transport sets itself.
    #[error("header {0} is set by the proxy itself")]
    Reserved(String),
    /// The environment variable named for a header is unset or empty.
    #[error("environment variable {var} (for header {header}) is not set or is empty")]
    MissingEnv {
        /// The variable.
        var: String,
        /// The header it was to fill.
        header: String,
    },
    /// A header from the environment would travel unencrypted off this machine.
    #[error(
        "refusing to send header {0} over plain http to a host that is not loopback: use https"
    )]
    Cleartext(String),
}

/// The header options of the command line.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct HeaderArgs<'a> {
    /// `--header 'Name: value'`: plain, non-secret values.
    pub(crate) plain: &'a [String],
    /// `--header-env 'Name=VARIABLE'`: the value is the variable's.
    pub(crate) from_env: &'a [String],
    /// `--bearer-env VARIABLE`: `Authorization: Bearer <value of VARIABLE>`.
    pub(crate) bearer_env: Option<&'a str>,
}

/// Checks `--url`: http or https, no credentials in it.
pub(crate) fn parse_url(raw: &str) -> Result<Url, ConfigError> {
    let url = Url::parse(raw).map_err(ConfigError::BadUrl)?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(ConfigError::Scheme(url.scheme().to_owned()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ConfigError::Credentials);
    }
    Ok(url)
}

/// The extra headers for `url`, with values named by `--header-env` and `--bearer-env` read
/// through `env` (the process environment in the binary).
pub(crate) fn build_headers(
    url: &Url,
    args: HeaderArgs<'_>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<HeaderMap, ConfigError> {
    let mut headers = HeaderMap::new();
    for arg in args.plain {
        let (raw, value) = arg.split_once(':').ok_or(ConfigError::HeaderSyntax)?;
        let name = header_name(raw)?;
        // Errors name the header as the user spelled it.
        let shown = raw.trim().to_owned();
        if looks_secret(name.as_str()) {
            return Err(ConfigError::SecretOnCommandLine(shown));
        }
        let value =
            HeaderValue::from_str(value.trim()).map_err(|_| ConfigError::BadValue(shown))?;
        headers.append(name, value);
    }
    let mut secret = Vec::new();
    for arg in args.from_env {
        let (raw, var) = arg.split_once('=').ok_or(ConfigError::EnvSyntax)?;
        let name = header_name(raw)?;
        secret.push((name, raw.trim().to_owned(), var.trim().to_owned(), ""));
    }
    if let Some(var) = args.bearer_env {
        let name = reqwest::header::AUTHORIZATION;
        secret.push((
            name,
            "Authorization".into(),
            var.trim().to_owned(),
            "Bearer ",
        ));
    }
    for (name, shown, var, prefix) in secret {
        if url.scheme() == "http" && !is_loopback(url) {
            return Err(ConfigError::Cleartext(shown));
        }
        let value =
            env(&var)
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| ConfigError::MissingEnv {
                    var: var.clone(),
                    header: shown.clone(),
                })?;
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", value.trim()))
            .map_err(|_| ConfigError::BadValue(shown))?;
        value.set_sensitive(true);
        headers.append(name, value);
    }
    Ok(headers)
}

fn header_name(raw: &str) -> Result<HeaderName, ConfigError> {
    let name = HeaderName::from_bytes(raw.trim().as_bytes())
        .map_err(|_| ConfigError::BadName(raw.trim().to_owned()))?;
    if RESERVED.contains(&name.as_str()) {
        return Err(ConfigError::Reserved(raw.trim().to_owned()));
    }
    Ok(name)
}

/// Whether a header name suggests a credential (`Authorization`, `X-Api-Key`, `Cookie`...).
pub(crate) fn looks_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_PARTS.iter().any(|p| name.contains(p))
}

/// Whether `url` names this machine: `localhost` or a loopback address.
pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// `url` without its query and fragment, for logs and errors: a query may carry a token.
pub(crate) fn display_url(url: &Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        parse_url(s).unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn credentials_in_the_url_are_refused() {
        assert!(matches!(
            parse_url("https://me:pw@example.com/mcp"),
            Err(ConfigError::Credentials)
        ));
        assert!(matches!(
            parse_url("ftp://example.com/"),
            Err(ConfigError::Scheme(_))
        ));
    }

    #[test]
    fn literal_secrets_are_refused_and_env_secrets_are_sensitive() {
        let u = url("https://example.com/mcp");
        for h in ["Authorization: Bearer x", "X-Api-Key: x", "Cookie: a=b"] {
            let plain = [h.to_owned()];
            let args = HeaderArgs {
                plain: &plain,
                ..HeaderArgs::default()
            };
            assert!(matches!(
                build_headers(&u, args, |_| None),
                Err(ConfigError::SecretOnCommandLine(_))
            ));
        }
        let plain = ["X-Team: blue".to_owned()];
        let from_env = ["X-Api-Key=KEY".to_owned()];
        let args = HeaderArgs {
            plain: &plain,
            from_env: &from_env,
            bearer_env: Some("TOKEN"),
        };
        let h = build_headers(&u, args, |v| Some(format!("value-of-{v}")))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(h["x-team"], "blue");
        assert_eq!(h["x-api-key"], "value-of-KEY");
        assert!(h["x-api-key"].is_sensitive());
        assert_eq!(h["authorization"], "Bearer value-of-TOKEN");
        assert!(h["authorization"].is_sensitive());
    }

    #[test]
    fn missing_env_reserved_names_and_cleartext_are_refused() {
        let u = url("https://example.com/mcp");
        let args = HeaderArgs {
            bearer_env: Some("NOPE"),
            ..HeaderArgs::default()
        };
        assert!(matches!(
            build_headers(&u, args, |_| None),
            Err(ConfigError::MissingEnv { .. })
        ));
        let plain = ["Mcp-Session-Id: x".to_owned()];
        let args = HeaderArgs {
            plain: &plain,
            ..HeaderArgs::default()
        };
        assert!(matches!(
            build_headers(&u, args, |_| None),
            Err(ConfigError::Reserved(_))
        ));
        let args = HeaderArgs {
            bearer_env: Some("T"),
            ..HeaderArgs::default()
        };
        let far = url("http://example.com/mcp");
        assert!(matches!(
            build_headers(&far, args, |_| Some("t".into())),
            Err(ConfigError::Cleartext(_))
        ));
        let near = url("http://127.0.0.1:9/mcp");
        assert!(build_headers(&near, args, |_| Some("t".into())).is_ok());
    }

    #[test]
    fn shown_urls_lose_their_query() {
        let u = url("https://example.com/mcp?key=abc#x");
        assert_eq!(display_url(&u), "https://example.com/mcp");
    }
}
