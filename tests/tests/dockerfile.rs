//! The Dockerfile read as text: what the image holds and runs as, that its bases are build
//! arguments defaulting to the public images, and that the dependency-caching stub step matches the
//! workspace's Cargo targets, which is what would break the build first when a target is added.
//! (The image is really built, from local bases, and run by tests/tests/kube_node.rs.)

use std::collections::BTreeSet;

use quarry_e2e::kube_tools::repo_root;

fn dockerfile() -> String {
    std::fs::read_to_string(repo_root().join("Dockerfile")).expect("Dockerfile")
}

/// Logical lines (continuations joined), comments dropped.
fn instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || trimmed.is_empty() && current.is_empty() {
            continue;
        }
        if let Some(part) = trimmed.strip_suffix('\\') {
            current.push_str(part);
            current.push(' ');
        } else {
            current.push_str(trimmed);
            out.push(std::mem::take(&mut current));
        }
    }
    out
}

/// The stages: (FROM line, the stage's other instructions).
fn stages(lines: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in lines {
        if line.starts_with("FROM ") {
            out.push((line.clone(), Vec::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push(line.clone());
        }
    }
    out
}

#[test]
fn image_is_multi_stage_distroless_non_root_with_only_the_binary_and_config() {
    let lines = instructions(&dockerfile());
    let stages = stages(&lines);
    let froms: Vec<&str> = stages.iter().map(|(f, _)| f.as_str()).collect();
    // The bases are build arguments whose defaults are the public images (a plain `docker build`
    // uses them; scripts/build-images.sh passes local stand-ins). The default target is the last
    // stage: the runtime stage with the binary built from source.
    assert_eq!(
        froms,
        vec![
            "FROM ${BUILD_IMAGE} AS build",
            "FROM ${RUNTIME_IMAGE} AS runtime",
            "FROM runtime AS prebuilt",
            "FROM runtime",
        ]
    );
    let global_args: Vec<&String> = lines
        .iter()
        .take_while(|l| !l.starts_with("FROM "))
        .collect();
    assert_eq!(
        global_args,
        vec![
            "ARG BUILD_IMAGE=docker.io/library/rust:1.95-bookworm",
            "ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot"
        ]
    );
    let runtime = &stages[1].1;
    assert_eq!(
        runtime,
        &vec![
            "COPY config /etc/quarry".to_owned(),
            "USER 65532:65532".to_owned(),
            "EXPOSE 8080".to_owned(),
            "ENTRYPOINT [\"/usr/local/bin/quarry\"]".to_owned(),
            "CMD [\"operator\"]".to_owned(),
        ]
    );
    // Each image target adds only the binary, at the same place; no shell in distroless.
    assert_eq!(
        stages[3].1,
        vec!["COPY --from=build /out/quarry /usr/local/bin/quarry".to_owned()]
    );
    assert_eq!(
        stages[2].1,
        vec!["COPY --from=quarry-bin quarry /usr/local/bin/quarry".to_owned()]
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("cargo build --release --locked -p quarry --bin quarry"))
    );
}

#[test]
fn build_images_uses_the_prebuilt_target_only_when_given_a_binary() {
    let script = std::fs::read_to_string(repo_root().join("scripts/build-images.sh")).unwrap();
    let bud: Vec<&str> = script
        .lines()
        .filter(|l| l.trim_start().starts_with("buildah bud"))
        .collect();
    // The prebuilt build, the from-source build (default target), the search-engine image, the
    // workers' Redis image.
    assert_eq!(bud.len(), 4, "{bud:?}");
    assert!(
        bud[0].contains("--target prebuilt --build-context \"quarry-bin=$bindir\""),
        "{}",
        bud[0]
    );
    assert!(!bud[1].contains("--target"), "{}", bud[1]);
    // The prebuilt image's cache key covers the binary it wraps.
    assert!(script.contains("sha256sum \"$binary\""));
    // The prebuilt branch is the one taken with QUARRY_BINARY, and the test harness passes the
    // binary the suite built.
    assert!(script.contains("binary=${QUARRY_BINARY:-}"));
    let harness = std::fs::read_to_string(repo_root().join("tests/src/node.rs")).unwrap();
    assert!(harness.contains(".env(\"QUARRY_BINARY\""));
}

#[test]
fn build_context_admits_what_the_dockerfile_copies() {
    let ignore = std::fs::read_to_string(repo_root().join(".dockerignore")).expect(".dockerignore");
    let admitted: Vec<&str> = ignore
        .lines()
        .filter_map(|l| l.trim().strip_prefix('!'))
        .collect();
    assert!(
        ignore.lines().any(|l| l.trim() == "*"),
        "the context starts empty"
    );
    for line in instructions(&dockerfile()) {
        let Some(rest) = line.strip_prefix("COPY ") else {
            continue;
        };
        if rest.starts_with("--from") {
            continue;
        }
        let parts: Vec<&str> = rest.split_whitespace().collect();
        for source in &parts[..parts.len() - 1] {
            assert!(
                repo_root().join(source).exists(),
                "COPY {source}: no such path"
            );
            assert!(
                admitted.iter().any(|a| {
                    let a = a.trim_end_matches('/');
                    *source == a
                        || source.starts_with(&format!("{a}/"))
                        || a.starts_with(&format!("{source}/"))
                }),
                "COPY {source} is excluded by .dockerignore"
            );
        }
    }
}

#[test]
fn stub_step_covers_every_cargo_target_path() {
    let text = dockerfile();
    // Every explicit or conventional target path of the manifests the stub build reads.
    let mut needed = BTreeSet::new();
    for (dir, manifest) in [
        ("operator/vocab", "operator/vocab/Cargo.toml"),
        ("operator/engine", "operator/engine/Cargo.toml"),
        ("operator/api", "operator/api/Cargo.toml"),
        ("operator/controller", "operator/controller/Cargo.toml"),
        ("operator/quarry", "operator/quarry/Cargo.toml"),
        ("tests", "tests/Cargo.toml"),
    ] {
        let toml = std::fs::read_to_string(repo_root().join(manifest)).unwrap();
        let mut section = String::new();
        for line in toml.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                section = line.to_owned();
            }
            if section == "[[bench]]"
                && let Some(name) = line.strip_prefix("name = ")
            {
                needed.insert(format!("{dir}/benches/{}.rs", name.trim_matches('"')));
            }
            if (section == "[[bin]]" || section == "[lib]")
                && let Some(path) = line.strip_prefix("path = ")
            {
                needed.insert(format!("{dir}/{}", path.trim_matches('"')));
            }
        }
    }
    let stub_run = instructions(&text)
        .into_iter()
        .find(|l| l.starts_with("RUN mkdir"))
        .expect("stub step");
    for path in &needed {
        let file = path.rsplit('/').next().unwrap();
        let stem = file.trim_end_matches(".rs");
        assert!(
            stub_run.contains(file) || stub_run.contains("for b in") && stub_run.contains(stem),
            "the Dockerfile's stub step does not create {path}"
        );
    }
    assert!(needed.len() >= 5, "{needed:?}");
}

#[test]
fn release_opt_level_is_a_build_argument_defaulting_to_cargos_and_set_before_any_build() {
    let lines = instructions(&dockerfile());
    let build_stage: Vec<&String> = lines
        .iter()
        .skip_while(|l| !l.ends_with(" AS build"))
        .collect();
    let arg = build_stage
        .iter()
        .position(|l| *l == "ARG CARGO_PROFILE_RELEASE_OPT_LEVEL=3")
        .expect("the opt-level ARG in the build stage, default 3");
    let first_build = build_stage
        .iter()
        .position(|l| l.contains("cargo build"))
        .expect("a cargo build");
    // An ARG is in RUN's environment only after it is declared: the dependency layer must see it.
    assert!(arg < first_build, "{build_stage:?}");
    let script = std::fs::read_to_string(repo_root().join("scripts/build-images.sh")).unwrap();
    for arg in [
        "BUILD_IMAGE=",
        "RUNTIME_IMAGE=",
        "CARGO_PROFILE_RELEASE_OPT_LEVEL=",
    ] {
        assert!(
            script.contains(&format!("--build-arg \"{arg}")),
            "scripts/build-images.sh does not pass {arg}"
        );
    }
}
