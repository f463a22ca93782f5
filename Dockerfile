# syntax=docker/dockerfile:1
# Build:  docker build -t cvo .
# Run:    docker run --rm -v "$PWD/manifests-example:/release:ro" cvo validate --release /release

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
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
USER nonroot:nonroot
ENTRYPOINT ["cvo"]
