//! The desktop's notification service: `org.freedesktop.Notifications` on the user's
//! session bus (`DBUS_SESSION_BUS_ADDRESS`), as the freedesktop notification
//! specification defines it. Every call is bounded in time: a service that does not answer
//! must not hold up the questions, which wait on the console page all the same.

use super::text::Text;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::time::Duration;
use zbus::proxy::SignalStream;
use zbus::zvariant::Value;

const SERVICE: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";

/// The longest wait for the bus or the service.
const WAIT: Duration = Duration::from_secs(5);

/// The action that answers yes (every asked path, at the asked access, this session only).
pub(super) const ALLOW: &str = "allow";

/// The action that answers no.
pub(super) const DENY: &str = "deny";

/// The action that opens the console, signed in, and answers nothing: `default`, which
/// services take for a click on the notification itself.
pub(super) const OPEN: &str = "default";

/// The name every notification is sent under.
const APP: &str = "fsbroker";

/// The notification service, reached.
pub(super) struct Desk {
    proxy: zbus::Proxy<'static>,
    /// Whether the service shows actions (buttons): without them a notification only says
    /// where to answer.
    pub actions: bool,
    /// `ActionInvoked` from the service: zbus passes on only what its process sends (the
    /// bus, not the sender, sets a message's sender).
    invoked: SignalStream<'static>,
    /// `NotificationClosed` from the service.
    closed: SignalStream<'static>,
}

/// What the service said.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Said {
    /// The user chose action `.1` on notification `.0`.
    Invoked(u32, String),
    /// Notification `.0` is gone (dismissed, expired, or closed by us).
    Closed(u32),
    /// A signal that did not read as the specification writes it.
    Odd,
    /// The connection ended.
    Gone,
}

impl Desk {
    /// The session bus's notification service, with its capabilities; why not, when it
    /// cannot be reached or does not answer in time.
    pub(super) async fn reach() -> Result<Desk, String> {
        match tokio::time::timeout(WAIT, Desk::reach_now()).await {
            Ok(reached) => reached,
            Err(_) => Err(format!(
                "the session bus or its notification service did not answer within {}s",
                WAIT.as_secs()
            )),
        }
    }

    async fn reach_now() -> Result<Desk, String> {
        let conn = zbus::connection::Builder::session()
            .map_err(|e| format!("no session bus ({e})"))?
            .method_timeout(WAIT)
            .build()
            .await
            .map_err(|e| format!("no session bus ({e})"))?;
        let named = zbus::Proxy::new(&conn, SERVICE, PATH, SERVICE)
            .await
            .map_err(|e| format!("no notification service ({e})"))?;
        let capabilities: Vec<String> = named
            .call("GetCapabilities", &())
            .await
            .map_err(|e| format!("no notification service on the session bus ({e})"))?;
        // From here on, the one process that owns the name now: calls go to it alone, and
        // only its signals are taken. Another that takes the name later (the service
        // restarted) is reached anew, when a call to this one fails.
        let owner: String = conn
            .call_method(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                Some("org.freedesktop.DBus"),
                "GetNameOwner",
                &(SERVICE,),
            )
            .await
            .and_then(|reply| reply.body().deserialize::<String>())
            .map_err(|e| format!("the notification service has no owner ({e})"))?;
        let proxy = zbus::Proxy::new_owned(conn, owner, PATH, SERVICE)
            .await
            .map_err(|e| format!("no notification service ({e})"))?;
        let invoked = proxy
            .receive_signal("ActionInvoked")
            .await
            .map_err(|e| format!("cannot follow the notification service ({e})"))?;
        let closed = proxy
            .receive_signal("NotificationClosed")
            .await
            .map_err(|e| format!("cannot follow the notification service ({e})"))?;
        Ok(Desk {
            proxy,
            actions: capabilities.iter().any(|c| c == "actions"),
            invoked,
            closed,
        })
    }

    /// Shows `text`, with Allow and Deny where the service shows actions; the
    /// notification's number. It stays until it is closed: the question waits as long.
    pub(super) async fn show(&self, text: &Text) -> zbus::Result<u32> {
        // A click on the notification itself (`default`) only opens the console: a stray
        // click must never answer a question.
        let actions: &[&str] = if self.actions {
            &[OPEN, "Open the console", ALLOW, "Allow", DENY, "Deny"]
        } else {
            &[]
        };
        let mut hints: HashMap<&str, Value<'_>> = HashMap::new();
        hints.insert("urgency", Value::U8(2));
        let never_expires = 0i32;
        self.proxy
            .call(
                "Notify",
                &(
                    APP,
                    0u32,
                    "",
                    text.summary.as_str(),
                    text.body.as_str(),
                    actions,
                    hints,
                    never_expires,
                ),
            )
            .await
    }

    /// Closes notification `id`.
    pub(super) async fn close(&self, id: u32) -> zbus::Result<()> {
        self.proxy.call("CloseNotification", &(id,)).await
    }

    /// The next thing the service says.
    pub(super) async fn next(&mut self) -> Said {
        tokio::select! {
            m = self.invoked.next() => match m {
                Some(m) => m
                    .body()
                    .deserialize::<(u32, String)>()
                    .map_or(Said::Odd, |(id, key)| Said::Invoked(id, key)),
                None => Said::Gone,
            },
            m = self.closed.next() => match m {
                Some(m) => m
                    .body()
                    .deserialize::<(u32, u32)>()
                    .map_or(Said::Odd, |(id, _why)| Said::Closed(id)),
                None => Said::Gone,
            },
        }
    }
}
