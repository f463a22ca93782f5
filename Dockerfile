# syntax=docker/dockerfile:1
# Build:  docker build -t ghcr.io/cvo-project/cvo:1.4.0 .
# The image carries the release it is built from (manifests-example) at /release, and by
# default runs the operator that enforces it (docs/operator.md, "Install"). Every other
# command works as before:
#   docker run --rm ghcr.io/cvo-project/cvo:1.4.0 validate --release /release
#   docker run --rm -v "$PWD/other:/other:ro" ghcr.io/cvo-project/cvo:1.4.0 validate --release /other

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

# TLS is rustls (no OpenSSL); the cc image brings libgcc and glibc.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/cvo /usr/local/bin/cvo
# The release this image enforces; its version is release-metadata's.
COPY manifests-example /release
# Numeric (distroless's nonroot): a pod's runAsNonRoot can only be checked against a number.
USER 65532:65532
ENTRYPOINT ["cvo"]
CMD ["operator", "--release", "/release"]
