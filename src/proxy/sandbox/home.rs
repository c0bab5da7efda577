//! The user's home directory, which no inferred rule may open whole. `HOME` alone is not
//! enough: service managers and launchers that clean the environment start processes without
//! it, and a launcher may set it to somewhere else; the password database names the home the
//! user's files are in. Both count, as given and by real path.

use std::path::PathBuf;

/// Every name of the user's home: `HOME` when it is set to an absolute path, the password
/// database's entry for the effective user, and the real path of each. An error when neither
/// names one: the profile cannot then tell what it must not open, so nothing is started.
pub(super) fn homes() -> Result<Vec<PathBuf>, String> {
    let mut out: Vec<PathBuf> = Vec::new();
    if let Some(h) = std::env::var_os("HOME").map(PathBuf::from)
        && h.is_absolute()
    {
        out.push(h);
    }
    if let Some(h) = crate::policy::passwd_home(rustix::process::geteuid().as_raw()) {
        out.push(h);
    }
    if out.is_empty() {
        return Err(
            "cannot tell the user's home directory (HOME is unset and the user has no entry in /etc/passwd), so the profile cannot keep it closed; set HOME".to_owned(),
        );
    }
    let real: Vec<PathBuf> = out
        .iter()
        .filter_map(|h| std::fs::canonicalize(h).ok())
        .collect();
    out.extend(real);
    let mut seen = std::collections::HashSet::new();
    out.retain(|h| seen.insert(h.clone()));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    #[test]
    fn root_has_a_home_in_the_password_database() {
        assert_eq!(crate::policy::passwd_home(0), Some(PathBuf::from("/root")));
    }
}
