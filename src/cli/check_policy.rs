//! `fsbroker check-policy`: loads policy files, checks them against the disk as a start would,
//! and prints what each one puts in force.

use super::terminal::{err, out};
use std::path::PathBuf;
use std::process::ExitCode;

/// Checks every policy file, printing each one's effective configuration (under a comment
/// naming the file when there are several); any file that does not load makes the exit 2,
/// after the others were checked too, so one run reports every broken file.
pub(super) fn run(files: &[PathBuf]) -> ExitCode {
    let mut code = ExitCode::SUCCESS;
    for file in files {
        // Loaded, then settled against the disk as a start would (roots opened and read,
        // consent programs found), so that what passes here also starts.
        let checked = crate::Policy::load(file).and_then(|policy| {
            crate::config::check(policy.clone())
                .map(|()| policy)
                .map_err(|e| crate::policy::PolicyError {
                    file: file.display().to_string(),
                    ..e
                })
        });
        match checked {
            Ok(policy) => {
                if files.len() > 1 {
                    out!("# {}", file.display());
                }
                // The description quotes its strings (`{:?}`), so its line breaks are its own.
                let described = crate::policy::describe(&policy);
                super::terminal::lines(&described.lines().collect::<Vec<_>>());
            }
            Err(e) => {
                err!("fsbroker: {e}");
                code = ExitCode::from(2);
            }
        }
    }
    code
}
