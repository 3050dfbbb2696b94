# syntax=docker/dockerfile:1
# The stowage controller image. Build: docker build -t <registry>/stowage:<tag> .
#
# Stage 1 compiles the binary with the controller and without the benchmark (HiGHS is built from
# source: it needs cmake, a C++ compiler and libclang for its bindings). Stage 2 is a minimal runtime
# with glibc, libgcc and libstdc++ (what `ldd target/release/stowage` lists), no shell, running as the
# non-root user 65532 the Helm chart's securityContext names.
FROM docker.io/library/rust:1.95-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake clang libclang-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --no-default-features --features controller --bin stowage \
 && install -m 0755 target/release/stowage /stowage

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /stowage /usr/local/bin/stowage
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/stowage"]
CMD ["controller"]
