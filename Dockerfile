# syntax=docker/dockerfile:1
# The Quarry image: the `quarry` binary (operator, worker, CLI) and the shipped config/ on a
# distroless base, running as uid 65532. Build from the repository root:
#   docker build -t ghcr.io/quarry-dev/quarry:0.1.0 .

FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
# Dependencies first, so a source change does not rebuild them: build against stub sources.
COPY Cargo.toml Cargo.lock ./
COPY crates/vocab/Cargo.toml crates/vocab/Cargo.toml
COPY crates/engine/Cargo.toml crates/engine/Cargo.toml
COPY crates/api/Cargo.toml crates/api/Cargo.toml
COPY crates/operator/Cargo.toml crates/operator/Cargo.toml
COPY crates/quarry/Cargo.toml crates/quarry/Cargo.toml
COPY tests/Cargo.toml tests/Cargo.toml
RUN mkdir -p crates/vocab/src crates/engine/src crates/engine/benches crates/api/src \
        crates/operator/src crates/quarry/src/bin tests/src tests/benches tests/src/bin \
    && for c in vocab engine api operator quarry; do touch crates/$c/src/lib.rs; done \
    && echo 'fn main() {}' > crates/quarry/src/main.rs \
    && echo 'fn main() {}' > crates/quarry/src/bin/kubectl-quarry.rs \
    && touch tests/src/lib.rs && echo 'fn main() {}' > crates/engine/benches/extraction.rs \
    && for b in orchestration scale; do echo 'fn main() {}' > tests/benches/$b.rs; done \
    && for b in scripted-model demo-services; do echo 'fn main() {}' > tests/src/bin/$b.rs; done \
    && cargo build --release --locked -p quarry \
    && rm -rf crates/*/src tests/src
COPY crates crates
COPY config config
# Prompts and the price table are compiled in from config/ (include_str!).
RUN touch crates/*/src/lib.rs crates/quarry/src/main.rs \
    && cargo build --release --locked -p quarry --bin quarry \
    && install -D target/release/quarry /out/quarry

# glibc, CA certificates and tzdata; no shell, no package manager. uid 65532 is `nonroot`.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/quarry /usr/local/bin/quarry
COPY config /etc/quarry
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/quarry"]
CMD ["operator"]
