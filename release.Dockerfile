# syntax=docker/dockerfile:1
# The released image (goreleaser's dockers_v2, see .goreleaser.yaml): the same image as the
# Dockerfile's, made from the binaries goreleaser already built for each platform
# ($TARGETPLATFORM/latestwins and $TARGETPLATFORM/bootstrap in the build context) instead of
# compiling again. scratch with CA certificates, run as an unprivileged user; `latestwins serve` by
# default, /bootstrap as a Lambda container image (docs/deploy.md).
FROM --platform=$BUILDPLATFORM alpine:3.22 AS base
RUN mkdir -p /out/data

FROM scratch
ARG TARGETPLATFORM
COPY --from=base /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY $TARGETPLATFORM/latestwins /latestwins
COPY $TARGETPLATFORM/bootstrap /bootstrap
COPY --from=base --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
ENV LATESTWINS_STORE=bolt:///data/latestwins.db
EXPOSE 8080
ENTRYPOINT ["/latestwins"]
CMD ["serve", "--addr", ":8080"]
