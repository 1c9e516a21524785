//! Which HTML documentation trees the local search stack serves and indexes.
//!
//! A tree is named either relative to the doc root (`/usr/share/doc`), e.g.
//! `python3.11-doc/html`, or by an absolute path. A tree under the doc root keeps its path below
//! the root as its URL path (`<docs base>/python3.11-doc/html/library/json.html`); a tree
//! elsewhere is served at its absolute path without the leading `/` (`/opt/manual` at
//! `<docs base>/opt/manual/...`). The index builder (`tests/tools/build_docs_index.py`) applies
//! the same rule, and names an index of non-default trees after them
//! ([`DocTrees::index_file_name`]), so indexes of different tree sets can sit side by side in one
//! work directory.
//!
//! The list comes from `--doc-tree` flags (`demo-services`), else `$QUARRY_DOC_TREES` (trees
//! separated by `:` or `,`), else [`DEFAULT_DOC_TREES`].

use std::path::{Component, Path, PathBuf};

/// Root served by default: where Debian's doc packages install their HTML.
pub const DEFAULT_DOC_ROOT: &str = "/usr/share/doc";

/// The trees served and indexed when none are configured: Debian's Python 3.11 and
/// PostgreSQL 15 HTML docs, relative to [`DEFAULT_DOC_ROOT`].
pub const DEFAULT_DOC_TREES: [&str; 2] = ["python3.11-doc/html", "postgresql-doc-15/html"];
/// The trees of the frozen eval set `tests/eval/frozen.jsonl`: the defaults plus Debian's
/// `git-doc` (Git's AsciiDoc-generated HTML manual); `scripts/install-test-deps.sh` always
/// builds their index.
pub const EVAL_FROZEN_DOC_TREES: [&str; 3] =
    ["python3.11-doc/html", "postgresql-doc-15/html", "git-doc"];
/// The environment variable listing the trees (separated by `:` or `,`).
pub const DOC_TREES_ENV: &str = "QUARRY_DOC_TREES";
/// File name of the index of [`DEFAULT_DOC_TREES`] inside the work directory.
pub const DEFAULT_INDEX_FILE: &str = "docs-index.sqlite";

/// A tree list that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocTreesError {
    /// The list names no tree.
    #[error("no documentation tree given (from {source_name})")]
    Empty {
        /// Where the list came from (`--doc-tree`, `$QUARRY_DOC_TREES`).
        source_name: String,
    },
    /// A tree path is not a plain path (`..`, `.` or an empty relative path).
    #[error(
        "documentation tree {spec:?} is not a plain path: give a directory below {root} (no `..`) or an absolute path"
    )]
    NotPlain {
        /// The tree as given.
        spec: String,
        /// The doc root it would be relative to.
        root: String,
    },
    /// Two entries name the same tree.
    #[error("documentation tree {url_path:?} is listed twice")]
    Duplicate {
        /// The tree's URL path.
        url_path: String,
    },
}

/// One HTML tree: where it is on disk and where it is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocTree {
    url_path: String,
    dir: PathBuf,
    under_root: bool,
}

impl DocTree {
    /// Resolves `spec` (relative to `root`, or absolute) into a tree. Pure: nothing is read.
    pub fn resolve(spec: &str, root: &Path) -> Result<Self, DocTreesError> {
        let not_plain = || DocTreesError::NotPlain {
            spec: spec.to_string(),
            root: root.display().to_string(),
        };
        let trimmed = spec.trim().trim_end_matches('/');
        if trimmed.split('/').any(|part| part == "." || part == "..") {
            return Err(not_plain());
        }
        let path = Path::new(trimmed);
        // Lexical only: Debian's trees are symlinks (python3.11-doc/html -> ../python3.11/html),
        // and the URL must follow the name given, not the link's target.
        let (relative, under_root) = if path.is_absolute() {
            match path.strip_prefix(root) {
                Ok(rel) => (rel.to_path_buf(), true),
                Err(_) => (
                    path.strip_prefix("/").map_err(|_| not_plain())?.into(),
                    false,
                ),
            }
        } else {
            (path.to_path_buf(), true)
        };
        let mut parts = Vec::new();
        for component in relative.components() {
            match component {
                Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
                _ => return Err(not_plain()),
            }
        }
        if parts.is_empty() {
            return Err(not_plain());
        }
        let url_path = parts.join("/");
        let dir = if under_root {
            root.join(&url_path)
        } else {
            Path::new("/").join(&url_path)
        };
        Ok(Self {
            url_path,
            dir,
            under_root,
        })
    }

    /// The tree's path in URLs and in the index (`python3.11-doc/html`, `opt/manual`).
    pub fn url_path(&self) -> &str {
        &self.url_path
    }

    /// The directory on disk.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// True when the tree lies under the doc root, which the docs server serves as a whole.
    pub fn is_under_root(&self) -> bool {
        self.under_root
    }

    /// The file of a page path (`<url path>/...`) of this tree, `None` for another tree's page.
    pub fn page_file(&self, page: &str) -> Option<PathBuf> {
        let rest = page.strip_prefix(&self.url_path)?.strip_prefix('/')?;
        Some(self.dir.join(rest))
    }

