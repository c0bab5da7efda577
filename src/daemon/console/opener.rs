//! Opening a sign-in link in the desktop's browser without putting it on a command line,
//! where every local process could read it (`/proc/PID/cmdline`) and sign in first: the
//! opener is given a page in the daemon's private directory (0700) that sends the browser
//! on. `fsbroker console` opens its link so, and so does a notification's "Open".

use std::path::Path;

/// Whether there is a desktop to open a page on (`DISPLAY` or `WAYLAND_DISPLAY`).
pub(crate) fn desktop() -> bool {
    std::env::var_os("DISPLAY")
        .or(std::env::var_os("WAYLAND_DISPLAY"))
        .is_some()
}

/// Opens `link` through `xdg-open` and a 0600 page beside `socket`: whether the opener ran
/// and succeeded; why not, when the page could not be written.
pub(crate) fn open_privately(socket: &Path, link: &str) -> Result<bool, String> {
    let Some(dir) = socket.parent() else {
        return Ok(false);
    };
    let page = dir.join("console.html");
    let html = format!(
        "<!doctype html><meta charset=utf-8><meta name=referrer content=no-referrer>\
         <meta http-equiv=refresh content=\"0;url={link}\"><title>fsbroker console</title>\
         <a href=\"{link}\">Open the fsbroker console</a>\n"
    );
    let written = {
        use std::io::Write;
        let _ = std::fs::remove_file(&page);
        crate::daemon::private_file(&page).and_then(|mut f| f.write_all(html.as_bytes()))
    };
    written.map_err(|e| format!("cannot write {}: {e}", page.display()))?;
    Ok(std::process::Command::new("xdg-open")
        .arg(&page)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success()))
}
