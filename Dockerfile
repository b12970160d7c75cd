# fieldguard: a small, non-root runtime image with no shell.
#
#   docker build -t fieldguard .
#
# Reproducible: pinned toolchain and base images, the lockfile (--locked), no timestamps from
# the build (SOURCE_DATE_EPOCH), vendored protoc (no network fetch besides crates.io).

FROM docker.io/library/rust:1.95.0-slim-bookworm AS build
ARG SOURCE_DATE_EPOCH=0
ENV CARGO_HOME=/usr/local/cargo \
    CARGO_TERM_COLOR=never \
    SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH}
WORKDIR /src
# Dependencies first, so source edits do not rebuild them.
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto ./proto
COPY benches ./benches
COPY src ./src
RUN cargo build --locked --profile dist --bin fieldguard \
 && cp target/dist/fieldguard /fieldguard

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /fieldguard /usr/local/bin/fieldguard
USER 65532:65532
EXPOSE 50051
ENTRYPOINT ["/usr/local/bin/fieldguard"]
CMD ["serve", "--listen", "0.0.0.0:50051"]
