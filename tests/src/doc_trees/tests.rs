//! Unit tests of `doc_trees`.

use super::*;

const ROOT: &str = "/usr/share/doc";

fn trees(specs: &[&str]) -> Result<DocTrees, DocTreesError> {
    DocTrees::new(specs, Path::new(ROOT), "test")
}

#[test]
fn relative_and_absolute_trees_get_url_paths() {
    let t = trees(&[
        "git-doc",
        "/usr/share/doc/python3.11-doc/html/",
        "/opt/manual/html",
    ])
    .unwrap();
    assert_eq!(
        t.url_paths(),
        ["git-doc", "python3.11-doc/html", "opt/manual/html"]
    );
    let [git, py, opt] = t.trees() else {
        panic!("three trees")
    };
    assert!(git.is_under_root() && py.is_under_root() && !opt.is_under_root());
    assert_eq!(git.dir(), Path::new("/usr/share/doc/git-doc"));
    assert_eq!(py.dir(), Path::new("/usr/share/doc/python3.11-doc/html"));
    assert_eq!(opt.dir(), Path::new("/opt/manual/html"));
    assert_eq!(
        t.page_file("opt/manual/html/a/b.html"),
        Some(PathBuf::from("/opt/manual/html/a/b.html"))
    );
    assert_eq!(
        t.page_file("git-doc/git-rebase.html"),
        Some(PathBuf::from("/usr/share/doc/git-doc/git-rebase.html"))
    );
    // A prefix of a name is not its tree.
    assert_eq!(t.page_file("git-doc-extra/x.html"), None);
    assert_eq!(t.tree_of("python3.11-doc/html/x.html"), Some(py));
    assert_eq!(
        t.builder_args(),
        [
            "--doc-root",
            ROOT,
            "--tree",
            "git-doc",
            "--tree",
            "python3.11-doc/html",
            "--tree",
            "/opt/manual/html"
        ]
    );
}

#[test]
fn bad_lists_are_refused() {
    assert!(matches!(
        trees(&["../etc"]),
        Err(DocTreesError::NotPlain { .. })
    ));
    assert!(matches!(
        trees(&["a/./b"]),
        Err(DocTreesError::NotPlain { .. })
    ));
    assert!(matches!(trees(&["/"]), Err(DocTreesError::NotPlain { .. })));
    assert!(matches!(
        trees(&["git-doc", "/usr/share/doc/git-doc"]),
        Err(DocTreesError::Duplicate { .. })
    ));
    assert!(matches!(trees(&[]), Err(DocTreesError::Empty { .. })));
    let err = DocTrees::parse_list(" : , ").unwrap_err();
    assert_eq!(
        err.to_string(),
        "no documentation tree given (from $QUARRY_DOC_TREES)"
    );
}

#[test]
fn env_lists_split_on_colons_and_commas() {
    let t = DocTrees::parse_list("python3.11-doc/html, postgresql-doc-15/html:git-doc").unwrap();
    assert_eq!(
        t.url_paths(),
        ["python3.11-doc/html", "postgresql-doc-15/html", "git-doc"]
    );
    assert!(!t.is_default());
    let d = DocTrees::parse_list("python3.11-doc/html:postgresql-doc-15/html").unwrap();
    assert!(d.is_default());
    assert_eq!(d, DocTrees::default_trees());
    assert_eq!(
        DocTrees::from_flags_or_env(&["git-doc"])
            .unwrap()
            .url_paths(),
        ["git-doc"]
    );
}

#[test]
fn index_names_keep_the_default_and_name_other_sets() {
    assert_eq!(
        DocTrees::default_trees().index_file_name(),
        "docs-index.sqlite"
    );
    assert_eq!(
        trees(&["python3.11-doc/html", "postgresql-doc-15/html", "git-doc"])
            .unwrap()
            .index_file_name(),
        "docs-index-python3.11-doc_html+postgresql-doc-15_html+git-doc.sqlite"
    );
    // Order matters (it is the index's order of pages), and so does every tree.
    assert_ne!(
        trees(&["postgresql-doc-15/html", "python3.11-doc/html"])
            .unwrap()
            .index_file_name(),
        "docs-index.sqlite"
    );
    assert_eq!(
        trees(&["/opt/my manual"]).unwrap().index_file_name(),
        "docs-index-opt_my_manual.sqlite"
    );
}

#[test]
fn problems_name_the_package_or_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pkg/html")).unwrap();
    std::fs::create_dir_all(dir.path().join("empty")).unwrap();
    std::fs::write(dir.path().join("pkg/html/a.html"), "<p>a</p>").unwrap();
    let t = DocTrees::new(&["pkg/html", "empty", "absent/html"], dir.path(), "test").unwrap();
    let missing = t.missing();
    assert_eq!(missing.len(), 2, "{missing:?}");
    assert!(
        missing[0].starts_with("Debian package empty ("),
        "{missing:?}"
    );
    assert!(
        missing[1].starts_with("Debian package absent ("),
        "{missing:?}"
    );
    assert!(
        missing[1].ends_with("absent/html holds no HTML pages)"),
        "{missing:?}"
    );
}
