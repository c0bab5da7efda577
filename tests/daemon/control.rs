//! A connection to the daemon's socket that has said hello with the user's key: control
//! ops, and a session attached under a name of the test's choosing (as any client holding
//! the key may choose it), its JSON-RPC lines sent as they are.

use crate::place::Place;
use crate::sidecar::WAIT;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

/// A connection to the daemon that has said hello.
pub struct Control {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Control {
    pub fn open(p: &Place) -> Control {
        let stream = UnixStream::connect(p.socket()).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        let mut c = Control {
            reader,
            writer: stream,
        };
        let key = std::fs::read_to_string(p.key()).unwrap();
        assert_eq!(c.ask(&json!({"hello": key.trim()}))["ok"], true);
        c
    }

    /// Sends one request line and reads its answer.
    pub fn ask(&mut self, request: &Value) -> Value {
        writeln!(self.writer, "{request}").unwrap();
        let mut line = String::new();
        assert!(
            self.reader.read_line(&mut line).unwrap() > 0,
            "the daemon closed the connection after {request}"
        );
        serde_json::from_str(&line).unwrap()
    }

    /// `history`'s changes, asserting it answered.
    pub fn history(&mut self, request: Value) -> Vec<Value> {
        let a = self.ask(&request);
        assert_eq!(a["ok"], true, "{a}");
        a["changes"].as_array().cloned().unwrap()
    }

    /// Attaches a session named `name` on this connection (which then carries its
    /// JSON-RPC); the session the daemon gave it.
    pub fn attach_as(&mut self, name: &str) -> String {
        let welcome = self.ask(&json!({"op": "attach", "server": name}));
        assert_eq!(welcome["ok"], true, "{welcome}");
        welcome["session"].as_str().unwrap().to_owned()
    }

    /// Sends one JSON-RPC request of the attached session, not waiting for its answer.
    pub fn send(&mut self, id: u64, method: &str, params: Value) {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.writer, "{request}").unwrap();
    }

    /// One JSON-RPC request of the attached session, and its answer.
    pub fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.ask(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
    }
}