    /// What is wrong with the tree on this machine: `None` when it is a directory holding at
    /// least one `.html` file at its top.
    pub fn problem(&self) -> Option<String> {
        let has_html = std::fs::read_dir(&self.dir).is_ok_and(|entries| {
            entries.flatten().any(|entry| {
                entry.path().extension().is_some_and(|ext| ext == "html") && entry.path().is_file()
            })
        });
        if has_html {
            return None;
        }
        let what = if self.under_root {
            let package = self.url_path.split('/').next().unwrap_or(&self.url_path);
            format!("Debian package {package} ")
        } else {
            String::new()
        };
        Some(format!(
            "{what}({} holds no HTML pages)",
            self.dir.display()
        ))
    }
}

/// The ordered list of trees the stack serves and indexes, under one doc root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocTrees {
    root: PathBuf,
    trees: Vec<DocTree>,
}

impl DocTrees {
    /// Resolves `specs` under `root`; `source_name` says where they came from, for errors.
    pub fn new<S: AsRef<str>>(
        specs: &[S],
        root: &Path,
        source_name: &str,
    ) -> Result<Self, DocTreesError> {
        let mut trees: Vec<DocTree> = Vec::new();
        for spec in specs {
            let tree = DocTree::resolve(spec.as_ref(), root)?;
            if trees.iter().any(|t| t.url_path == tree.url_path) {
                return Err(DocTreesError::Duplicate {
                    url_path: tree.url_path,
                });
            }
            trees.push(tree);
        }
        if trees.is_empty() {
            return Err(DocTreesError::Empty {
                source_name: source_name.to_string(),
            });
        }
        Ok(Self {
            root: root.to_path_buf(),
            trees,
        })
    }

    /// [`DEFAULT_DOC_TREES`] under [`DEFAULT_DOC_ROOT`].
    pub fn default_trees() -> Self {
        Self::new(
            &DEFAULT_DOC_TREES,
            Path::new(DEFAULT_DOC_ROOT),
            "the defaults",
        )
        .unwrap_or_else(|e| unreachable!("the default trees are plain relative paths: {e}"))
    }

    /// Splits a `$QUARRY_DOC_TREES` value (`:` or `,` between trees; blanks around them and
    /// empty entries ignored) and resolves it under [`DEFAULT_DOC_ROOT`].
    pub fn parse_list(list: &str) -> Result<Self, DocTreesError> {
        let specs: Vec<&str> = list
            .split([':', ','])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        Self::new(
            &specs,
            Path::new(DEFAULT_DOC_ROOT),
            &format!("${DOC_TREES_ENV}"),
        )
    }

    /// The trees of `$QUARRY_DOC_TREES` when it is set and not blank, else the defaults.
    pub fn from_env() -> Result<Self, DocTreesError> {
        match std::env::var(DOC_TREES_ENV) {
            Ok(list) if !list.trim().is_empty() => Self::parse_list(&list),
            _ => Ok(Self::default_trees()),
        }
    }

    /// `--doc-tree` values when any were given, else [`DocTrees::from_env`].
    pub fn from_flags_or_env<S: AsRef<str>>(flags: &[S]) -> Result<Self, DocTreesError> {
        if flags.is_empty() {
            Self::from_env()
        } else {
            Self::new(flags, Path::new(DEFAULT_DOC_ROOT), "--doc-tree")
        }
    }

    /// The doc root relative trees are resolved against (and that the docs server serves).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The trees, in the order given.
    pub fn trees(&self) -> &[DocTree] {
        &self.trees
    }

    /// Every tree's URL path, in order.
    pub fn url_paths(&self) -> Vec<&str> {
        self.trees.iter().map(DocTree::url_path).collect()
    }

    /// True for exactly [`DEFAULT_DOC_TREES`] under [`DEFAULT_DOC_ROOT`].
    pub fn is_default(&self) -> bool {
        *self == Self::default_trees()
    }

    /// The index's file name: [`DEFAULT_INDEX_FILE`] for the default trees, else
    /// `docs-index-<tree>+<tree>....sqlite`, each tree's URL path with every character outside
    /// `[A-Za-z0-9._-]` turned into `_` (the index builder's `index_file_name` is the same rule).
    pub fn index_file_name(&self) -> String {
        if self.is_default() {
            return DEFAULT_INDEX_FILE.to_string();
        }
        let names: Vec<String> = self
            .trees
            .iter()
            .map(|tree| {
                tree.url_path
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect()
            })
            .collect();
        format!("docs-index-{}.sqlite", names.join("+"))
    }

    /// The tree a page path (`<url path>/...`) belongs to.
    pub fn tree_of(&self, page: &str) -> Option<&DocTree> {
        self.trees
            .iter()
            .find(|tree| tree.page_file(page).is_some())
    }

    /// The file on disk of a page path, `None` when no tree holds it.
    pub fn page_file(&self, page: &str) -> Option<PathBuf> {
        self.trees.iter().find_map(|tree| tree.page_file(page))
    }

    /// The trees that are not installed or hold no pages (empty when all are there).
    pub fn missing(&self) -> Vec<String> {
        self.trees.iter().filter_map(DocTree::problem).collect()
    }

    /// Arguments for `tests/tools/build_docs_index.py` naming this root and these trees.
    pub fn builder_args(&self) -> Vec<String> {
        let mut args = vec!["--doc-root".to_string(), self.root.display().to_string()];
        for tree in &self.trees {
            args.push("--tree".to_string());
            args.push(if tree.under_root {
                tree.url_path.clone()
            } else {
                tree.dir.display().to_string()
            });
        }
        args
    }
}

#[cfg(test)]
mod tests;
