# rpcd in a container: a static binary built with the Go toolchain, run
# by a non-root user on a distroless base (no shell, no package manager).
#
#   docker build -t rpcd .
#   docker run --rm -p 7070:7070 -p 8080:8080 -p 127.0.0.1:7071:7071 rpcd
#   docker run --rm -p 7070:7070 -e RPCD_MAX_CONNS=20000 \
#       -v "$PWD/rpcd.yaml:/etc/rpcd/rpcd.yaml:ro" -e RPCD_CONFIG=/etc/rpcd/rpcd.yaml rpcd
#
# Every `rpcd serve` flag is also an environment variable (RPCD_MAX_CONNS
# for -max-conns) and a key of the file RPCD_CONFIG names:
# docs/configuration.md. A stop (SIGTERM) drains for -drain-timeout (10s);
# give `docker stop -t` more than that.

# golang:1.26-bookworm by a digest that two unrelated public Dockerfiles
# pin it to (this file was written where no registry is reachable, so the
# digest was taken from them, not from the registry). To move it on:
#   docker buildx imagetools inspect golang:1.26-bookworm
FROM golang:1.26-bookworm@sha256:116d58cbd88c1297624acc6e967a060012422bacf9930927e23fb719189c6f36 AS build
WORKDIR /src
# The module's requirements first, in a layer of their own.
COPY go.mod go.sum ./
RUN go mod download && go mod verify
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/rpcd ./cmd/rpcd \
 && /out/rpcd help >/dev/null

# gcr.io/distroless/static-debian12:nonroot by the digest of its
# multi-platform index as of 2026-08-26. To move it on:
#   crane digest gcr.io/distroless/static-debian12:nonroot
FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/rpcd /usr/local/bin/rpcd
# 65532:65532, "nonroot" in the distroless images.
USER nonroot:nonroot
# The admin listener (metrics, pprof, /healthz, /readyz, the live page),
# which the health check asks. It has no authentication: publish it to a
# host's loopback or a private network only (-p 127.0.0.1:7071:7071).
ENV RPCD_ADMIN=0.0.0.0:7071
# The rpcd protocol, the admin listener, and the HTTP/JSON gateway.
EXPOSE 7070 7071 8080
# No shell or curl here: `rpcd health` asks $RPCD_ADMIN's /readyz, and is
# unhealthy before rpcd serves and from the moment it drains.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/rpcd", "health"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/rpcd"]
CMD ["serve", "-addr", "0.0.0.0:7070", "-gateway", "0.0.0.0:8080"]
