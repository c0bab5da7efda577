//! What clap cannot check of a flag's value by its type: a number of seconds in range, an
//! era, a session name the interface does not keep for itself, a consent mode.

use crate::policy::{ConsentMode, EraMode};

pub(super) fn parse_grace(s: &str) -> Result<std::time::Duration, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| (0.0..=3600.0).contains(v))
        .map(std::time::Duration::from_secs_f64)
        .ok_or_else(|| format!("{s:?} is not a number of seconds between 0 and 3600"))
}

pub(super) fn parse_era(s: &str) -> Result<EraMode, String> {
    EraMode::parse(s).ok_or_else(|| format!("{s:?} is not an era: use auto, legacy or modern"))
}

pub(super) fn parse_server_id(s: &str) -> Result<String, String> {
    crate::session::refuse_reserved(s).map_or_else(|| Ok(s.to_owned()), Err)
}

pub(super) fn parse_mode(s: &str) -> Result<ConsentMode, String> {
    ConsentMode::try_from(s.to_owned())
}

pub(super) fn parse_fallback(s: &str) -> Result<ConsentMode, String> {
    match parse_mode(s)? {
        ConsentMode::Elicit => Err("the fallback answers when the host cannot elicit: use auto, deny, tty, ui or command:PROGRAM".into()),
        mode => Ok(mode),
    }
}
