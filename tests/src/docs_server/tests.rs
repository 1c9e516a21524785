//! Unit tests of `docs_server`.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A docs tree inside a temp dir, plus a secret file next to (outside) it.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("doc");
    std::fs::create_dir_all(root.join("pkg/html/_static")).unwrap();
    std::fs::write(
        root.join("pkg/html/page.html"),
        "<html><title>Page</title><body>hello</body></html>",
    )
    .unwrap();
    std::fs::write(root.join("pkg/html/index.html"), "<html>index</html>").unwrap();
    std::fs::write(root.join("pkg/html/_static/basic.css"), "body{}").unwrap();
    std::fs::write(root.join("pkg/html/_static/doctools.js"), "var x;").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "do not serve").unwrap();
    dir
}

/// Sends a raw request line, so the path reaches the server exactly as written.
async fn raw_get(addr: SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

#[tokio::test]
async fn serves_files_with_content_types() {
    let dir = tree();
    let server = DocsServer::start(dir.path().join("doc")).await.unwrap();
    let base = server.base_url();
    assert!(base.starts_with("http://127.0.0.1:"));
    let client = reqwest::Client::new();
    let cases = [
        (
            "/pkg/html/page.html",
            "text/html",
            "<html><title>Page</title>",
        ),
        ("/pkg/html/", "text/html", "<html>index</html>"),
        ("/pkg/html/_static/basic.css", "text/css", "body{}"),
        ("/pkg/html/_static/doctools.js", "text/javascript", "var x;"),
    ];
    for (path, content_type, body_start) in cases {
        let response = client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let ct = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(ct.starts_with(content_type), "{path}: {ct}");
        assert!(
            response.text().await.unwrap().starts_with(body_start),
            "{path}"
        );
    }
    let missing = client
        .get(format!("{base}/pkg/html/nope.html"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let log = server.access_log();
    assert_eq!(log.len(), 5);
    assert_eq!(log[0], "GET /pkg/html/page.html");
    assert_eq!(log[4], "GET /pkg/html/nope.html");
}

#[tokio::test]
async fn refuses_traversal_and_writes() {
    let dir = tree();
    let server = DocsServer::start(dir.path().join("doc")).await.unwrap();
    for path in [
        "/../secret.txt",
        "/pkg/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/pkg/%2E%2E/%2E%2E/secret.txt",
        "/..%2fsecret.txt",
    ] {
        let response = raw_get(server.addr(), path).await;
        assert!(
            response.starts_with("HTTP/1.1 404") || response.starts_with("HTTP/1.1 400"),
            "{path}: {response}"
        );
        assert!(!response.contains("do not serve"), "{path}: {response}");
    }
    let response = reqwest::Client::new()
        .put(format!("{}/pkg/html/page.html", server.base_url()))
        .body("overwritten")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("doc/pkg/html/page.html")).unwrap(),
        "<html><title>Page</title><body>hello</body></html>"
    );
}

#[tokio::test]
async fn mounts_trees_outside_the_root_at_their_absolute_path() {
    let dir = tree();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(outside.path().join("manual/sub")).unwrap();
    std::fs::write(outside.path().join("manual/sub/p.html"), "<p>outside</p>").unwrap();
    let tree_dir = outside.path().join("manual");
    let root = dir.path().join("doc");
    let trees = DocTrees::new(&["pkg/html", tree_dir.to_str().unwrap()], &root, "test").unwrap();
    let server = DocsServer::start_with_trees(&trees).await.unwrap();
    let url_path = trees.trees()[1].url_path();
    assert!(!url_path.starts_with('/'), "{url_path}");
    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        let url = format!("{}/{path}", server.base_url());
        async move {
            let response = client.get(url).send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    assert_eq!(
        get(format!("{url_path}/sub/p.html")).await,
        (200, "<p>outside</p>".to_string())
    );
    assert_eq!(
        get("pkg/html/page.html".to_string()).await.0,
        200,
        "the root is still served"
    );

    let gone = DocTrees::new(&["/nonexistent/quarry-tree"], &root, "test").unwrap();
    let err = DocsServer::start_with_trees(&gone).await.unwrap_err();
    assert!(matches!(err, DocsServerError::NoTree { .. }), "{err:?}");
}

#[tokio::test]
async fn stops_when_dropped_and_rejects_missing_roots() {
    let dir = tree();
    let server = DocsServer::start(dir.path().join("doc")).await.unwrap();
    let addr = server.addr();
    drop(server);
    // The accept loop is aborted; give the runtime a moment to close the listener.
    let mut refused = false;
    for _ in 0..50 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(refused, "docs server still accepting on {addr} after drop");

    let err = DocsServer::start(dir.path().join("absent"))
        .await
        .unwrap_err();
    assert!(matches!(err, DocsServerError::NoRoot { .. }), "{err:?}");
}
