# Multi-stage build of the controller image for Docker users: a release binary on a distroless,
# non-root base. Build: docker build --build-arg VERSION=<v> --build-arg REVISION=<sha> -t
# temporal-worker-controller . (The published image and the tests' come from
# tools/image/package.sh; this file cannot be built here and is linted with hadolint.)
FROM rust:1.95-bookworm AS build
# The Temporal crates compile their protos at build time. Not pinned (hadolint DL3008): the builder
# stage's Debian release (bookworm) already fixes the protoc line, the tool does not reach the final
# image, and an exact Debian revision disappears from the mirrors at its next security update.
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends protobuf-compiler libprotobuf-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin temporal-worker-controller

# The layout of the image tools/image/package.sh builds without Docker (docs/image.md): glibc,
# libgcc, CA bundle, tzdata, nonroot 65532, no shell; the binary as entrypoint, `run` as command.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/temporalio/temporal-worker-controller-rs" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.title="temporal-worker-controller"
COPY --from=build /src/target/release/temporal-worker-controller /usr/local/bin/temporal-worker-controller
USER 65532:65532
WORKDIR /
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/temporal-worker-controller"]
CMD ["run"]
