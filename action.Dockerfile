# syntax=docker/dockerfile:1
# The image of the GitHub Action (action.yml `runs.image`), built by the runner from this
# repository. GitHub runs Docker actions as the image's default user and documents that it
# must be root (no USER): the runner mounts $GITHUB_WORKSPACE and the $GITHUB_OUTPUT file,
# owned by its own user, and the action writes cvo-results.sarif and the step output there.
# The operator image (Dockerfile) stays non-root; the build stage is the same as there
# (tests/cli/dockerfile.rs checks both files).

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
# The embedded in-memory API server (`--in-memory`, `cvo dev-apiserver`): a workspace member.
COPY crates ./crates
COPY benches ./benches
# Cache the registry and target dir between builds (BuildKit).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked \
 && install -D -m 0755 target/release/cvo /out/cvo \
 && strip /out/cvo

# Distroless without the `nonroot` tag: its default user is root (uid 0). No USER, no WORKDIR
# (the runner sets the working directory to $GITHUB_WORKSPACE).
FROM gcr.io/distroless/cc-debian12
COPY --from=build /out/cvo /usr/local/bin/cvo
ENTRYPOINT ["cvo"]
