# syntax=docker/dockerfile:1
# The App's image. By default it runs `latestwins serve` (the App as a plain HTTP server on the
# embedded store, in /data); as a Lambda container image its entry point is set to /bootstrap (the
# Lambda function, see docs/deploy.md). Both binaries are static; the final image is scratch with CA
# certificates, run as an unprivileged user.
#
#   docker build -t latestwins .                    # or: docker buildx build --platform linux/arm64,linux/amd64
#   docker run -p 8080:8080 -e LATESTWINS_WEBHOOK_SECRET=... -e LATESTWINS_CONFIG=/config/latestwins.yml \
#     -v "$PWD/.github:/config:ro" latestwins

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The same commands as scripts/build-lambda and the emulator test: static, no cgo, no Lambda RPC mode.
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /out/latestwins ./cmd/latestwins && \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -tags lambda.norpc -o /out/bootstrap ./lambda/cmd/bootstrap && \
    mkdir -p /out/data

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/latestwins /latestwins
COPY --from=build /out/bootstrap /bootstrap
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
ENV LATESTWINS_STORE=bolt:///data/latestwins.db
EXPOSE 8080
ENTRYPOINT ["/latestwins"]
CMD ["serve", "--addr", ":8080"]
