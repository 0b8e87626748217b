# bosun's container image: a static (musl) binary on distroless, non-root.
# Build elsewhere (no container engine runs on the project's machines):
#   docker build -t ghcr.io/bosun-dev/bosun:0.1.0 .
# What can be checked without an engine — that the static binary runs with no libc present —
# is checked by scripts/static-check.sh in the test suite.
FROM rust:1.95-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
# A fixed-address static executable, not a static-pie (3.2 MB less resident memory: see
# scripts/static-build.sh).
ENV RUSTFLAGS="-C relocation-model=static"
RUN cargo build --release --locked -p bosun --no-default-features --features builtin \
 && install -m 0755 target/release/bosun /bosun

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /bosun /bosun
USER 65532:65532
ENTRYPOINT ["/bosun"]
CMD ["run", "--leader-elect"]
