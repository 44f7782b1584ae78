# rpcd in a container: a static binary built with the Go toolchain, run
# by a non-root user on a distroless base (no shell, no package manager).
#
#   docker build -t rpcd .
#   docker run --rm -p 7070:7070 -p 8080:8080 rpcd
#   docker run --rm -p 7070:7070 -e RPCD_MAX_CONNS=20000 \
#       -v "$PWD/rpcd.yaml:/etc/rpcd/rpcd.yaml:ro" -e RPCD_CONFIG=/etc/rpcd/rpcd.yaml rpcd
#
# Every `rpcd serve` flag is also an environment variable (RPCD_MAX_CONNS
# for -max-conns) and a key of the file RPCD_CONFIG names:
# docs/configuration.md. A stop (SIGTERM) drains for -drain-timeout (10s);
# give `docker stop -t` more than that.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# The module's requirements first, in a layer of their own.
COPY go.mod go.sum ./
RUN go mod download && go mod verify
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/rpcd ./cmd/rpcd \
 && /out/rpcd help >/dev/null

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/rpcd /usr/local/bin/rpcd
# 65532:65532, "nonroot" in the distroless images.
USER nonroot:nonroot
# The rpcd protocol, and the HTTP/JSON gateway.
EXPOSE 7070 8080
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/rpcd"]
CMD ["serve", "-addr", "0.0.0.0:7070", "-gateway", "0.0.0.0:8080"]
