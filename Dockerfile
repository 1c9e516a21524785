# syntax=docker/dockerfile:1
# The Quarry image: the `quarry` binary (operator, worker, CLI) and the shipped config/ on a
# distroless base, running as uid 65532. Build from the repository root:
#   docker build -t ghcr.io/quarry-dev/quarry:0.1.0 .
# The base images are build arguments so that a machine without registry access can build from
# local stand-ins (scripts/build-images.sh does, for the real-node tests); the defaults are the
# public images every other build uses. The `prebuilt` target (below) takes an already built binary.
ARG BUILD_IMAGE=docker.io/library/rust:1.95-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${BUILD_IMAGE} AS build
# cargo reads this from the environment (a stage's ARGs are): 3 is cargo's release default;
# scripts/build-images.sh lowers it for test images, where a 2-core build at 3 takes too long.
ARG CARGO_PROFILE_RELEASE_OPT_LEVEL=3
WORKDIR /src
# Dependencies first, so a source change does not rebuild them: build against stub sources.
COPY Cargo.toml Cargo.lock ./
COPY operator/vocab/Cargo.toml operator/vocab/Cargo.toml
COPY operator/engine/Cargo.toml operator/engine/Cargo.toml
COPY operator/api/Cargo.toml operator/api/Cargo.toml
COPY operator/controller/Cargo.toml operator/controller/Cargo.toml
COPY operator/quarry/Cargo.toml operator/quarry/Cargo.toml
COPY tests/Cargo.toml tests/Cargo.toml
RUN mkdir -p operator/vocab/src operator/engine/src operator/engine/benches operator/api/src \
        operator/controller/src operator/quarry/src/bin tests/src tests/benches tests/src/bin \
    && for c in vocab engine api controller quarry; do touch operator/$c/src/lib.rs; done \
    && echo 'fn main() {}' > operator/quarry/src/main.rs \
    && echo 'fn main() {}' > operator/quarry/src/bin/kubectl-quarry.rs \
    && touch tests/src/lib.rs && echo 'fn main() {}' > operator/engine/benches/extraction.rs \
    && for b in orchestration scale; do echo 'fn main() {}' > tests/benches/$b.rs; done \
    && for b in scripted-model demo-services; do echo 'fn main() {}' > tests/src/bin/$b.rs; done \
    && cargo build --release --locked -p quarry \
    && rm -rf operator/*/src tests/src
COPY operator operator
COPY config config
# Prompts and the price table are compiled in from config/ (include_str!).
RUN touch operator/*/src/lib.rs operator/quarry/src/main.rs \
    && cargo build --release --locked -p quarry --bin quarry \
    && install -D target/release/quarry /out/quarry

# glibc, CA certificates and tzdata; no shell, no package manager. uid 65532 is `nonroot`.
FROM ${RUNTIME_IMAGE} AS runtime
COPY config /etc/quarry
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/quarry"]
CMD ["operator"]

# `--target prebuilt --build-context quarry-bin=DIR`: the runtime image with DIR/quarry, a binary
# built outside (for a glibc no newer than the runtime base's: Debian bookworm), instead of the
# build stage's. CI builds the workspace anyway; scripts/build-images.sh uses its binary so that
# a test image takes seconds, not a release build. The build stage is skipped (unused).
FROM runtime AS prebuilt
COPY --from=quarry-bin quarry /usr/local/bin/quarry

# The default target (last): the binary built from source above.
FROM runtime
COPY --from=build /out/quarry /usr/local/bin/quarry
