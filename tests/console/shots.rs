//! Screenshots of a view as people see it: a laptop's window (1280×800) and a phone's
//! (390×844), each in the light and the dark theme, through the browser's own emulation
//! (chromedriver passes DevTools commands on), so that no window manager is needed.

use crate::browser::Browser;
use serde_json::json;

/// The sizes and themes every view is kept in: the file name's suffix, width, height,
/// whether phone-like, and the theme.
const LOOKS: [(&str, u32, u32, bool, &str); 4] = [
    ("", 1280, 800, false, "light"),
    ("-dark", 1280, 800, false, "dark"),
    ("-390", 390, 844, true, "light"),
    ("-390-dark", 390, 844, true, "dark"),
];

impl Browser {
    /// Keeps `NAME.png`, `NAME-dark.png`, `NAME-390.png` and `NAME-390-dark.png` in
    /// `$FSBROKER_SCREENSHOTS`, when set; the page is left as it was found.
    pub async fn screenshots(&self, name: &str) {
        if std::env::var_os("FSBROKER_SCREENSHOTS").is_none() {
            return;
        }
        for (suffix, width, height, mobile, theme) in LOOKS {
            self.cdp(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
            )
            .await;
            self.cdp(
                "Emulation.setEmulatedMedia",
                json!({"features": [{"name": "prefers-color-scheme", "value": theme}]}),
            )
            .await;
            // Two frames, so that the layout and the theme are drawn before the picture.
            let _ = self
                .c
                .execute_async(
                    "const done = arguments[0]; \
                     requestAnimationFrame(() => requestAnimationFrame(() => done(true)));",
                    vec![],
                )
                .await;
            self.screenshot(&format!("{name}{suffix}")).await;
        }
        self.cdp("Emulation.clearDeviceMetricsOverride", json!({}))
            .await;
        self.cdp("Emulation.setEmulatedMedia", json!({"features": []}))
            .await;
    }
}
