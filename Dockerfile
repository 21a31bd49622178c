# The image compose.yaml runs: both binaries, plus what media jobs call out to
# (ffmpeg, poppler's pdftoppm) and curl for health checks.
FROM rust:1.95-trixie AS build
# nasm: rav1e's assembly for AVIF outputs (the `avif-asm` feature).
RUN apt-get update && apt-get install -y --no-install-recommends nasm && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p api -p workers --features workers/avif-asm

FROM debian:trixie-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl ffmpeg poppler-utils \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home-dir /var/lib/listing-api --create-home listing
COPY --from=build /src/target/release/api /src/target/release/workers /usr/local/bin/
USER listing
WORKDIR /var/lib/listing-api
ENV DATA_DIR=/var/lib/listing-api
EXPOSE 8080 8081
CMD ["api", "serve"]
