# Multi-stage build of the controller image: a static-enough release binary on a distroless,
# non-root base. Build: docker build -t temporal-worker-controller .
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

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/temporal-worker-controller /usr/local/bin/temporal-worker-controller
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/temporal-worker-controller"]
CMD ["run", "--leader-elect"]
