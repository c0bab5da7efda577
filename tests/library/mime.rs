//! `mimeType` for the source files a code server reads: the seed's own example says `.py` is
//! `text/x-python`, and mime_guess alone gives `text/plain` there (and `video/mp2t` for `.ts`).

use crate::common::*;
use serde_json::json;

const CASES: &[(&str, &str)] = &[
    ("main.py", "text/x-python"),
    ("types.pyi", "text/x-python"),
    ("lib.rs", "text/x-rust"),
    ("app.ts", "text/typescript"),
    ("App.tsx", "text/typescript"),
    ("index.js", "text/javascript"),
    ("mod.mjs", "text/javascript"),
    ("App.jsx", "text/javascript"),
    ("main.go", "text/x-go"),
    ("Cargo.toml", "application/toml"),
    ("ci.yaml", "application/yaml"),
    ("ci.yml", "application/yaml"),
    ("README.md", "text/markdown"),
    ("package.json", "application/json"),
    ("build.sh", "text/x-shellscript"),
    ("main.c", "text/x-c"),
    ("main.h", "text/x-c"),
    ("main.cpp", "text/x-c++"),
    ("main.hpp", "text/x-c++"),
    ("Main.java", "text/x-java"),
    ("index.html", "text/html"),
    ("site.css", "text/css"),
    ("notes.txt", "text/plain"),
    ("UPPER.PY", "text/x-python"),
    ("photo.png", "image/png"),
    ("no-extension", "application/octet-stream"),
];

#[tokio::test]
async fn stat_and_read_name_the_common_source_types() {
    let f = Fixture::new();
    for (name, _) in CASES {
        f.file(name, "x");
    }
    let b = consented(&f).await;
    for (name, mime) in CASES {
        let path = format!("project/{name}");
        let r = call(&b, "s", "files/stat", json!({ "path": path })).await;
        assert_eq!(ok(&r)["mimeType"], *mime, "stat {name}: {r}");
        let r = call(&b, "s", "files/read", json!({ "path": path })).await;
        assert_eq!(ok(&r)["mimeType"], *mime, "read {name}: {r}");
    }
}
