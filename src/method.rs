//! The methods this broker answers, named once: what a method is called on the wire, whether
//! it changes what later requests see, and whether a face hands it to the broker.

/// A method the broker answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Method {
    /// `ping`.
    Ping,
    /// `roots/list`.
    RootsList,
    /// `files/consent`.
    Consent,
    /// `files/read`.
    Read,
    /// `files/list`.
    List,
    /// `files/stat`.
    Stat,
    /// `files/write`.
    Write,
    /// `files/create`.
    Create,
    /// `files/delete`.
    Delete,
    /// `files/rename`.
    Rename,
    /// `files/watch`.
    Watch,
    /// `files/unwatch`.
    Unwatch,
}

/// The namespace of the broker's own methods: a face hands every name in it to the broker,
/// which answers the names it does not know with `METHOD_NOT_FOUND`.
const FILES_PREFIX: &str = "files/";

impl Method {
    /// Every method, in the order the documentation lists them.
    pub const ALL: [Method; 12] = [
        Method::Ping,
        Method::RootsList,
        Method::Consent,
        Method::Read,
        Method::List,
        Method::Stat,
        Method::Write,
        Method::Create,
        Method::Delete,
        Method::Rename,
        Method::Watch,
        Method::Unwatch,
    ];

    /// The method named `name` on the wire, if the broker answers it.
    pub fn parse(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The method's name on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            Method::Ping => "ping",
            Method::RootsList => "roots/list",
            Method::Consent => "files/consent",
            Method::Read => "files/read",
            Method::List => "files/list",
            Method::Stat => "files/stat",
            Method::Write => "files/write",
            Method::Create => "files/create",
            Method::Delete => "files/delete",
            Method::Rename => "files/rename",
            Method::Watch => "files/watch",
            Method::Unwatch => "files/unwatch",
        }
    }

    /// Whether a request of the method may be allowed by a grant: a grant for the next
    /// request only is used up by one of these.
    pub const fn uses_grants(self) -> bool {
        match self {
            Method::Read
            | Method::List
            | Method::Stat
            | Method::Write
            | Method::Create
            | Method::Delete
            | Method::Rename
            | Method::Watch => true,
            Method::Ping | Method::RootsList | Method::Consent | Method::Unwatch => false,
        }
    }

    /// Whether the method changes what later requests see (grants, files, watches): a face
    /// that runs a session's requests concurrently runs these alone and in order.
    pub const fn is_ordered(self) -> bool {
        match self {
            Method::Consent
            | Method::Write
            | Method::Create
            | Method::Delete
            | Method::Rename
            | Method::Watch
            | Method::Unwatch => true,
            Method::Ping | Method::RootsList | Method::Read | Method::List | Method::Stat => false,
        }
    }

    /// Whether a request of the method may be withdrawn (`notifications/cancelled`, or its
    /// future dropped) and stop where it stands: what only reads, and consent, whose wait is
    /// for a person. A change to files or watches, once started, runs to its end (it holds
    /// blocking work that cannot be stopped half-way), as MCP allows for a request that
    /// cannot be cancelled.
    pub const fn is_cancellable(self) -> bool {
        match self {
            Method::Ping
            | Method::RootsList
            | Method::Read
            | Method::List
            | Method::Stat
            | Method::Consent => true,
            Method::Write
            | Method::Create
            | Method::Delete
            | Method::Rename
            | Method::Watch
            | Method::Unwatch => false,
        }
    }

    /// Whether the method moves file content, and so is charged to a session's byte budget.
    pub(crate) const fn moves_payload(self) -> bool {
        matches!(self, Method::Read | Method::Write)
    }

    /// Whether a face that relays a server's traffic (the proxy, the rmcp adapter) hands the
    /// method to the broker: `roots/list` and the `files/*` methods. A server's `ping` is for
    /// its host.
    pub const fn is_brokered(self) -> bool {
        !matches!(self, Method::Ping)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a face hands a message named `name` to the broker: the brokered methods, and any
/// other name in the `files/` namespace, which the broker answers as not found.
pub(crate) fn is_brokered(name: &str) -> bool {
    match Method::parse(name) {
        Some(m) => m.is_brokered(),
        None => name.starts_with(FILES_PREFIX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for m in Method::ALL {
            assert_eq!(Method::parse(m.name()), Some(m));
        }
        assert_eq!(Method::parse("files/readx"), None);
        assert_eq!(Method::parse("FILES/READ"), None);
    }

    #[test]
    fn brokered_methods() {
        assert!(is_brokered("roots/list"));
        assert!(is_brokered("files/read"));
        assert!(is_brokered("files/nonesuch"));
        assert!(!is_brokered("ping"));
        assert!(!is_brokered("sampling/createMessage"));
        assert!(!is_brokered("roots/listx"));
    }

    #[test]
    fn ordered_methods() {
        let ordered: Vec<&str> = Method::ALL
            .into_iter()
            .filter(|m| m.is_ordered())
            .map(Method::name)
            .collect();
        assert_eq!(
            ordered,
            [
                "files/consent",
                "files/write",
                "files/create",
                "files/delete",
                "files/rename",
                "files/watch",
                "files/unwatch",
            ]
        );
    }
}
