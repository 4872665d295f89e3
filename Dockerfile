# syntax=docker/dockerfile:1
# Switchyard: one static binary on a distroless base, running as a non-root user.
#
#   docker build -t switchyard .
#   docker run --rm -p 8080:8080 -e DATABASE_URL=... -e SWITCHYARD_SECRET_KEY=... switchyard
#
# The image has no shell and no curl, so it declares no HEALTHCHECK: probe it from outside
# (GET /healthz for liveness, GET /readyz for readiness: database, event store, projections),
# as an orchestrator's HTTP probe or a load balancer's health check does. docker-compose.yml
# orders start-up on its databases' health checks and a one-shot migrate instead.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so a code change does not download modules again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" -o /out/switchyard ./cmd/switchyard
# The data directory, owned by the runtime user (distroless nonroot is 65532).
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/switchyard /usr/local/bin/switchyard
COPY --from=build --chown=65532:65532 /out/data /var/lib/switchyard
ENV SWITCHYARD_LISTEN=:8080 \
    SWITCHYARD_DATA_DIR=/var/lib/switchyard \
    SWITCHYARD_LOG_FORMAT=json
VOLUME ["/var/lib/switchyard"]
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["switchyard"]
CMD ["serve"]
