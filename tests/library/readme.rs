//! What the README promises a new user, checked against the repository: the Methods table is
//! one table naming every method docs/protocol.md documents, with the same result keys, the
//! install step comes before the first host configuration that runs `fsbroker`, and every
//! host configuration it shows runs (this one runs the binary).

use std::collections::BTreeMap;

fn text(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The `## NAME` section of a Markdown text, up to the next `## `.
fn section<'a>(text: &'a str, name: &str) -> &'a str {
    text.split("\n## ")
        .find(|s| s.starts_with(&format!("{name}\n")))
        .unwrap_or_else(|| panic!("no \"## {name}\" section"))
}

/// The sorted keys of the first `{...}` of a Markdown cell, nested objects left out.
fn keys(cell: &str) -> Vec<String> {
    let inner = cell
        .split_once('{')
        .map(|(_, r)| r)
        .unwrap_or_else(|| panic!("no result object in {cell:?}"));
    let mut depth = 0usize;
    let mut key = String::new();
    let mut out = Vec::new();
    for c in inner.chars() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' if depth == 0 => break,
            '}' | ']' => depth -= 1,
            ',' if depth == 0 => out.push(std::mem::take(&mut key)),
            _ if depth == 0 => key.push(c),
            _ => {}
        }
    }
    out.push(key);
    let mut out: Vec<String> = out
        .iter()
        .map(|k| {
            let k = k.split(':').next().unwrap_or("");
            k.trim().trim_end_matches('?').trim_matches('`').to_owned()
        })
        .filter(|k| !k.is_empty())
        .collect();
    out.sort();
    out
}

#[test]
fn the_methods_table_is_one_table_of_every_documented_method() {
    let readme = text("README.md");
    let methods = section(&readme, "Methods");
    // The table: the first run of lines starting with `|`, with nothing between them.
    let lines: Vec<&str> = methods
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    let mut table = BTreeMap::new();
    for row in lines.iter().skip(2) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_owned();
        table.insert(name, keys(cells[3]));
    }
    // The documented methods: the bullets `- **`name`** `{params}` → `{result}`` of
    // docs/protocol.md's Methods section.
    let protocol = text("docs/protocol.md");
    let mut documented = BTreeMap::new();
    for bullet in section(&protocol, "Methods").split("\n- **`").skip(1) {
        let (name, rest) = bullet.split_once("`**").unwrap();
        let result = rest.split_once('→').unwrap().1;
        let result = result.replace('\n', " ");
        let span = result.split('`').nth(1).unwrap();
        documented.insert(name.to_owned(), keys(span));
    }
    assert_eq!(
        table.keys().collect::<Vec<_>>(),
        documented.keys().collect::<Vec<_>>(),
        "the README's Methods table (one table) names every documented method"
    );
    for (name, result) in &documented {
        // The README shows the keys a user meets; `final` (a non-final chunk only) is left to
        // docs/protocol.md.
        let shown: Vec<&String> = result.iter().filter(|k| *k != "final").collect();
        assert_eq!(
            table[name].iter().collect::<Vec<_>>(),
            shown,
            "{name}: README and docs/protocol.md disagree on the result"
        );
    }
}

#[test]
fn the_install_step_comes_before_the_host_configurations() {
    let readme = text("README.md");
    let install = readme
        .find("cargo install --path .")
        .expect("the README says how to install");
    assert!(readme.contains("~/.cargo/bin/fsbroker"), "where it lands");
    let first_host = readme
        .find("\"command\": \"fsbroker\"")
        .expect("a host configuration");
    assert!(install < first_host, "install after the host snippets");
    assert!(readme.contains("fsbroker check-policy FILE..."));
}

#[test]
fn readme_and_security_say_the_proxy_confines_only_files_requests() {
    let readme = text("README.md");
    let proxy = section(&readme, "Usage");
    let security = text("SECURITY.md");
    for (name, doc) in [
        ("README (proxy)", proxy),
        ("SECURITY.md", security.as_str()),
    ] {
        let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("apply only to `files/*`")
                || flat.contains("apply only to what a server asks for with `files/*` requests"),
            "{name} says what the proxy confines"
        );
        assert!(
            flat.contains("`--sandbox`") && flat.contains("Landlock"),
            "{name} names the sandbox that confines the rest"
        );
    }
}

/// Every `npx -y PACKAGE` the README shows names a package its owner publishes (the official
/// MCP servers), never a placeholder name: anyone could publish a placeholder, and every
/// copied snippet would run their code.
#[test]
fn the_readme_runs_no_package_a_stranger_could_publish() {
    let readme = text("README.md");
    let flat = readme.replace(['"', ','], " ");
    let mut seen = 0;
    let mut words = flat.split_whitespace().peekable();
    while let Some(w) = words.next() {
        if w == "npx" && words.peek() == Some(&"-y") {
            words.next();
            let package = words.next().unwrap_or_default();
            seen += 1;
            assert!(
                package.starts_with("@modelcontextprotocol/"),
                "the README runs `npx -y {package}`, a name nobody may own"
            );
        }
    }
    assert!(
        seen >= 2,
        "the README's host snippets were not found ({seen})"
    );
}

/// The fenced blocks of `lang` in a Markdown text, in order.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<&'a str> {
    text.split(&format!("```{lang}\n"))
        .skip(1)
        .filter_map(|rest| rest.split_once("\n```").map(|(block, _)| block))
        .collect()
}

/// Every host configuration the README shows runs: each one's flags are ones the proxy takes,
/// with values it accepts. Each is run with its directories replaced by a temporary one and
/// its server by `true` (the proxy exits with its code, 0); one of them is the configuration
/// for hosts that cannot ask, and the policy shown beside it loads.
#[test]
fn every_host_configuration_in_the_readme_runs() {
    let readme = text("README.md");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let mut configs: Vec<Vec<String>> = Vec::new();
    for block in blocks(&readme, "json") {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(block) else {
            continue;
        };
        for servers in ["mcpServers", "servers"] {
            for server in value[servers]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
            {
                if server["command"] == "fsbroker" {
                    let args = server["args"].as_array().unwrap();
                    configs.push(args.iter().map(|a| a.as_str().unwrap().into()).collect());
                }
            }
        }
    }
    assert!(configs.len() >= 3, "host configurations found: {configs:?}");
    assert!(
        configs
            .iter()
            .any(|c| c.iter().any(|a| a == "--consent-fallback")),
        "the configuration for hosts that cannot ask: {configs:?}"
    );
    for config in &configs {
        let end = config
            .iter()
            .position(|a| a == "--")
            .unwrap_or_else(|| panic!("{config:?} has no `--` before the server"));
        let mut args: Vec<String> = Vec::new();
        let mut flags = config[..end].iter();
        while let Some(a) = flags.next() {
            args.push(a.clone());
            if a == "--root" {
                let value = flags.next().unwrap();
                let mount = value.split_once('=').map(|(m, _)| format!("{m}="));
                args.push(format!("{}{root}", mount.unwrap_or_default()));
            }
        }
        args.extend(["--".into(), "true".into()]);
        let mut cmd = std::process::Command::new(crate::common::bin());
        cmd.args(&args).stdin(std::process::Stdio::null());
        // A configuration that attaches finds the daemon on its default socket.
        let _daemon = args.iter().any(|a| a == "--daemon").then(|| {
            // Beside the root, never in it: the daemon refuses a root holding its key.
            let run = tempfile::tempdir().unwrap();
            cmd.env("XDG_RUNTIME_DIR", run.path());
            (Daemon::start(run.path(), root), run)
        });
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{config:?} (run as {args:?}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let hosts = section(&readme, "Usage")
        .split("**Hosts that cannot ask.**")
        .nth(1)
        .expect("the README says what to do under hosts that cannot ask");
    let policy = blocks(hosts, "toml")
        .into_iter()
        .next()
        .expect("the policy for hosts that cannot ask");
    let policy = policy.replace("/home/me/notes", root);
    let policy = mcp_fsbroker::Policy::parse(&policy, "README").unwrap_or_else(|e| panic!("{e}"));
    assert!(!policy.consent.rules.is_empty(), "it decides by rules");
}

/// A daemon on the default socket under `run` (its `XDG_RUNTIME_DIR`), offering `root`;
/// killed when dropped.
struct Daemon(std::process::Child);

impl Daemon {
    fn start(run: &std::path::Path, root: &str) -> Daemon {
        let child = std::process::Command::new(crate::common::bin())
            .args(["daemon", "--foreground", "--root", root])
            .env("XDG_RUNTIME_DIR", run)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let d = Daemon(child);
        // The key is written before the socket is bound: both, then it answers.
        let key = run.join("fsbroker/broker.key");
        let socket = run.join("fsbroker/broker.sock");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !key.exists() || !socket.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the daemon did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        d
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
